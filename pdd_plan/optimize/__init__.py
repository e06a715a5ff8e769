"""Optimizer: the fleet MILP, the per-architecture search, and the plan it produces."""

from __future__ import annotations

from .. import limits
from ..errors import InfeasibleError
from ..resolve import Context
from ..schema.plan import ArchitecturePlan, Infeasible, Plan, Reason
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
    "warmup",  # the replay's first requests left out of the figures above
)


def _verified(
    ctx: Context, a: str, cls: RequestClasses, rate: float | None, n_requests: int, rounds: int
) -> tuple[ArchPlan, dict]:
    """Solve, replay the plan in the simulator, and while the simulated SLA fails cap the
    bottleneck 10% below the utilization the plan ran it at and re-solve (at most `rounds`
    times). A plan whose replay still misses the SLA then, or whose re-solve under the tighter
    cap finds no plan, does not meet the scenario: InfeasibleError with a `replay_sla` reason
    carrying the replay's figures, so no comparison or ranking can pick it."""
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
        _check_size(ctx, a, summary)
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
    if not v["sla_met"]:
        why = replay_miss(summary["cost_per_hour"], v, n_requests, history)
        raise InfeasibleError(f"{a}: no plan meets the scenario: {why.message}", reasons=[why])
    sim = {k: v[k] for k in SIM_KEYS if k in v}
    sim.update(
        {
            "requests": v["requests"],  # replayed: a trace shorter than n_requests is all of it
            "sla_met": v["sla_met"],
            "checks": v["checks"],
            "rounds": history,
        }
    )
    summary["simulated"] = sim
    return raw, summary


def _check_size(ctx: Context, a: str, summary: dict) -> None:
    """A plan past the PLAN_INSTANCES limit (a rate that needs a huge fleet) is a one-line
    error naming the rate, before the plan schema would refuse it as an internal error."""
    total = sum(int(g["count"]) for g in summary["instances"])
    limits.check(
        "PLAN_INSTANCES",
        total,
        ctx.file,
        "workload.rate_rps",
        f"{a}'s plan needs {total:,} instances: lower the rate",
    )


# the SLA field each replay check compares against
CHECK_FIELDS = {
    "ttft_p90": "sla.ttft_p90_s",
    "ttft_p99": "sla.ttft_p99_s",
    "tpot_p90": "sla.tpot_ms",
}
CHECK_TEXT = {
    "ttft_p90": ("TTFT P90", "s"),
    "ttft_p99": ("TTFT P99", "s"),
    "tpot_p90": ("TPOT P90", "ms"),
}


def replay_miss(cost: float, v: dict, n_requests: int, history: list[dict]) -> Reason:
    """Why a verified plan is not an answer: the replay's figures against the SLA."""

    def fig(k: str) -> str:
        c = v["checks"][k]
        name, unit = CHECK_TEXT[k]
        sim = "-" if c["simulated"] is None else f"{c['simulated']:.3g}"
        return f"{name} {sim} {unit} {'<=' if c['ok'] else '>'} {c['target']:g} {unit}"

    failed = [k for k, c in v["checks"].items() if not c["ok"]]
    met = [k for k in v["checks"] if k not in failed]
    also = f" ({', '.join(fig(k) for k in met)})" if met else ""
    fields = ", ".join(CHECK_FIELDS[k] for k in failed)
    tries = f"{len(history) - 1} re-solve(s) with tighter caps"
    if "infeasible" in history[-1]:
        tries += " (the last found no plan)"
    return Reason(
        kind="replay_sla",
        message=f"the simulator replay ({n_requests:,} requests) of its ${cost:,.1f}/h plan "
        f"misses the SLA after {tries}: "
        f"{', '.join(fig(k) for k in failed)}{also}; relax {fields}, or add capacity "
        f"(bottleneck: {v['bottleneck'] or 'none found'})",
        field=CHECK_FIELDS[failed[0]] if failed else None,
    )


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
                _check_size(ctx, a, plans[a])
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
        comparison=metrics.comparison(plans, raw, cls),
    )


def infeasible_of(e: InfeasibleError) -> Infeasible:
    """The structured reasons an InfeasibleError carries (or its message, classified)."""
    if e.reasons:
        return Infeasible(reasons=e.reasons)
    return Infeasible.from_message(str(e))


__all__ = ["optimize", "solve_architecture", "dinkelbach", "InfeasibleError", "Plan"]
