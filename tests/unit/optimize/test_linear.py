"""`milp.linear`: the expression arithmetic by hand, the model HiGHS receives entry for entry,
answers and duals by hand, and the planned fleets' models against scipy's own MILP interface
(a matrix built here from the rows, independent of the layer's hand-over)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.optimize.milp import linear as lp

OPTS = {"output_flag": False, "threads": 1, "mip_rel_gap": 0.0}


def _terms(e: lp.Expr) -> dict[str, float]:
    return {v.name: c for v, c in e.items()}


@pytest.mark.unit
def test_arithmetic_by_hand():
    x, a = lp.Var("x"), lp.Var("a")
    e = 2 * x + 3 - (x - a) * 2  # 2x + 3 - 2x + 2a
    assert _terms(e) == {"x": 0, "a": 2} and e.constant == 3
    assert _terms(lp.total([x, x, a * 0.5, 4])) == {"x": 2, "a": 0.5}
    assert lp.total([x, 4]).constant == 4
    assert len(x * 0) == 0 and (x * 0).constant == 0  # no term at all
    assert _terms(-(x / 4)) == {"x": -0.25}
    assert _terms(5 - x) == {"x": -1} and (5 - x).constant == 5
    with pytest.raises(ValueError):
        x * math.inf
    with pytest.raises(ValueError):
        x + math.nan
    with pytest.raises(TypeError):
        (x + 1) * (a + 1)


@pytest.mark.unit
def test_rows_move_everything_left_and_bound_by_minus_the_constant():
    x, a = lp.Var("x"), lp.Var("a")
    r = x + 2 <= 7.5  # x <= 5.5
    assert r.up == 5.5 and r.low is None and _terms(r.expr) == {"x": 1}
    r = 2 * x >= a - 1  # 2x - a >= -1
    assert r.low == -1 and r.up is None and _terms(r.expr) == {"x": 2, "a": -1}
    r = a + x == 3
    assert r.low == r.up == 3
    with pytest.raises(ValueError):
        lp.Row(lp.Expr({x: 1.0}), lp.LE, rhs=math.inf)
    p = lp.Program()
    p.add_row("r", x <= 1)
    with pytest.raises(ValueError, match="duplicate"):
        p.add_row("r", x <= 2)


def _small(sense: int) -> tuple[lp.Program, dict]:
    """Unsorted names, a free column, an upper bound, an integer, a zero coefficient, an
    equality, a >= row, and a variable no row or objective names (not a column)."""
    p = lp.Program(sense)
    x = lp.Var("x", 0, 4, cat="Integer")
    b = lp.Var("b", None)
    a = lp.Var("a", 1)
    lp.Var("unused")
    p.objective = 3 * x + 2 * a - b
    p.add_row("r1", lp.Expr([(x, 1.0), (a, 0.0), (b, 1.0)]) <= 7.5)
    p.add_row("r2", a + x == 3)
    p.add_row("r3", b - 2 * a >= -10)
    return p, {"x": x, "a": a, "b": b}


@pytest.mark.unit
@pytest.mark.parametrize("sense", [lp.MINIMIZE, lp.MAXIMIZE])
def test_small_model_is_handed_over_entry_for_entry(sense, monkeypatch):
    import highspy

    got = {}
    real = highspy.Highs.run

    def keep(h):
        got["lp"] = h.getLp()
        return real(h)

    monkeypatch.setattr(highspy.Highs, "run", keep)
    p, _ = _small(sense)
    p.solve(OPTS)
    m = got["lp"]
    s = 1 if sense == lp.MINIMIZE else -1  # HiGHS minimizes: a maximum's costs negated
    inf = highspy.kHighsInf
    # columns sorted by name: a, b, x
    assert list(m.col_cost_) == [2 * s, -1 * s, 3 * s]
    assert list(m.col_lower_) == [1, -inf, 0] and list(m.col_upper_) == [inf, inf, 4]
    assert [int(k) for k in m.integrality_] == [0, 0, 1]
    assert list(m.row_lower_) == [-inf, 3, -10] and list(m.row_upper_) == [7.5, 3, inf]
    # row-wise as handed over: r1 = x + b (a's zero left out), r2 = a + x, r3 = b - 2a
    dense = np.zeros((3, 3))
    a_m = m.a_matrix_
    rowwise = a_m.format_ == highspy.MatrixFormat.kRowwise
    for j in range(3):  # row- or column-wise, as HiGHS keeps it
        for k in range(a_m.start_[j], a_m.start_[j + 1]):
            at = (j, a_m.index_[k]) if rowwise else (a_m.index_[k], j)
            dense[at] = a_m.value_[k]
    assert dense.tolist() == [[0, 1, 1], [1, 0, 1], [-2, 1, 0]]


@pytest.mark.unit
def test_small_model_answer_by_hand():
    # min 3x + 2a - b: b as large as r1 allows (b = 7.5 - x), a = 3 - x, so
    # 3x + 6 - 2x - 7.5 + x = 2x - 1.5 is least at x = 0, a = 3, b = 7.5; r3: 7.5 - 6 >= -10
    p, v = _small(lp.MINIMIZE)
    assert p.solve(OPTS) == lp.OPTIMAL
    assert {k: x.value for k, x in v.items()} == pytest.approx({"a": 3.0, "b": 7.5, "x": 0.0})
    assert lp.value(p.objective) == pytest.approx(-1.5)
    r1, r2, r3 = p.rows.values()
    assert r1.slack == pytest.approx(0.0)  # binding
    assert r3.slack == pytest.approx(7.5 - 6 + 10)  # activity minus its lower bound
    assert [r.index for r in (r1, r2, r3)] == [0, 1, 2]


@pytest.mark.unit
def test_relaxation_duals_by_hand():
    # min 3x + 2a - b with x continuous: the same optimum; relaxing r1 by one lets b grow by
    # one (objective -1: pi = -1), r2 by one raises a by one (+2: pi = 2), r3 is slack (0)
    p, _ = _small(lp.MINIMIZE)
    assert p.solve(OPTS, mip=False) == lp.OPTIMAL
    assert [r.pi for r in p.rows.values()] == pytest.approx([-1.0, 2.0, 0.0])


@pytest.mark.unit
def test_infeasible_and_unbounded_models_read_so():
    p = lp.Program()
    x = lp.Var("x", 0, 1)
    p.objective = lp.Expr({x: 1.0})
    p.add_row("r", x >= 2)
    assert p.solve(OPTS) == lp.INFEASIBLE
    q = lp.Program(lp.MAXIMIZE)
    y = lp.Var("y")
    q.objective = lp.Expr({y: 1.0})
    q.add_row("r", y >= 1)
    assert q.solve(OPTS) in (lp.UNBOUNDED, lp.INFEASIBLE)  # HiGHS may say either
    assert q.status != lp.OPTIMAL
