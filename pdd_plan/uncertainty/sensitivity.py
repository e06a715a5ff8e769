"""What would flip the verdict: PDD's gain over a baseline (the verdict's figure: requests per
dollar at the planned rate on the cheapest fleet meeting the SLA, paired.Evaluator.planned_bcr)
with one input at its P10 and P90 and every other at its median (the tornado), the value
inside that band at which the ranking flips (bisection on the input's quantile level), and
the line price at which PDD stops being ahead of the baseline that needs no line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan import architectures
from pdd_plan.evaluate.fleet import FleetSpec
from pdd_plan.outputs.plan_uncertainty import TornadoRow
from pdd_plan.uncertainty.draws import Draws, Marginal
from pdd_plan.uncertainty.paired import Evaluator

LOW, HIGH = 0.1, 0.9
FLIP_STEPS = 6  # bisection steps on the quantile level: 0.4 / 2^6, under 1% of the band
LABEL = {
    "prefill_speed": "prefill speed (x the perf model's)",
    "decode_speed": "decode speed (x the perf model's)",
    "kv_bytes": "KV bytes per request (x nominal)",
    "request_state_bytes": "per-request state on top of the model's (bytes)",
    "line_rate": "per-connection line rate (x nominal)",
    "gpu_price": "GPU price (x nominal)",
    "line_price": "line price (x nominal)",
    "rate": "request rate (x the forecast)",
    "prefix_hit": "prefix-hit fraction (+ shift)",
    "decode_utilization": "the decode utilization cap (search.decode_utilization)",
    "prefill_utilization": "the prefill utilization cap (search.prefill_utilization)",
    "line_utilization": "the line utilization cap (search.line_utilization)",
}
PERF = ("prefill_speed", "decode_speed")

# each planning margin's stated range (paired.MARGINS): the values a planner could defend, and
# where they come from; its bar moves it between the range's ends, the plan's own in the middle
# each margin's value that keeps none: 1, the queue's stability alone (the SLA, by the
# analytic laws and the replay, which tightens a cap when it misses, decides the rest)
# prefill's 0.97 and the line's 0.95 are the laws' reach (search.prefill_utilization,
# search.line_utilization), not margins: no plan or check runs past them
NO_MARGIN = {"decode_utilization": 1.0, "prefill_utilization": 0.97, "line_utilization": 0.95}
MARGIN_RANGES = {
    "decode_utilization": (
        0.9,
        1.0,
        "1: no margin (the TPOT SLA at the operating batch, checked analytically and by the "
        "replay, which tightens the cap when it misses); 0.9: the 10% burst headroom this "
        "planner kept by default before (a convention, no measurement behind it)",
    ),
    "prefill_utilization": (
        0.9,
        0.97,
        "0.97: the laws' reach (the prefill queue's lattice checked to it; the line law's "
        "chain over the feeding pool grows as 1 / (1 - utilization)), no margin past it; 0.9: "
        "the top of search.utilization_levels (a convention)",
    ),
    "line_utilization": (
        0.9,
        0.95,
        "0.95: the line law's reach (its state space grows as 1 / (1 - utilization)), no "
        "margin past it; 0.9: the top of search.utilization_levels (a convention)",
    ),
}


@dataclass(frozen=True)
class MarginLever:
    """A tornado bar for a planning margin: at the bar's low end the range's low value, at its
    high end the high value, at the median the plan's own (linear between)."""

    name: str
    own: float
    low: float
    high: float

    def value(self, level: float) -> float:
        if level <= 0.5:
            f = (0.5 - level) / (0.5 - LOW)
            return self.own + (self.low - self.own) * min(f, 1.0)
        f = (level - 0.5) / (HIGH - 0.5)
        return self.own + (self.high - self.own) * min(f, 1.0)

    def at(self, draws: Draws, level: float) -> dict[str, float]:
        v = self.value(level)
        return {**draws.at(), self.name: v} if v != self.own else draws.at()


