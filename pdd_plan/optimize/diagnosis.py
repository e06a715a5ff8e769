"""Why an architecture has no plan: structured reasons (`outputs.plan.Reason`), each naming the
scenario field to relax, and the InfeasibleError that carries them (the binding one first)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from pdd_plan.architectures import Architecture
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.inputs.pieces import Sites
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import SLA, Policy
from pdd_plan.latency.line import transfer
from pdd_plan.optimize import tables
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Catalog
from pdd_plan.outputs.plan import REASON_ORDER, Reason
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance
from pdd_plan.workload.requests import RequestClasses

PREFIX = "no plan meets the scenario"


def _ttft_field(q: float) -> str:
    return f"sla.ttft_p{round(q * 100)}_s"


def _gpus_field(sites: Sites, dc: str, gpu: str | None = None) -> str:
    """The datacenter's GPU entry, spelled as resolve names it in its errors."""
    i = sites.index(dc)
    return f"datacenters[{i}].gpus" + (f".{gpu}" if gpu else "")


def ttft_floor_reasons(
    sla: SLA, classes: RequestClasses, pinst: Instance, service: np.ndarray
) -> list[tuple[float, Reason]]:
    """An SLA no queueing can explain: prefill alone runs past the target for too many requests.
    Each reason comes with the factor the target would have to grow by (need / target)."""
    out = []
    for q, s in ((0.9, sla.ttft_p90_s), (0.99, sla.ttft_p99_s)):
        over = float(np.dot(classes.weight, service > s))
        if over > 1 - q + 1e-9:
            order = np.argsort(service)
            cum = np.cumsum(classes.weight[order])
            need = float(service[order][min(np.searchsorted(cum, q - 1e-12), len(cum) - 1)])  # type: ignore[call-overload]
            need = float(np.ceil(need * 100 - 1e-9) / 100)  # shown to 2 decimals: round up
            msg = (
                f"TTFT P{round(q * 100)} <= {s:g} s cannot be met: prefill alone takes up to "
                f"{float(service.max()):.2f} s on {pinst.label} and {over * 100:.1f}% of requests "
                f"exceed {s:g} s with no queueing at all (relax {_ttft_field(q)} to at least "
                f"{need:.2f} s, or use faster prefill GPUs)"
            )
            out.append((need / s, Reason(kind="ttft_floor", message=msg, field=_ttft_field(q))))
    return out


def least_floor(floors: list[list[tuple[float, Reason]]]) -> list[Reason]:
    """When every prefill option alone breaks an SLA, no hardware here helps: report the option
    that needs the least relaxation (only its floor bounds what any prefill option could meet)."""
    if not floors or not all(floors):
        return []
    return [r for _, r in min(floors, key=lambda f: max(x for x, _ in f))]


def tpot_reason(
    sites: Sites,
    catalog: Catalog,
    sla: SLA,
    spec: Architecture,
    prefill_gpu: str,
    context: float,
    md_dc: str,
) -> Reason:
    """Why no decode instance qualifies: the fastest single-request step against the TPOT target."""
    local = spec.decode_role == "decode"  # decode shares prefill's datacenter and GPU type
    dc = sites.prefill if local else md_dc
    gpus = [prefill_gpu] if local else [g for g, n in sites.available(dc).items() if n > 0]
    steps = [
        (roofline.decode_step(i, 1, context).total_s, i.label)
        for g in gpus
        for i in tables.instances(catalog, g)
        if i.n_gpus <= sites.available(dc).get(g, 0)
    ]
    if not steps:
        return Reason(
            kind="gpu_availability",
            message=f"GPU availability: the model fits on no instance of {', '.join(gpus)} within "
            f"the GPUs available in {dc}",
            field=_gpus_field(sites, dc),
        )
    t, label = min(steps)
    return Reason(
        kind="tpot",
        message=f"TPOT {sla.tpot_ms:g} ms is below the fastest decode step "
        f"({t * 1e3:.1f} ms on {label} at {context:,.0f} tokens of context) (relax sla.tpot_ms "
        f"above {t * 1e3:.1f})",
        field="sla.tpot_ms",
    )


