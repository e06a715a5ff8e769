"""The axes of a regime map: what each named axis changes in the scenario, and its unit.

A regime map varies two things a user weighs when asking whether relay decode pays. Most axes
are plain scenario keys (`rate_rps` is `workload.rate_rps`, `rtt_ms` is `link.rtt_ms`,
`model` is `model`, and any dotted key works as in `pdd-plan sweep`); three need a reading:

* ``transfer_gbps``: the rate one transfer gets, Gb/s (`link.transfer_gbps`: every
  candidate's `per_connection_gbps` becomes it over `streams_per_transfer` x
  `tcp_efficiency`), the line's capacity kept: what decides whether relay decode pays.
* ``line_gbps``: the datacenters are joined by **one** line of that many Gb/s
  (`link.candidates` becomes that one SKU, `link.max_lines` 1), so the axis is the line
  capacity itself; on the scenario's first candidate profile (its per-transfer behaviour
  kept) when it names one, else a pristine line as below. Its price follows the rule the bundled eth-20g/25g/40g profiles' sources
  state: linear in $/Gbps between the 10 G metro lit midpoint ($275/Gbps) and the 100 G one
  ($100/Gbps), rounded to the dollar; below 10 G the 10 G figure ($275/Gbps, no metro lit
  price below 10 G in the source), above 100 G the 100 G figure (as eth-400g extrapolates).
  RTT, TCP efficiency and the connection pool are the profiles' (10 ms, 0.9, 16); one TCP
  flow is capped at 10 Gb/s on lines faster than that, as the profiles assume.
* ``line_price``: $ per Gb/s per month; every candidate line costs gbps x price (applied
  after ``line_gbps`` when both are axes).
* ``low_hit_share``: the share of requests whose prefill-side hit rate is below 0.95 (the
  report's "most requests hit >95%, a minority hit little"): the `prefix_hit` histogram's
  bins below 0.95 are scaled to that total and the bins above to the rest, each group keeping
  its shape. It needs a histogram with bins on both sides of 0.95.

Domain code: errors name the axis (`axis NAME`); the command line names its flag.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.sweep.points import set_key

# $/Gbps per month of the two metro lit midpoints the bundled line profiles interpolate between
# (data/profiles/lines/eth-20g.yaml, source: hardware.md section 3, datacentres.com 2025-26)
PRICE_10G_PER_GBPS = 275.0
PRICE_100G_PER_GBPS = 100.0
LOW_HIT_BELOW = 0.95  # "most requests hit >95%": below this a request is in the low-hit minority
SINGLE_FLOW_GBPS = 10.0  # the profiles' one-TCP-flow ceiling on lines faster than 10 Gb/s


def line_price_per_month(gbps: float) -> float:
    """Monthly price of a `gbps` line, in USD, read as the eth-20g profile's source explains."""
    if gbps <= 10:
        per = PRICE_10G_PER_GBPS
    elif gbps >= 100:
        per = PRICE_100G_PER_GBPS
    else:
        per = PRICE_10G_PER_GBPS - (gbps - 10) * (PRICE_10G_PER_GBPS - PRICE_100G_PER_GBPS) / 90
    return float(round(per * gbps))


def line_of(gbps: float, base: str | None = None) -> dict:
    """The custom `link.candidates` entry of a `gbps` line priced by `line_price_per_month`:
    on the bundled profile `base` (what one transfer gets kept), else a pristine line."""
    if base is not None:
        name = f"{base.rsplit('-', 1)[0]}-{gbps:g}g"
        return {"name": name, "gbps": gbps, "cost_per_month": line_price_per_month(gbps),
                "base": base}  # fmt: skip
    return {
        "name": f"eth-{gbps:g}g",
        "gbps": gbps,
        "cost_per_month": line_price_per_month(gbps),
        "per_connection_gbps": SINGLE_FLOW_GBPS if gbps > SINGLE_FLOW_GBPS else None,
    }


def _field(name: str) -> str:
    return f"axis {name}"


def _set_line_gbps(data: dict, value: Any, file: str | None = None) -> dict:
    cands = (data.get("link") or {}).get("candidates") or []
    first = cands[0] if cands else None
    base = first if isinstance(first, str) else (first or {}).get("base")
    out = set_key(data, "link.candidates", [line_of(float(value), base)])
    return set_key(out, "link.max_lines", 1)


def _candidate_dict(c: Any, i: int, file: str | None) -> dict:
    """A `link.candidates` entry as an inline line (a bundled name: on that profile)."""
    if isinstance(c, dict):
        return dict(c)

    sku = profiles.line(str(c), f"link.candidates[{i}]", file)
    return {"name": sku.name, "gbps": sku.gbps, "cost_per_month": sku.cost_per_month,
            "base": str(c)}  # fmt: skip


def _set_line_price(data: dict, value: Any, file: str | None) -> dict:
    link = data.get("link") or {}
    cands = link.get("candidates") or []
    if not cands:
        raise InputError(
            file, _field("line_price"), "the scenario has no link.candidates to price", "add one"
        )
    priced = []
    for i, c in enumerate(cands):
        d = _candidate_dict(c, i, file)
        d["cost_per_month"] = float(d["gbps"]) * float(value)
        priced.append(d)
    return set_key(data, "link.candidates", priced)