def margin_levers(own: dict[str, float]) -> list[MarginLever]:
    """A bar for each planning margin, `own`: the value the plans were made under."""
    return [
        MarginLever(k, own[k], min(lo, own[k]), max(hi, own[k]))
        for k, (lo, hi, _) in MARGIN_RANGES.items()
        if k in own
    ]


@dataclass(frozen=True)
class Lever:
    """One tornado bar: an input, or the perf speeds moved together when they are fully
    correlated (one factor for both: moving one alone is not a draw that can happen)."""

    name: str
    inputs: tuple[Marginal, ...]

    def at(self, draws: Draws, level: float) -> dict[str, float]:
        return draws.at({m.name: level for m in self.inputs})

    def value(self, level: float) -> float:
        return self.inputs[0].quantile(level)


def levers(draws: Draws, correlation: float) -> list[Lever]:
    """The inputs that move a BCR (the rate moves only whether the SLA is met)."""
    ms = [m for m in draws.marginals if m.name != "rate"]
    perf = [m for m in ms if m.name in PERF]
    out = []
    if len(perf) == 2 and correlation >= 1.0 - 1e-12:
        out.append(Lever("perf_speed", tuple(perf)))
        ms = [m for m in ms if m.name not in PERF]
    return out + [Lever(m.name, (m,)) for m in ms]


def label(name: str) -> str:
    return LABEL.get(name, "perf speed, prefill and decode together (x the perf model's)")


class Gains:
    """PDD's gain over `base` at input values (the verdict's figure), through a shared
    Evaluator; `capacity`: the second, named figure instead (SLA goodput per dollar of the
    planned fleets as they are)."""

    def __init__(self, ev: Evaluator, relay: str, base: str, capacity: bool = False):
        self.ev, self.relay, self.base = ev, relay, base
        self.figure = ev.bcr if capacity else ev.planned_bcr

    median: float | None = None  # the gain at the median inputs, once flip() has found it

    def __call__(self, values: dict[str, float]) -> float | None:
        b = self.figure(values, self.base)
        if b <= 0:
            return None
        return self.figure(values, self.relay) / b - 1.0


def _sign(g: float | None) -> int:
    return 0 if g is None or abs(g) < 1e-9 else (1 if g > 0 else -1)


def tornado(gains: Gains, draws: Draws, ls: list[Lever]) -> list[TornadoRow]:
    """Rows sorted by the width of their bar (widest first)."""
    rows = []
    for lv in ls:
        lo, hi = gains(lv.at(draws, LOW)), gains(lv.at(draws, HIGH))
        rows.append(TornadoRow(input=lv.name, low=lv.value(LOW), high=lv.value(HIGH),
                               gain_low=_r(lo), gain_high=_r(hi)))  # fmt: skip

    def width(r: TornadoRow) -> float:
        a, b = r.gain_low, r.gain_high
        return abs((a if a is not None else 0.0) - (b if b is not None else 0.0))

    return sorted(rows, key=lambda r: (-width(r), r.input))


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(f"{x:.4g}")


def _flip_level(gains: Gains, draws: Draws, lv: Lever, end: float, s0: int) -> float:
    """The quantile level between the median and `end` where the gain's sign leaves s0."""
    a, b = 0.5, end
    for _ in range(FLIP_STEPS):
        mid = 0.5 * (a + b)
        if _sign(gains(lv.at(draws, mid))) == s0:
            a = mid
        else:
            b = mid
    return b


def flip(gains: Gains, draws: Draws, ls: list[Lever], rows: list[TornadoRow]) -> str:
    """One sentence: the input (nearest its median) at whose value the ranking flips, or that
    it does not flip inside any input's P10-P90 band."""
    relay, base = (architectures.get(a).title for a in (gains.relay, gains.base))
    g0 = gains.median = gains(draws.at())
    s0 = _sign(g0)
    by_name = {lv.name: lv for lv in ls}
    found: list[tuple[float, str]] = []
    for r in rows:
        lv = by_name[r.input]
        for end, g in ((LOW, r.gain_low), (HIGH, r.gain_high)):
            if _sign(g) == s0:
                continue
            level = _flip_level(gains, draws, lv, end, s0)
            word = "below" if end == LOW else "above"
            found.append((abs(level - 0.5), f"{label(lv.name)} {word} {lv.value(level):.3g}"))
    if s0 == 0:
        where = "ties" if g0 is not None else "has no BCR to compare (no SLA goodput)"
        head = f"At the median inputs {relay} {where} with {base}"
    else:
        head = f"{relay} {'beats' if s0 > 0 else 'trails'} {base} at the median inputs"
    if not found:
        return f"{head}; the ranking does not flip inside any input's P10-P90 band."
    found.sort()
    return f"{head}; the ranking flips with {found[0][1]} (the nearest flip inside the bands)."


