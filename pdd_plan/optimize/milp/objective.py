"""Objectives over operating points, and the budget.

Cost is $/hour averaged over the points by their weights: the shared fleet is paid in every
point, a point's elastic instances only in it (for a day of periods weighted by hours, the
day's cost is this times the day's hours). Goodput is the points' weighted mean rate. The
objectives: minimum cost; most goodput (cost as a tie-break); goodput - lambda * cost (a
Dinkelbach step toward the best goodput per dollar, dinkelbach.py).
"""

from __future__ import annotations

from pdd_plan.optimize.milp.base import GOODPUT_COST_WEIGHT, Model, lin
from pdd_plan.optimize.milp.elastic import elastic_cost
from pdd_plan.optimize.milp.fleet import base_cost_expr
from pdd_plan.optimize.milp.linear import total
from pdd_plan.optimize.milp.runs import run_cost

# At equal cost, fewer instances and lines: a free (owned at $0) instance must not be deployed
# for nothing. Each shared instance and line adds this many $/hour to the objective only (never
# to a plan's cost): with at most PLAN_INSTANCES (10,000) instances and LINES lines that is
# under a cent per hour, below any price difference the planner reports, so it orders only
# plans whose costs tie.
INSTANCE_TIE_BREAK = 1e-6


def cost_expr(m: Model):
    cost = base_cost_expr(m)
    if m.pts.elastic is None:
        return cost
    share = m.pts.share
    for k in m.points:
        cost += float(share[k]) * elastic_cost(m, k)
    return cost + run_cost(m)


def goodput_expr(m: Model):
    """req/s averaged over the points by their weights (a fixed rate is a constant)."""
    if len(m.pts) == 1:
        return m.r[0]
    share = m.pts.share
    return total(float(share[k]) * m.r[k] for k in m.points)


def deployed_expr(m: Model):
    """Instances and lines the shared fleet deploys: decode instances, the prefill pool when it
    is a variable (at a fixed rate it is a constant), and the chosen line option's line count."""
    t = m.t
    terms = [(m.n[c.key], 1.0) for c in t.md + t.rld]
    terms += [(m.z[o], ln.config.count) for o, ln in enumerate(t.lines) if ln.config is not None]
    if m.np_ is not None:
        terms.append((m.np_, 1.0))
    return lin(terms)


def define_objective(m: Model, objective: str, lam: float, tie_break: bool = True) -> None:
    charged = cost_expr(m)
    if tie_break:  # ties: fewer deployed
        charged += INSTANCE_TIE_BREAK * deployed_expr(m)
    if objective == "cost":
        m.prob.objective = charged
    elif objective == "goodput":
        m.prob.objective = goodput_expr(m) - GOODPUT_COST_WEIGHT * charged  # tie-break
    else:  # one Dinkelbach step
        m.prob.objective = goodput_expr(m) - lam * charged


def define_budget(m: Model) -> None:
    if m.t.budget_per_hour is not None:
        m.add("budget", cost_expr(m) <= m.t.budget_per_hour)