def _low_hit_bins(data: dict, file: str | None) -> list[list[float]]:
    hist = ((data.get("workload") or {}).get("prefix_hit") or {}).get("histogram")
    fix = (
        f"give workload.prefix_hit as a histogram with bins on both sides of {LOW_HIT_BELOW:g} "
        "(as the default scenario does)"
    )
    if not hist:
        raise InputError(file, _field("low_hit_share"), "prefix_hit is not a histogram", fix)
    bins = [[float(x) for x in b] for b in hist]
    if any(lo < LOW_HIT_BELOW < hi for lo, hi, _ in bins):
        raise InputError(
            file, _field("low_hit_share"), f"a prefix_hit bin straddles {LOW_HIT_BELOW:g}", fix
        )
    low = sum(s for _, hi, s in bins if hi <= LOW_HIT_BELOW)
    high = sum(s for lo, _, s in bins if lo >= LOW_HIT_BELOW)
    if low <= 0 or high <= 0:
        raise InputError(
            file, _field("low_hit_share"), f"no weight on one side of {LOW_HIT_BELOW:g}", fix
        )
    return bins


def low_hit_histogram(bins: Sequence[Sequence[float]], share: float) -> list[list[float]]:
    """`bins` with the weight below LOW_HIT_BELOW scaled to `share`, the rest to 1 - share."""
    low = sum(b[2] for b in bins if b[1] <= LOW_HIT_BELOW)
    high = 1.0 - low
    out = []
    for lo, hi, s in bins:
        scaled = s * share / low if hi <= LOW_HIT_BELOW else s * (1.0 - share) / high
        out.append([lo, hi, round(scaled, 12)])
    # shares must sum to 1 within 1e-6 (schema); rounding at 1e-12 keeps that
    return out


def _set_low_hit(data: dict, value: Any, file: str | None) -> dict:
    share = float(value)
    if not 0.0 <= share <= 1.0:
        raise InputError(
            file, _field("low_hit_share"), f"{value} is not a share in [0, 1]", "use 0 to 1"
        )
    hist = low_hit_histogram(_low_hit_bins(data, file), share)
    return set_key(data, "workload.prefix_hit", {"histogram": hist})


@dataclass(frozen=True)
class AxisKind:
    """A named axis: its label with unit, and how a value is written into the scenario."""

    name: str
    label: str
    apply: Callable[[dict, Any, str | None], dict]
    order: int = 1  # applied in ascending order (line_gbps before line_price)


def _key_axis(key: str, name: str | None = None) -> Callable[[dict, Any, str | None], dict]:
    def apply(data: dict, value: Any, file: str | None) -> dict:
        try:
            return set_key(data, key, value)
        except InputError as e:  # set_key names the sweep's flag; here the axis is at fault
            raise InputError(file, _field(name or key), e.problem, e.fix) from None

    return apply


NAMED: dict[str, AxisKind] = {
    k.name: k
    for k in (
        AxisKind("line_gbps", "line capacity (Gb/s, one line)", _set_line_gbps, 0),
        AxisKind("rate_rps", "request rate (req/s)", _key_axis("workload.rate_rps", "rate_rps")),
        AxisKind(
            "low_hit_share", f"low-hit share (requests hit < {LOW_HIT_BELOW:g})", _set_low_hit
        ),
        AxisKind("line_price", "line price ($/Gb/s/month)", _set_line_price),
        AxisKind("rtt_ms", "line RTT (ms)", _key_axis("link.rtt_ms", "rtt_ms")),
        AxisKind(
            "transfer_gbps",
            "rate one transfer gets (Gb/s)",
            _key_axis("link.transfer_gbps", "transfer_gbps"),
        ),
        AxisKind("model", "model", _key_axis("model")),
    )
}


_POSITIVE = ("line_gbps", "line_price", "rate_rps", "transfer_gbps")


@dataclass(frozen=True)
class RegimeAxis:
    """One axis of the map: a named axis or a dotted scenario key, and its values in order."""

    name: str
    values: tuple[Any, ...]

    @property
    def kind(self) -> AxisKind:
        return NAMED.get(self.name) or AxisKind(self.name, self.name, _key_axis(self.name))

    @property
    def label(self) -> str:
        return self.kind.label

    def as_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "values": list(self.values)}

    def check(self, file: str | None = None) -> None:
        """Named numeric axes take numbers (positive where a price or a capacity); the schema
        checks the rest when each cell is validated."""
        if not self.values:
            raise InputError(file, _field(self.name), "no values", "give at least one")
        if self.name not in NAMED or self.name == "model":
            return
        for v in self.values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                raise InputError(file, _field(self.name), f"'{v}' is not a number", "use numbers")
            if self.name in _POSITIVE and v <= 0:
                raise InputError(file, _field(self.name), f"{v} must be > 0", "use values > 0")


def apply_axes(
    data: dict, axes: Sequence[RegimeAxis], values: Sequence[Any], file: str | None
) -> dict:
    """A copy of the scenario `data` with each axis set to its value (line_gbps first)."""
    out = copy.deepcopy(data)
    for ax, v in sorted(zip(axes, values), key=lambda av: av[0].kind.order):
        out = ax.kind.apply(out, v, file)
    return out


__all__ = [
    "LOW_HIT_BELOW",
    "NAMED",
    "RegimeAxis",
    "apply_axes",
    "line_of",
    "line_price_per_month",
    "low_hit_histogram",
]
