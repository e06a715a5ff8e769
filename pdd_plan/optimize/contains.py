"""PDD contains CDC-PD: PDD with no relay decode is CDC-PD's fleet, routed the same way (every
request P -> MD; the analytic model and the replay are one: uncertainty/paired.fleet_key). So
PDD's answer is never worse than CDC-PD's verified one.

The MILP keeps that on its own (CDC-PD's fleet is one of PDD's), but verification can lose it:
a relay plan may pass the analytic check and miss its replay, and the re-solve under the
tightened cap keeps the relay at a higher price (benchmarks/scenarios/large.yaml at 24 classes:
$745.1/h passes analytically, misses in the replay, is re-solved at a prefill cap of 0.868 to
$809.1/h, against CDC-PD's verified $769.1/h). Then, or where PDD's verification finds no plan
at all, PDD takes CDC-PD's verified fleet and its replay, and the plan says so
(`simulated.note`). Only verified plans are compared: a replay is what can part them.
"""

from __future__ import annotations

from pdd_plan.architectures import LINE_BASELINE, RELAY_ARCH
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.outputs.plan import ArchitecturePlan, Infeasible

TIE = 1e-9  # relative: an equal figure is no reason to swap (the plan keeps its own)


def _figure(p: ArchitecturePlan, objective: str, fixed_rate: bool) -> float:
    """Higher is better: what the objective ranks plans by (at a fixed rate, cost alone)."""
    if fixed_rate or objective == "cost":
        return -p.cost_per_hour
    return p.goodput_rps if objective == "goodput" else p.bcr


def worse(p: ArchitecturePlan, c: ArchitecturePlan, objective: str, fixed_rate: bool) -> bool:
    """Whether plan `p` is worse than `c` on the objective, by more than a tie."""
    a, b = _figure(p, objective, fixed_rate), _figure(c, objective, fixed_rate)
    return a < b - TIE * max(abs(a), abs(b), 1.0)


def take_contained(
    plans: dict[str, ArchitecturePlan],
    raw: dict[str, SolverResult],
    infeasible: dict[str, Infeasible],
    objective: str,
    fixed_rate: bool,
) -> None:
    """PDD's plan (in place, in all three) replaced by CDC-PD's verified one where PDD's
    verified plan is worse on the objective, or PDD has none (see the module doc)."""
    c = plans.get(LINE_BASELINE)
    if c is None or c.simulated is None or not c.simulated.sla_met:
        return
    p = plans.get(RELAY_ARCH)
    if p is None and RELAY_ARCH not in infeasible:
        return  # PDD not planned: nothing to take
    if p is not None and (p.simulated is None or not worse(p, c, objective, fixed_rate)):
        return
    if p is None:
        own = f"PDD's verification found no plan ({infeasible[RELAY_ARCH].reasons[0].message})"
    else:
        own = f"PDD's own verified plan (${p.cost_per_hour:,.1f}/h) is worse than CDC-PD's"
    note = (
        f"{own}; PDD with no relay decode is CDC-PD's verified fleet "
        f"(${c.cost_per_hour:,.1f}/h), so it runs that fleet, as replayed"
    )
    plans[RELAY_ARCH] = c.model_copy(
        update={"simulated": c.simulated.model_copy(update={"note": note})}
    )
    raw[RELAY_ARCH] = raw[LINE_BASELINE]
    infeasible.pop(RELAY_ARCH, None)
