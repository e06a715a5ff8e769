"""The planned fleets' MILPs solve as scipy solves them (the linear model by hand:
tests/unit/optimize/test_linear.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint
from scipy.optimize import milp as scipy_milp

from pdd_plan.evaluate import analytic
from pdd_plan.optimize import milp
from pdd_plan.optimize.milp import forced
from pdd_plan.optimize.milp import linear as lp
from pdd_plan.optimize.milp.solver import _options
from pdd_plan.optimize.points import single
from tests.integration.test_forced_verdict import fleets  # noqa: F401 (a fixture)

pytestmark = pytest.mark.integration


def _scipy_optimum(p: lp.Program, relax: bool = False) -> float:
    """The program's optimum through scipy.optimize.milp, from a matrix built here."""
    cols = p.variables()
    at = {id(v): i for i, v in enumerate(cols)}
    rows = list(p.rows.values())
    a = np.zeros((len(rows), len(cols)))
    for i, r in enumerate(rows):
        for v, c in r.items():
            a[i, at[id(v)]] = c
    low = [-np.inf if r.low is None else r.low for r in rows]
    up = [np.inf if r.up is None else r.up for r in rows]
    s = -1.0 if p.sense == lp.MAXIMIZE else 1.0
    cost = np.array([s * p.objective.get(v, 0.0) for v in cols])
    res = scipy_milp(
        cost,
        constraints=LinearConstraint(a, low, up),
        integrality=np.array([0 if relax else int(v.integer) for v in cols]),
        bounds=Bounds(
            [-np.inf if v.low is None else v.low for v in cols],
            [np.inf if v.up is None else v.up for v in cols],
        ),
        options={"mip_rel_gap": 0.0},
    )
    assert res.status == 0, res.message
    return s * res.fun + p.objective.constant


@pytest.mark.integration
def test_planned_fleets_models_solve_as_scipy_solves_them(fleets, monkeypatch):  # noqa: F811
    """The default's three planned fleets at their goodput edge (each fleet's tables as the
    goodput search builds them), both objectives and the relaxation: the same optimum through
    scipy's interface to a matrix built from the rows here."""
    seen = []
    real = forced.verdict

    def keep(t):
        seen.append(t)
        return real(t)

    edges = {a: analytic.search(fm)[0].rate for a, fm in fleets.items()}
    monkeypatch.setattr(forced, "verdict", keep)
    for a, fm in fleets.items():
        analytic.at_rate(fm, edges[a])
    assert len(seen) == len(fleets)
    for t in seen:
        for objective, relax in (("cost", False), ("goodput", False), ("cost", True)):
            p = milp.build_points(single(t), objective).prob
            assert p.solve(_options(30.0), mip=not relax) == lp.OPTIMAL
            ours = lp.value(p.objective)
            assert ours == pytest.approx(_scipy_optimum(p, relax), rel=1e-7, abs=1e-9)
