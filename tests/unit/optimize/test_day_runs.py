"""Elastic runs over a day (milp/runs.py) on the hand-made tables of test_points_milp: 12 h at
10 req/s (3 main-decode instances), 12 h at 20 (5), elastic at 1.5x the base price ($15/h)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.optimize import milp, points
from tests.unit.optimize.test_points_milp import _elastic, _paths, _tables


def _day(run_hours: float | None) -> points.OperatingPoints:
    t = _tables()
    el = _elastic(t, 1.5, [800, 800])
    if run_hours is not None:
        el = points.Elastic(el.cost_per_hour, el.sites, el.gpus, run_hours=np.array([run_hours]))
    return points.points(t, [12.0, 12.0], [10.0, 20.0], elastic=el)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("run_hours", "cost", "base"),
    [
        # no extra hours: base 3 + 2 elastic at the peak, 30 + 0.5 x 2 x 15 = $45/h
        (None, 45.0, {"md": 3}),
        (0.0, 45.0, {"md": 3}),
        # each of the 2 runs pays 1 h more at $15: + 30 / 24 h = $46.25/h
        (1.0, 46.25, {"md": 3}),
        # 3 h: 45 + 2 x 3 x 15 / 24 = 48.75, under base 4 + 1 run (47.5 + 45/24 = 49.375)
        (3.0, 48.75, {"md": 3}),
        # 6 h: 2 runs cost 45 + 7.5 = 52.5, 1 run 47.5 + 3.75 = 51.25, all base 50
        (6.0, 50.0, {"md": 5}),
    ],
)
def test_a_run_pays_its_extra_hours_once(run_hours, cost, base):
    sol = milp.solve_points(_day(run_hours))
    assert sol.cost_per_hour == pytest.approx(cost)
    assert sol.counts == base


@pytest.mark.unit
def test_more_extra_hours_never_lower_the_cost():
    costs = [milp.solve_points(_day(h)).cost_per_hour for h in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)]
    assert all(b >= a - 1e-9 for a, b in zip(costs, costs[1:]))


@pytest.mark.unit
def test_runs_follow_the_days_cycle():
    # the peak first, then the trough: the run still starts once a day (at the peak, after
    # the trough that ends the previous day)
    t = _tables()
    el = _elastic(t, 1.5, [800, 800])
    el = points.Elastic(el.cost_per_hour, el.sites, el.gpus, run_hours=np.array([1.0]))
    pts = points.points(t, [12.0, 12.0], [20.0, 10.0], elastic=el)
    assert milp.solve_points(pts).cost_per_hour == pytest.approx(46.25)


@pytest.mark.unit
def test_pooled_ttft_lets_one_period_carry_another():
    # P90 misses: 5% at 10 req/s, 15% at 20: per period the busy one breaks its row (no
    # routing avoids it, so no plan); pooled over the day (12 h each, requests 1:2) the share
    # is (10 x 0.05 + 20 x 0.15) / 30 = 11.7% > 10%: still none; at 12% busy: 9.7%: a plan
    t = _tables()

    def day(miss_busy: float, pooled: bool):
        paths = [[_paths(miss_md=0.05)], [_paths(miss_md=miss_busy)]]
        return points.points(t, [12.0, 12.0], [10.0, 20.0], paths=paths, pooled_ttft=pooled)

    assert milp.solve_points(day(0.12, False)) is None
    assert milp.solve_points(day(0.15, True)) is None
    sol = milp.solve_points(day(0.12, True))
    assert sol is not None and sol.counts == {"md": 5}