def prefill_gpus_reason(sites: Sites, pinst: Instance, n_min: int) -> Reason:
    """A fixed rate needs more prefill instances than the prefill datacenter's GPUs hold."""
    pg = pinst.gpu.name
    have = sites.available(sites.prefill).get(pg, 0)
    return Reason(
        kind="gpu_availability",
        message=f"GPU availability: prefill needs {n_min} x {pinst.n_gpus} {pg} in "
        f"{sites.prefill}, {have} available",
        field=_gpus_field(sites, sites.prefill, pg),
    )


def line_reason(
    model: ModelProfile,
    policy: Policy,
    skus: list[LineSKU],
    mx: int,
    classes: RequestClasses,
    rate: float,
    caps: Caps,
) -> Reason:
    """Why no line option qualifies at a fixed rate: the KV bytes/s against the biggest option
    (`mx`: link.max_lines, 0 without a link)."""
    xb = transfer.line_bytes(model, classes.input_tokens, classes.hit_d, policy.drc)
    load = rate * float(np.dot(classes.weight, xb))  # bytes/s if every request crosses
    if not skus or mx < 1:
        return Reason(
            kind="line_capacity",
            message="line capacity: no line SKU to carry KV between the datacenters "
            "(set link.candidates)",
            field="link.candidates",
        )
    # what a line and its connection pool carry together (transfer.LineConfig.usable_bytes_s)
    sku = max(skus, key=lambda s: transfer.LineConfig(s, 1).usable_bytes_s)
    cap = transfer.LineConfig(sku, mx).usable_bytes_s * caps.line
    need = int(np.floor(load / (transfer.LineConfig(sku, 1).usable_bytes_s * caps.line))) + 1
    r_max = rate * cap / load
    step = 10.0 ** (np.floor(np.log10(r_max)) - 2)
    r_ok = float(f"{np.floor(r_max * (1 - 1e-9) / step) * step:.3g}")  # under, 3 digits, down
    return Reason(
        kind="line_capacity",
        message=f"line capacity: {rate:g} req/s send {load * 8 / 1e9:.3g} Gbps of KV across the "
        f"line, but the biggest option ({mx} x {sku.name}: link.max_lines x the fastest "
        f"candidate) carries {cap * 8 / 1e9:.3g} Gbps at the {caps.line:.0%} utilization cap "
        f"(raise link.max_lines to {need} x {sku.name}, add a faster SKU to link.candidates, or "
        f"lower workload.rate_rps to {r_ok:g})",
        field="link.max_lines",
    )


@dataclass
class Findings:
    """What building the candidates met that could explain an empty answer, kept as facts in
    the order met: the reasons are made from them only for an architecture that comes out
    infeasible (:meth:`reasons`), so a feasible search never prices a diagnosis."""

    sites: Sites
    catalog: Catalog
    sla: SLA
    spec: Architecture
    classes: RequestClasses
    _facts: list[Callable[[], list[Reason]]] = field(default_factory=list)

    def no_decode(self, prefill_gpu: str, context: float, md_dc: str) -> None:
        """No decode option for this prefill GPU and main-decode site (:func:`tpot_reason`)."""
        self._facts.append(
            partial(
                _one,
                tpot_reason,
                self.sites,
                self.catalog,
                self.sla,
                self.spec,
                prefill_gpu,
                context,
                md_dc,
            )
        )

    def prefill_instances(self, seen: list[tuple[Instance, np.ndarray]]) -> None:
        """Every prefill instance tried, with its service times: their TTFT floors
        (:func:`least_floor` of :func:`ttft_floor_reasons`)."""
        sla, classes = self.sla, self.classes
        self._facts.append(
            lambda: least_floor([ttft_floor_reasons(sla, classes, p, s) for p, s in seen])
        )

    def too_few_gpus(self, pinst: Instance, n_min: int) -> None:
        """A fixed rate needs more prefill instances than the GPUs hold
        (:func:`prefill_gpus_reason`)."""
        self._facts.append(partial(_one, prefill_gpus_reason, self.sites, pinst, n_min))

    def reasons(self) -> list[Reason]:
        return [r for make in self._facts for r in make()]


def _one(make: Callable[..., Reason], *args: object) -> list[Reason]:
    return [make(*args)]


Reach = dict  # q -> (smallest share of requests over the target any routing reached, where)


