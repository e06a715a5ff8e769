"""Objectives over operating points, and the budget.

Cost is $/hour averaged over the points by their weights: the shared fleet is paid in every
point, a point's elastic instances only in it (for a day of periods weighted by hours, the
day's cost is this times the day's hours). Goodput is the points' weighted mean rate. The
objectives: minimum cost; most goodput (cost as a tie-break); goodput - lambda * cost (a
Dinkelbach step toward the best goodput per dollar, dinkelbach.py).
"""

from __future__ import annotations

import pulp

from pdd_plan.optimize.milp.base import GOODPUT_COST_WEIGHT, Model
from pdd_plan.optimize.milp.elastic import elastic_cost
from pdd_plan.optimize.milp.fleet import base_cost_expr


def cost_expr(m: Model):
    cost = base_cost_expr(m)
    if m.pts.elastic is None:
        return cost
    share = m.pts.share
    for k in m.points:
        cost += float(share[k]) * elastic_cost(m, k)
    return cost


def goodput_expr(m: Model):
    """req/s averaged over the points by their weights (a fixed rate is a constant)."""
    if len(m.pts) == 1:
        return m.r[0]
    share = m.pts.share
    return pulp.lpSum(float(share[k]) * m.r[k] for k in m.points)


def define_objective(m: Model, objective: str, lam: float) -> None:
    if objective == "cost":
        m.prob.setObjective(cost_expr(m))
    elif objective == "goodput":
        m.prob.setObjective(goodput_expr(m) - GOODPUT_COST_WEIGHT * cost_expr(m))  # tie-break
    else:  # one Dinkelbach step
        m.prob.setObjective(goodput_expr(m) - lam * cost_expr(m))


def define_budget(m: Model) -> None:
    if m.t.budget_per_hour is not None:
        m.add("budget", cost_expr(m) <= m.t.budget_per_hour)
