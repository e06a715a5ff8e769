"""The chance constraint: per operating point a binary that, at 1, relaxes the point's SLA rows
(line utilization, decode throughput and KV memory, TTFT percentiles) by a big-M
(base.Model.add_sla), and a cap on the points' weighted share of violations.

With draws of weight 1/N and a cap of 1 - Q, the fleet meets its SLA rows in at least a share
Q of the draws. Demand and routing are never relaxed: every point's traffic is still routed.
"""

from __future__ import annotations

from pdd_plan.optimize.milp.base import Model, lin, var


def define_violations(m: Model) -> None:
    if m.pts.max_violation is None:
        return
    for k in m.points:
        m.v[k] = var(m, f"miss{m.tag(k)}", up=1, cat="Binary")


def define_chance_cap(m: Model) -> None:
    """Sum over points of share x violated <= max_violation."""
    cap = m.pts.max_violation
    if cap is None:
        return
    share = m.pts.share
    m.add("chance_cap", lin((m.v[k], float(share[k])) for k in m.points) <= cap)
