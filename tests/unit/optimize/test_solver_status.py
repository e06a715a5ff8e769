"""The solver's status names what HiGHS proved: `Optimal` only for a proven optimum; a time- or
iteration-limited stop with an incumbent is `INCUMBENT` (a plan, not called optimal); a stop
before any incumbent is no answer."""

from __future__ import annotations

import math
from types import SimpleNamespace

import highspy
import pytest

from pdd_plan.optimize.milp import linear as lp

pytestmark = pytest.mark.unit

ST = highspy.HighsModelStatus


def _stopped(status, objective: float) -> str:
    """What `_read_back` says of a model HiGHS left in `status` (no variables, no rows)."""
    sol = SimpleNamespace(col_value=[], row_value=[], row_dual=[])
    h = SimpleNamespace(
        getModelStatus=lambda: status,
        getSolution=lambda: sol,
        getObjectiveValue=lambda: objective,
    )
    return lp._read_back(h, highspy, [], [])


def test_only_a_proven_optimum_is_optimal():
    assert _stopped(ST.kOptimal, 3.0) == lp.OPTIMAL
    for limited in (ST.kTimeLimit, ST.kIterationLimit):
        assert _stopped(limited, 3.0) == lp.INCUMBENT != lp.OPTIMAL
        assert _stopped(limited, math.inf) == lp.NOT_SOLVED  # cut off before any incumbent
    assert lp.INCUMBENT in lp.SOLVED and lp.OPTIMAL in lp.SOLVED
    assert _stopped(ST.kInfeasible, math.inf) == lp.INFEASIBLE


def test_a_time_limited_solve_is_not_reported_optimal():
    # a knapsack HiGHS cannot close in no time: with a zero time limit it stops at once
    p = lp.Program(lp.MAXIMIZE)
    xs = [lp.Var(f"x{i}", cat="Binary") for i in range(60)]
    p.objective = lp.Expr({x: 1.0 + (i % 7) / 10 for i, x in enumerate(xs)})
    p.add_row("cap", lp.Expr({x: 3.0 + (i % 11) for i, x in enumerate(xs)}) <= 97.5)
    got = p.solve({"output_flag": False, "time_limit": 0.0, "threads": 1})
    assert got != lp.OPTIMAL
