"""Optimizer: the fleet MILP, the per-architecture search, and the plan it produces."""

from __future__ import annotations

import time

from ..errors import InfeasibleError, InputError
from ..resolve import Context
from ..workload.classes import build_classes
from ..workload.requests import RequestClasses
from . import metrics
from .planner import ArchPlan, Caps, plan_architecture

SIM_KEYS = (
    "ttft_s",
    "tpot_ms",
    "kv_transfer_s",
    "line_utilization",
    "route_share",
    "rld_token_share",
    "goodput_rps",
)


def dinkelbach(
    ctx: Context, a: str, cls: RequestClasses, caps: Caps, tol: float = 1e-6, max_iter: int = 30
) -> ArchPlan:
    """Best goodput per dollar with the rate free: Dinkelbach's iterations over MILPs.

    lambda_k = r_k / c_k; solve max r - lambda_k c; stop when the optimum F(lambda) <= tol * r.
    Since F(lambda*) = 0 at the best ratio, lambda + F / c_min bounds it from above: the gap.
    """
    t0 = time.perf_counter()
    p = plan_architecture(ctx, a, cls, None, caps, objective="goodput")
    lam = p.rate / p.cost_per_hour
    iters, milps = 1, p.milps
    for _ in range(max_iter):
        q = plan_architecture(ctx, a, cls, None, caps, objective="dinkelbach", lam=lam)
        iters += 1
        milps += q.milps
        f = q.solution.objective
        if q.rate / q.cost_per_hour > lam + 1e-12:
            p = q
        if f <= tol * max(q.rate, 1e-9):
            break
        lam = q.rate / q.cost_per_hour
    gap = max(f, 0.0) / (lam * p.cost_per_hour) if lam > 0 else 0.0
    p = (
        plan_architecture(
            ctx,
            a,
            cls,
            None,
            caps,
            objective="dinkelbach",
            lam=p.rate / p.cost_per_hour,
            duals=True,
        )
        if f > 0
        else p
    )
    p.solve_seconds = time.perf_counter() - t0
    p.milps = milps
    p.extra.update({"dinkelbach_iterations": iters, "optimality_gap": gap})
    return p


def solve_architecture(
    ctx: Context, a: str, cls: RequestClasses, rate: float | None, caps: Caps
) -> ArchPlan:
    sc = ctx.scenario
    if sc.objective == "goodput":
        if sc.budget_per_hour is None:
            raise InputError(
                ctx.file,
                "budget_per_hour",
                "objective 'goodput' needs a budget",
                "set budget_per_hour ($/hour)",
            )
        # the rate is the decision; a given rate_rps caps it (demand beyond it does not exist)
        p = plan_architecture(
            ctx,
            a,
            cls,
            None,
            caps,
            objective="goodput",
            budget=sc.budget_per_hour,
            duals=True,
            rate_cap=rate,
        )
        p.extra["optimality_gap"] = 0.0
        return p
    if rate is None:
        if sc.objective == "cost":
            raise InputError(
                ctx.file,
                "workload.rate_rps",
                "objective 'cost' needs a rate",
                "set workload.rate_rps or use objective bcr",
            )
        return dinkelbach(ctx, a, cls, caps)
    p = plan_architecture(ctx, a, cls, rate, caps, duals=True)
    p.extra["optimality_gap"] = 0.0  # min cost at a fixed rate: every combination solved or bounded
    return p


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
        v = verify(ctx, summary, a, n_requests, ctx.scenario.seed)
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
    infeasible: dict[str, str] = {}
    for a in sc.architectures:
        try:
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
            infeasible[a] = str(e)
    if not plans:
        raise InfeasibleError("; ".join(infeasible.values()))
    if timings:  # wall-clock seconds differ run to run: only on request, so plans stay byte-stable
        for a, p in plans.items():
            p["solver"]["seconds"] = round(raw[a].solve_seconds, 3)
    return {
        "schema_version": 2,
        "scenario": sc.name,
        "model": ctx.model.name,
        "rate_rps": round(float(fixed_rate), 4) if fixed_rate is not None else None,
        "objective": sc.objective,
        "sla": sc.sla.model_dump(),
        "classes": len(cls),
        "inputs": sc.model_dump(mode="json"),  # the scenario as validated: a plan file stands alone
        "plans": plans,
        "infeasible": infeasible,
        "comparison": metrics.comparison(plans, raw.get("pdd")),
    }


__all__ = ["optimize", "solve_architecture", "dinkelbach", "InfeasibleError"]
