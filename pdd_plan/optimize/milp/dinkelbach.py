"""The best goodput per dollar over operating points: Dinkelbach's iterations on the ratio of
the points' weighted goodput to their weighted cost, one MILP per step.

lambda_k = G_k / C_k; solve max G - lambda_k C; stop when the optimum F(lambda) <= tol * G.
F is decreasing in lambda and zero at the best ratio, so each step's ratio is at least the last.
"""

from __future__ import annotations

from pdd_plan.optimize.milp.result import PointsSolution
from pdd_plan.optimize.milp.solver import solve_points
from pdd_plan.optimize.points import OperatingPoints


def goodput(pts: OperatingPoints, sol: PointsSolution) -> float:
    share = pts.share
    return float(sum(float(share[k]) * p.rate_rps for k, p in enumerate(sol.points)))


def ratio(pts: OperatingPoints, sol: PointsSolution, floor: float) -> float:
    """Weighted goodput per $/hour, the cost floored at `floor` (a fleet costing nothing)."""
    return goodput(pts, sol) / max(sol.cost_per_hour, floor)


def dinkelbach_points(
    pts: OperatingPoints,
    tol: float = 1e-6,
    max_iter: int = 30,
    time_limit_s: float = 30.0,
    floor: float = 1e-9,
) -> tuple[PointsSolution, float] | None:
    """The fleet with the best weighted goodput per dollar, and that ratio (None: infeasible).
    Starts from the most goodput (cost as a tie-break)."""
    best = solve_points(pts, "goodput", 0.0, time_limit_s)
    if best is None:
        return None
    lam = ratio(pts, best, floor)
    for _ in range(max_iter):
        step = solve_points(pts, "dinkelbach", lam, time_limit_s)
        if step is None:  # the same feasible set: cannot happen unless cut off
            break
        if ratio(pts, step, floor) > lam:
            best = step
        if step.objective <= tol * max(goodput(pts, step), floor):
            break
        lam = ratio(pts, best, floor)
    return best, ratio(pts, best, floor)