def nominal_margins(gains: Gains, margins: list[MarginLever]) -> list[TornadoRow]:
    """Each margin's bar at the plan's own inputs (the headline's): the gain with the margin
    at its range's ends, every input nominal."""
    rows = []
    for m in margins:
        lo, hi = ({m.name: v} if v != m.own else {} for v in (m.low, m.high))
        rows.append(TornadoRow(input=m.name, low=m.low, high=m.high,
                               gain_low=_r(gains(lo)), gain_high=_r(gains(hi))))  # fmt: skip
    return rows


def at_plan(gains: Gains, rows: list[TornadoRow]) -> str:
    """' At the plan's own inputs ...': the headline's sign there, and each margin that flips
    it inside its stated range (empty: nothing to add to the median's sentence)."""
    relay, base = (architectures.get(a).title for a in (gains.relay, gains.base))
    g0 = gains({})
    s0 = _sign(g0)
    flips = [
        f"{label(r.input)} at {v:g} ({_word(g)} {base} by {abs(g):.1%})"
        for r in rows
        for v, g in ((r.low, r.gain_low), (r.high, r.gain_high))
        if g is not None and _sign(g) != s0
    ]
    if s0 == _sign(gains.median) and not flips:
        return ""
    head = f" At the plan's own inputs {relay} {_word(g0)} {base}"
    head += f" by {abs(g0):.1%}" if g0 is not None and s0 != 0 else ""
    if not flips:
        return head + "."
    return f"{head}; a planning margin inside its stated range flips it: {'; '.join(flips)}."


def _word(g: float | None) -> str:
    s = _sign(g)
    return "ties with" if s == 0 else ("beats" if s > 0 else "trails")


def line_break_even(ev: Evaluator, draws: Draws, relay: str, local: str) -> str | None:
    """'PDD stays ahead of IDC-PD while the line costs below $X/month', at the median inputs,
    on the verdict's figure (each side's cheapest fleet meeting the SLA at its planned rate)."""
    if relay not in ev.fleets or local not in ev.fleets:
        return None
    med = draws.at()
    fs: FleetSpec | None = ev.sized(med, relay)
    if fs is None:
        t_relay = architectures.get(relay).title
        return f"{t_relay} has no fleet meeting the SLA at the median inputs: no line price puts it ahead."
    if fs.line is None or fs.line.count < 1:
        return None
    t_relay, t_local = (architectures.get(a).title for a in (relay, local))
    b_local = ev.planned_bcr(med, local)
    rate = ev.planned[relay] * med.get("rate", 1.0)
    gpu = med.get("gpu_price", 1.0) * sum(g.cost_per_hour for g in fs.instances)
    if b_local <= 0:
        return f"{t_local} has no fleet meeting the SLA at the median inputs: {t_relay} is ahead at any line price."
    allowed = rate * 3600.0 / b_local - gpu  # $/hour the line may cost with equal figures
    per_month = allowed / fs.line.count * 8760.0 / 12.0
    now = fs.line.cost_per_hour * med.get("line_price", 1.0) / fs.line.count * 8760.0 / 12.0
    if allowed <= 0:
        return f"{t_relay} trails {t_local} at the median inputs even with a free line."
    return (
        f"{t_relay} stays ahead of {t_local} while the line costs below ${per_month:,.0f}/month "
        f"per line ({fs.line.count} x {fs.line.sku}, now ${now:,.0f}/month; median inputs)."
    )
