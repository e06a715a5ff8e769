"""Optimizer: the fleet MILP, the per-architecture search, and the plan it produces."""

from __future__ import annotations

from .. import limits
from ..errors import InfeasibleError
from ..resolve import Context
from ..schema.plan import ArchitecturePlan, Infeasible, Plan
from ..workload.classes import build_classes
from ..workload.requests import RequestClasses
from . import metrics
from .objectives import dinkelbach, solve_architecture
from .planner import ArchPlan, Caps

SIM_KEYS = (
    "ttft_s",
    "tpot_ms",
    "kv_transfer_s",
    "line_utilization",
    "route_share",
    "rld_token_share",
    "goodput_rps",
)


def _verified(
    ctx: Context, a: str, cls: RequestClasses, rate: float | None, n_requests: int, rounds: int
) -> tuple[ArchPlan, dict]:
    """Solve, replay the plan in the simulator, and while the simulated SLA fails cap the
    bottleneck 10% below the utilization the plan ran it at and re-solve (at most `rounds`
    times). If no plan fits the tighter cap, the last plan stays, marked as missing its SLA."""
    from ..sim.run import verify

    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    history: list[dict] = []
    kept = None
    for i in range(rounds + 1):
        try:
            raw = solve_architecture(ctx, a, cls, rate, caps)
        except InfeasibleError as e:
            if kept is None:
                raise
            history.append({"round": i, "caps": dict(caps.__dict__), "infeasible": str(e)})
            break
        summary = metrics.summarize(raw, cls, raw.rate, ctx.prefill_dc)
        v = verify(ctx, ArchitecturePlan.model_validate(summary), a, n_requests, ctx.scenario.seed)
        kept = (raw, summary, v)
        history.append(
            {
                "round": i,
                "caps": dict(caps.__dict__),
                "sla_met": v["sla_met"],
                "bottleneck": v["bottleneck"],
            }
        )
        if v["sla_met"] or v["bottleneck"] is None or i == rounds:
            break
        caps = caps.tightened(v["bottleneck"], metrics.utilization(raw, v["bottleneck"]))
    raw, summary, v = kept
    sim = {k: v[k] for k in SIM_KEYS if k in v}
    sim.update(
        {"requests": n_requests, "sla_met": v["sla_met"], "checks": v["checks"], "rounds": history}
    )
    summary["simulated"] = sim
    return raw, summary


def optimize(
    ctx: Context,
    verify: bool = True,
    sim_requests: int = 20_000,
    max_rounds: int = 4,
    timings: bool = False,
) -> Plan:
    """Plan every architecture the scenario lists.

    With `verify`, each plan is replayed by the simulator and re-solved with tightened caps
    while its simulated percentiles miss the SLA; the plan keeps analytic and simulated figures.
    An architecture with no plan is reported with its reasons; InfeasibleError only when none
    has one.
    """
    sc = ctx.scenario
    cls = build_classes(ctx)
    fixed_rate = sc.workload.rate_rps or (cls.rate_rps if sc.workload.trace else None)
    plans: dict[str, dict] = {}
    raw: dict[str, ArchPlan] = {}
    infeasible: dict[str, Infeasible] = {}
    for a in sc.architectures:
        # search.time_limit_s holds for one architecture's planning, verification rounds included
        deadline = limits.deadline(sc.search.time_limit_s, ctx.file, f"planning {a}")
        try:
            with deadline:
                if verify:
                    raw[a], plans[a] = _verified(ctx, a, cls, fixed_rate, sim_requests, max_rounds)
                    continue
                raw[a] = solve_architecture(
                    ctx, a, cls, fixed_rate, Caps(decode=sc.search.decode_utilization)
                )
                plans[a] = metrics.summarize(raw[a], cls, raw[a].rate, ctx.prefill_dc)
        except InfeasibleError as e:
            # a baseline that cannot meet the SLA is an answer too (e.g. CDC-PD's P99 over a
            # narrow line); only when no architecture can is the scenario itself infeasible
            infeasible[a] = infeasible_of(e)
    if not plans:
        raise InfeasibleError(
            "; ".join(
                f"{a}: no plan meets the scenario: {i.message}" for a, i in infeasible.items()
            ),
            by_architecture=infeasible,
        )
    if timings:  # wall-clock seconds differ run to run: only on request, so plans stay byte-stable
        for a, p in plans.items():
            p["solver"]["seconds"] = round(raw[a].solve_seconds, 3)
    return Plan(
        scenario=sc.name,
        model=ctx.model.name,
        rate_rps=round(float(fixed_rate), 4) if fixed_rate is not None else None,
        objective=sc.objective,
        sla=sc.sla,
        classes=len(cls),
        inputs=sc,  # the scenario as validated: a plan file stands alone
        plans=plans,
        infeasible=infeasible,
        comparison=metrics.comparison(plans, raw),
    )


def infeasible_of(e: InfeasibleError) -> Infeasible:
    """The structured reasons an InfeasibleError carries (or its message, classified)."""
    if e.reasons:
        return Infeasible(reasons=e.reasons)
    return Infeasible.from_message(str(e))


__all__ = ["optimize", "solve_architecture", "dinkelbach", "InfeasibleError", "Plan"]
