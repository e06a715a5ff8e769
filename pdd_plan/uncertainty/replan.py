"""Whether the plan itself flips: each architecture re-planned (the fixed-rate minimum-cost
search, at the planned rate x the corner's rate factor) at the P10/P90 corners of the two
inputs with the widest tornado bars, the others at their medians; how often the line option
or an instance count differs from the nominal plan."""

from __future__ import annotations

from pdd_plan.common.errors import InfeasibleError
from pdd_plan.inputs.context import Context
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.outputs.plan import ArchitecturePlan, Plan
from pdd_plan.outputs.plan_uncertainty import PlanFlips, Versus
from pdd_plan.uncertainty import robust
from pdd_plan.uncertainty.draws import Draws
from pdd_plan.uncertainty.sensitivity import HIGH, LOW, Lever
from pdd_plan.workload.requests import RequestClasses


def strongest(comparisons: dict[str, Versus], ls: list[Lever], n: int = 2) -> list[Lever]:
    """The `n` levers with the widest tornado bars over the comparisons."""
    width: dict[str, float] = {}
    for v in comparisons.values():
        for r in v.tornado:
            w = abs((r.gain_high or 0.0) - (r.gain_low or 0.0))
            width[r.input] = max(width.get(r.input, 0.0), w)
    return sorted(ls, key=lambda lv: (-width.get(lv.name, 0.0), lv.name))[:n]


def _shape(p: ArchitecturePlan) -> tuple[tuple, tuple]:
    counts = tuple(sorted((g.role, g.gpu, g.gpus_per_instance, g.count) for g in p.instances))
    line = (p.line.sku, p.line.count) if p.line is not None else ()
    return line, counts


def plan_flips(
    ctx: Context, cls: RequestClasses, plan: Plan, draws: Draws, levers: list[Lever]
) -> PlanFlips:
    caps = Caps.of(ctx.scenario.search)
    corners = [(a, b) for a in (LOW, HIGH) for b in (LOW, HIGH)] if len(levers) > 1 else [
        (LOW,), (HIGH,)
    ]  # fmt: skip
    line_changes = {a: 0 for a in plan.plans}
    count_changes = {a: 0 for a in plan.plans}
    none = {a: 0 for a in plan.plans}
    for c in corners:
        levels = {m.name: q for lv, q in zip(levers, c) for m in lv.inputs}
        v = draws.at(levels)
        ap = robust._design(ctx, cls, v)
        for a, p in plan.plans.items():
            try:
                rate = float(p.goodput_rps) * v.get("rate", 1.0)
                raw = plan_architecture(ap.prefill, a, ap.classes, rate, caps)
            except InfeasibleError:
                none[a] += 1
                continue
            line0, counts0 = _shape(p)
            line1 = (raw.line.sku.name, raw.line.count) if raw.line is not None else ()
            counts1 = _counts(raw)
            line_changes[a] += line1 != line0
            count_changes[a] += counts1 != counts0
    return PlanFlips(
        inputs=[lv.name for lv in levers],
        corners=len(corners),
        line_changes=line_changes,
        count_changes=count_changes,
        no_plan=none,
    )


def _counts(raw) -> tuple:
    rows = [("prefill", raw.prefill.gpu.name, raw.prefill.n_gpus, raw.prefill_count)]
    for o in raw.options:
        n = raw.solution.counts.get(o.cand.key, 0)
        if n > 0:
            rows.append((o.cand.role, o.cand.gpu, o.cand.gpus, n))
    return tuple(sorted(rows))
