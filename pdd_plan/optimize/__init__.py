"""Optimizer: the fleet MILP, the per-architecture search, and the plan it produces."""

from __future__ import annotations

from ..errors import InfeasibleError
from ..resolve import Context
from ..workload.classes import build_classes
from ..workload.requests import RequestClasses
from . import metrics
from .planner import ArchPlan, plan_architecture


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


def optimize(ctx: Context) -> dict:
    """Plan every architecture the scenario lists; the Plan as a plain, JSON-ready dict."""
    sc = ctx.scenario
    cls = build_classes(ctx)
    fixed_rate = sc.workload.rate_rps or (cls.rate_rps if sc.workload.trace else None)
    plans: dict[str, dict] = {}
    raw: dict[str, ArchPlan] = {}
    rates: dict[str, float] = {}
    for a in sc.architectures:
        if fixed_rate is not None:
            rates[a], raw[a] = fixed_rate, plan_architecture(ctx, a, cls, fixed_rate)
        else:
            rates[a], raw[a] = highest_goodput(ctx, a, cls)
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
