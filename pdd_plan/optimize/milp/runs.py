"""Elastic runs over a day: an elastic instance started in a period is paid for its start-up
before it serves, for its drain after it is scaled down, and up to the billing granularity
(`points.Elastic.run_hours`, per decode candidate).

Per period and candidate, starts >= elastic(k) - elastic(k - 1), the periods in time order and
the last followed by the first (the day repeats); each start costs run_hours at the elastic
price. A run is one start and one stop, so what is paid once per run is charged at its start.
"""

from __future__ import annotations

from pdd_plan.optimize.milp.base import Model, lin, var
from pdd_plan.optimize.milp.linear import Expr


def define_runs(m: Model) -> None:
    el = m.pts.elastic
    if el is None or el.run_hours is None:
        return
    n = len(m.pts)
    index = {c.key: i for i, c in enumerate(m.t.md + m.t.rld)}
    for k in m.points:
        before = m.e[(k - 1) % n]
        for key, x in m.e[k].items():
            i, tag = index[key], m.tag(k)
            s = var(m, f"start_{i}{tag}")
            m.starts[k][key] = s
            m.add(f"elastic_start_{i}{tag}", x - before.get(key, 0) <= s)


def run_cost(m: Model):
    """$/hour averaged over the points' hours: each start's extra hours at its price."""
    el = m.pts.elastic
    if el is None or el.run_hours is None:
        return Expr()
    total = float(m.pts.weight.sum())
    index = {c.key: i for i, c in enumerate(m.t.md + m.t.rld)}
    per = {key: float(el.run_hours[i] * el.cost_per_hour[i]) / total for key, i in index.items()}
    return lin((s, per[key]) for k in m.points for key, s in m.starts[k].items())
