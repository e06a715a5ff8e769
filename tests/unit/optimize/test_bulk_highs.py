"""`milp.highs.BulkHiGHS` hands HiGHS the model PuLP's own HiGHS interface builds one call at a
time: the same columns, rows, bounds, costs, integrality and coefficients, so the same answer."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pulp
import pytest

from pdd_plan.evaluate import analytic
from pdd_plan.optimize import milp
from pdd_plan.optimize.milp import forced
from pdd_plan.optimize.milp.highs import BulkHiGHS
from pdd_plan.optimize.points import single
from tests.unit.optimize.test_forced_verdict import fleets  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not pulp.HiGHS().available(), reason="highspy not installed")


def _small(sense: int) -> pulp.LpProblem:
    """Unsorted names, a free column, an upper bound, an integer, a zero coefficient, an
    equality, a >= row and a row over none of the variables."""
    p = pulp.LpProblem("t", sense)
    x = p.add_variable("x", lowBound=0, upBound=4, cat="Integer")
    b = p.add_variable("b", lowBound=None)
    a = p.add_variable("a", lowBound=1)
    p += 3 * x + 2 * a - b
    p.addConstraint(pulp.LpAffineExpression([(x, 1.0), (a, 0.0), (b, 1.0)]) <= 7.5, "r1")
    p.addConstraint(a + x == 3, "r2")
    p.addConstraint(b - 2 * a >= -10, "r3")
    return p


def _model(p: pulp.LpProblem) -> dict[str, np.ndarray]:
    lp = p.solverModel.getLp()
    m = lp.a_matrix_
    out = {
        k: np.asarray(getattr(lp, k))
        for k in ("col_cost_", "col_lower_", "col_upper_", "row_lower_", "row_upper_")
    }
    out["integrality"] = np.asarray([int(v) for v in lp.integrality_])
    out["start"], out["index"] = np.asarray(m.start_), np.asarray(m.index_)
    out["value"], out["format"] = np.asarray(m.value_), np.asarray(int(m.format_))
    return out


def _solved(p: pulp.LpProblem, solver) -> tuple[dict, list, list]:
    with contextlib.redirect_stdout(io.StringIO()):
        p.solve(solver)
    values = [(v.name, v.varValue, v.dj) for v in p.variables()]
    rows = [(c.name, c.pi, c.slack) for c in p.constraints()]
    return _model(p), values, rows


def _same(p1: pulp.LpProblem, p2: pulp.LpProblem, mip: bool = True) -> None:
    m1, v1, r1 = _solved(p1, pulp.HiGHS(msg=False, mip=mip, threads=1))
    m2, v2, r2 = _solved(p2, BulkHiGHS(msg=False, mip=mip, threads=1))
    assert m1.keys() == m2.keys() and m1["value"].size > 0
    for k in m1:
        assert np.array_equal(m1[k], m2[k]), k
    assert v1 == v2 and r1 == r2
    assert p1.status == p2.status and pulp.value(p1.objective) == pulp.value(p2.objective)


@pytest.mark.unit
@pytest.mark.parametrize("sense", [pulp.LpMinimize, pulp.LpMaximize])
def test_small_model_is_handed_over_entry_for_entry(sense):
    _same(_small(sense), _small(sense))
    _same(_small(sense), _small(sense), mip=False)  # the relaxation (shadow prices)


@pytest.mark.unit
def test_small_model_answer_by_hand():
    # min 3x + 2a - b: b as large as r1 allows (b = 7.5 - x), a = 3 - x, so 3x + 6 - 2x - 7.5 + x
    # = 2x - 1.5 is least at x = 0, a = 3 (a >= 1), b = 7.5; r3: 7.5 - 6 >= -10 holds
    p = _small(pulp.LpMinimize)
    with contextlib.redirect_stdout(io.StringIO()):
        p.solve(BulkHiGHS(msg=False, threads=1))
    assert pulp.LpStatus[p.status] == "Optimal"
    got = {v.name: v.varValue for v in p.variables()}
    assert got == pytest.approx({"a": 3.0, "b": 7.5, "x": 0.0})
    assert pulp.value(p.objective) == pytest.approx(-1.5)


@pytest.mark.unit
def test_infeasible_model_reads_infeasible():
    p = pulp.LpProblem("t", pulp.LpMinimize)
    x = p.add_variable("x", lowBound=0, upBound=1)
    p += x
    p.addConstraint(x >= 2, "r")
    with contextlib.redirect_stdout(io.StringIO()):
        p.solve(BulkHiGHS(msg=False, threads=1))
    assert pulp.LpStatus[p.status] == "Infeasible"


@pytest.mark.integration
def test_planned_fleets_models_are_handed_over_entry_for_entry(fleets, monkeypatch):  # noqa: F811
    """The default's three planned fleets at their goodput edge (each fleet's tables as the
    goodput search builds them), both objectives and the relaxation."""
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
        for objective in ("cost", "goodput"):
            _same(
                milp.build_points(single(t), objective).prob,
                milp.build_points(single(t), objective).prob,
            )
        _same(milp.build_points(single(t)).prob, milp.build_points(single(t)).prob, mip=False)