def track_reach(reach: Reach, t: tables.FleetTables, prefill: str) -> None:
    """Remember the smallest share of requests over each TTFT target any routing could reach.
    `prefill` names the combination's pool ("prefill 3 x 16xh100 ...")."""
    for o, pt in enumerate(t.paths):
        for q in tables.QUANTILES:
            best = np.min(
                np.vstack([np.where(pt.allowed[p], pt.miss[q][p], 1.0) for p in pt.allowed]), axis=0
            )
            share = float(np.dot(t.weight, best))
            if q not in reach or share < reach[q][0]:
                reach[q] = (share, f"{prefill}, {t.lines[o].key}")


def reach_reasons(reach: Reach, sla: SLA, crosses_line: bool = True) -> list[Reason]:
    """The TTFT targets no solved combination's routing could keep enough requests under
    (`crosses_line`: the architecture leases a line, so more or faster lines may help)."""
    out = []
    lines = "allow more or faster lines (link.candidates, link.max_lines), " if crosses_line else ""
    for q, (share, where) in sorted(reach.items()):
        if share > 1 - q + 1e-9:
            s_q = sla.ttft_p90_s if q == 0.9 else sla.ttft_p99_s
            msg = (
                f"TTFT P{round(q * 100)} <= {s_q:g} s is out of reach: at best {share * 100:.1f}% "
                f"of requests would exceed it ({where}); relax {_ttft_field(q)}, {lines}or add "
                "prefill GPUs"
            )
            out.append(Reason(kind="ttft_out_of_reach", message=msg, field=_ttft_field(q)))
    return out


def pools_reason(rate_fixed: bool) -> Reason:
    """Every combination solved infeasible for no reason named above: the decode pools."""
    return Reason(
        kind="gpu_availability",
        message="GPU availability: decode and relay pools that meet the TPOT target do not fit in "
        "the GPUs the datacenters list (add GPUs or lower workload.rate_rps)",
        field="workload.rate_rps" if rate_fixed else "datacenters",
    )


def _fallback(sla: SLA) -> Reason:
    return Reason(
        kind="sla",
        message=f"TTFT P90 <= {sla.ttft_p90_s} s / P99 <= {sla.ttft_p99_s} s cannot be met with "
        f"the available GPUs and lines (relax sla.ttft_p90_s/ttft_p99_s, lower "
        f"workload.rate_rps, or add GPUs)",
        field="sla.ttft_p90_s",
    )


def ordered(reasons: list[Reason]) -> list[Reason]:
    """Distinct reasons, binding first: SLA impossibilities (no hardware helps), then TPOT, then
    the line (it rejects every combination when it binds), then availability. Stable."""
    seen: dict[str, Reason] = {}
    for r in reasons:
        seen.setdefault(r.message, r)
    return sorted(seen.values(), key=lambda r: REASON_ORDER[r.kind])


def empty_site_reasons(sites: Sites, spec: Architecture) -> list[Reason]:
    """The datacenters an architecture must use (prefill's, and its decode pool's) that list no
    GPU at all: nothing can run there, whatever the SLA, so they are the culprit."""
    decode_dc = sites.main if spec.crosses_line else sites.prefill
    used: dict[str, list[str]] = {sites.prefill: ["prefill"]}
    used.setdefault(decode_dc, []).append(spec.decode_role.replace("_", " "))
    out = []
    for dc, roles in used.items():
        if not any(n > 0 for n in sites.available(dc).values()):
            field = _gpus_field(sites, dc)
            out.append(
                Reason(
                    kind="gpu_availability",
                    message=f"GPU availability: datacenter '{dc}' lists no GPUs (every count in "
                    f"{field} is 0), and {spec.name} runs {' and '.join(roles)} there (add GPUs "
                    "to it, or place the role in another datacenter with placement:)",
                    field=field,
                )
            )
    return out


def no_combinations(
    sites: Sites, sla: SLA, spec: Architecture, reasons: list[Reason]
) -> InfeasibleError:
    """No prefill / decode combination to solve: an empty datacenter when there is one (the
    reasons gathered then only say what the missing GPUs cannot do), else the reasons."""
    return infeasible(spec.name, empty_site_reasons(sites, spec) or reasons, sla)


def infeasible(architecture: str, reasons: list[Reason], sla: SLA) -> InfeasibleError:
    """The error for `architecture`: its message is the binding reason's sentence."""
    rs = ordered(reasons) or [_fallback(sla)]
    return InfeasibleError(f"{architecture}: {PREFIX}: {rs[0].message}", reasons=rs)
