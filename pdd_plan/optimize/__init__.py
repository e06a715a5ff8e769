"""Optimizer: the fleet MILP, the per-architecture search, and the plan it produces."""

from __future__ import annotations

from ..errors import InfeasibleError
from ..resolve import Context
from ..workload.classes import build_classes
from ..workload.requests import RequestClasses
from . import metrics
from .planner import ArchPlan, Caps, plan_architecture


def highest_goodput(
    ctx: Context, architecture: str, cls: RequestClasses, iters: int = 14
) -> tuple[float, ArchPlan]:
    """The largest rate (req/s) the architecture serves within SLA and GPU availability (bisection:
    feasibility is monotone in rate because every capacity need grows with it)."""
    lo, best = 0.0, None
    hi = 1.0
    while True:  # grow until infeasible
        try:
            best = (hi, plan_architecture(ctx, architecture, cls, hi))
            lo, hi = hi, hi * 2.0
        except InfeasibleError:
            break
        if hi > 1e6:
            break
    if best is None:
        raise InfeasibleError(
            f"{architecture}: not even 1 req/s meets the SLA with the available GPUs"
        )
    for _ in range(iters):
        mid = (lo + hi) / 2.0
        try:
            best = (mid, plan_architecture(ctx, architecture, cls, mid))
            lo = mid
        except InfeasibleError:
            hi = mid
    return best


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
    ctx: Context, a: str, cls: RequestClasses, rate: float, n_requests: int, rounds: int
) -> tuple[ArchPlan, dict]:
    """Solve, replay the plan in the simulator, and while the simulated SLA fails tighten the
    bottleneck's utilization cap by 10% and re-solve (at most `rounds` times)."""
    from ..sim.run import verify

    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    history = []
    for i in range(rounds + 1):
        raw = plan_architecture(ctx, a, cls, rate, caps)
        summary = metrics.summarize(raw, cls, rate, ctx.prefill_dc)
        v = verify(ctx, summary, a, n_requests, ctx.scenario.seed)
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
        caps = caps.tightened(v["bottleneck"])
    sim = {k: v[k] for k in SIM_KEYS if k in v}
    sim.update(
        {"requests": n_requests, "sla_met": v["sla_met"], "checks": v["checks"], "rounds": history}
    )
    summary["simulated"] = sim
    return raw, summary


def optimize(
    ctx: Context, verify: bool = True, sim_requests: int = 20_000, max_rounds: int = 4
) -> dict:
    """Plan every architecture the scenario lists; the Plan as a plain, JSON-ready dict.

    With `verify`, each plan is replayed by the simulator and re-solved with tightened caps
    while its simulated percentiles miss the SLA; the plan keeps analytic and simulated figures.
    """
    sc = ctx.scenario
    cls = build_classes(ctx)
    fixed_rate = sc.workload.rate_rps or (cls.rate_rps if sc.workload.trace else None)
    plans: dict[str, dict] = {}
    raw: dict[str, ArchPlan] = {}
    rates: dict[str, float] = {}
    for a in sc.architectures:
        if fixed_rate is not None:
            rates[a] = fixed_rate
        else:
            rates[a], _ = highest_goodput(ctx, a, cls)
        if verify:
            raw[a], plans[a] = _verified(ctx, a, cls, rates[a], sim_requests, max_rounds)
        else:
            raw[a] = plan_architecture(ctx, a, cls, rates[a])
            plans[a] = metrics.summarize(raw[a], cls, rates[a], ctx.prefill_dc)
    return {
        "scenario": sc.name,
        "model": ctx.model.name,
        "rate_rps": round(float(fixed_rate), 4) if fixed_rate is not None else None,
        "sla": sc.sla.model_dump(),
        "classes": len(cls),
        "inputs": sc.model_dump(mode="json"),  # the scenario as validated: a plan file stands alone
        "plans": plans,
        "comparison": metrics.comparison(plans, raw.get("pdd")),
    }
