"""The objectives: minimum cost at a fixed rate, most goodput within a budget, and the best
goodput per dollar with the rate free (Dinkelbach's iterations over MILPs)."""

from __future__ import annotations

import dataclasses
import time

from pdd_plan import architectures
from pdd_plan.common import limits
from pdd_plan.common.errors import InfeasibleError, InputError
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Problem
from pdd_plan.optimize.search import fixed_rate
from pdd_plan.optimize.search.free_rate import FreeRateSearch
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.optimize.summary import MIN_SPEND_PER_HOUR
from pdd_plan.workload.requests import RequestClasses


def rate_per_spend(p: SolverResult) -> float:
    """Dinkelbach's ratio lambda: req/s per $/hour, the spend floored as the plan's BCR is.
    Not the BCR itself (`summary.bcr`: requests per dollar, lambda x 3600): the same order,
    in the units the MILP's objective (rate - lambda x cost) takes."""
    return p.rate / max(p.cost_per_hour, MIN_SPEND_PER_HOUR)


def dinkelbach(
    pb: Problem, a: str, classes: RequestClasses, caps: Caps, tol: float = 1e-6, max_iter: int = 30
) -> SolverResult:
    """Best goodput per dollar with the rate free: Dinkelbach's iterations over MILPs.

    lambda_k = r_k / c_k; solve max r - lambda_k c; stop when the optimum F(lambda) <= tol * r.
    Since F(lambda*) = 0 at the best ratio, lambda + F / c_min bounds it from above: the gap.
    One search serves every iteration: its combinations, line options and path tables do not
    depend on lambda, and each step's optima bound the next step's.

    The gap is over the free-rate space (utilization levels, the caps among them, and pool-size
    ranges: free_rate.py); the fixed-rate search then re-solves at the chosen rate, exactly,
    and its plan is kept when cheaper, so the answer never loses to the min-cost plan at its
    own rate.
    """
    t0 = time.perf_counter()
    search = FreeRateSearch(pb, architectures.get(a), classes, caps)
    p = search.solve("goodput")
    lam = rate_per_spend(p)
    iters, milps, f = 1, p.milps, 0.0
    for _ in range(max_iter):
        if p.cost_per_hour <= MIN_SPEND_PER_HOUR:
            f = 0.0  # all owned at 0 (sunk): no spend, the ratio is unbounded; p has most goodput
            break
        q = search.solve("dinkelbach", lam)
        iters += 1
        milps += q.milps
        f = q.solution.objective
        if rate_per_spend(q) > lam + 1e-12:
            p = q
        if f <= tol * max(q.rate, 1e-9):
            break
        lam = rate_per_spend(q)
    gap = max(f, 0.0) / (lam * max(p.cost_per_hour, MIN_SPEND_PER_HOUR)) if lam > 0 else 0.0
    if f > 0:
        p = search.solve("dinkelbach", rate_per_spend(p), duals=True)
    p, polish_milps = _at_its_rate(pb, search, p, caps, duals=f > 0)
    return dataclasses.replace(
        p,
        solve_seconds=time.perf_counter() - t0,
        milps=milps + polish_milps,
        dinkelbach_iterations=iters,
        optimality_gap=gap,
    )


def _at_its_rate(
    pb: Problem, search: FreeRateSearch, p: SolverResult, caps: Caps, duals: bool
) -> tuple[SolverResult, int]:
    """The cheaper of `p` and the fixed-rate search's plan at p's rate.

    The free-rate MILP sees the prefill pool and the line only at discrete utilization levels,
    with the wait of a pool-size range at its smallest size: a conservative subset of the plans
    the fixed-rate search builds at one rate (exact pool size and utilization). The same rate at
    a lower cost is a better ratio, so the answer never loses to the min-cost plan at its own
    rate. None at p's rate (say every fixed-rate pool size is below p's): p stands. Also
    returns the MILPs the fixed-rate search solved."""
    try:
        q = fixed_rate.plan(pb, search.spec, search.classes, p.rate, caps, duals)
    except InfeasibleError:
        return p, 0
    return (q if q.cost_per_hour < p.cost_per_hour * (1 - 1e-9) else p), q.milps


def solve_architecture(
    pb: Problem, a: str, classes: RequestClasses, rate: float | None, caps: Caps
) -> SolverResult:
    """The plan of `a` for the scenario's objective, within search.time_limit_s (wall clock,
    every MILP and Dinkelbach step together; an enclosing deadline, as optimize() sets per
    architecture, takes precedence). Past it: InputError naming search.time_limit_s.

    The one dispatch over the objective and whether the rate is given: 'goodput' (the rate is
    the decision, a given rate caps it), 'bcr' with the rate free (Dinkelbach), else minimum
    cost at the rate."""
    if pb.objective == "goodput" and pb.budget_per_hour is None:
        raise InputError(
            pb.file,
            "budget_per_hour",
            "objective 'goodput' needs a budget",
            "set budget_per_hour ($/hour)",
        )
    if pb.objective == "cost" and rate is None:
        raise InputError(
            pb.file,
            "workload.rate_rps",
            "objective 'cost' needs a rate",
            "set workload.rate_rps or use objective bcr",
        )
    with limits.deadline(pb.search.time_limit_s, pb.file, f"the {a} search"):
        if pb.objective == "goodput":
            # the rate is the decision; a given rate_rps caps it (demand beyond it does not
            # exist); optimality_gap 0 (the default): every combination solved or bounded
            budget = pb.budget_per_hour
            return plan_architecture(
                pb, a, classes, None, caps, "goodput", budget=budget, duals=True, rate_cap=rate
            )
        if rate is None:
            return dinkelbach(pb, a, classes, caps)
        # min cost at a fixed rate: every combination solved or bounded (optimality_gap 0)
        return plan_architecture(pb, a, classes, rate, caps, duals=True)
