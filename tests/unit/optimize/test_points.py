"""The table of operating points: its checks, what it shares with the nominal tables, and
points at given rates over one real combination (the default scenario)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.oracles import bruteforce
from pdd_plan.architectures import get
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.optimize import milp, points, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search import at_rates, fixed_rate
from pdd_plan.optimize.search.enumeration import Shared
from pdd_plan.workload.classes import build_classes


@pytest.mark.unit
def test_scale_factors_share_the_nominal_tables():
    t = bruteforce.random_tables(3)
    pts = points.points(t, [1.0] * 64, [t.rate_rps] * 64, decode_speed=np.linspace(0.8, 1.2, 64))
    # 64 points: no path table, class or byte array copied; a point is a row of factors
    assert all(pts.point_paths(k) is t.paths for k in range(64))
    assert all(
        pts.kv_bytes(k) is t.kv_bytes and pts.line_bytes(k) is t.line_bytes for k in range(64)
    )
    assert pts.decode_speed.shape == (64, len(t.md) + len(t.rld))
    doubled = points.points(t, [1.0], [t.rate_rps], kv_scale=[2.0])
    np.testing.assert_array_equal(doubled.kv_bytes(0), 2.0 * t.kv_bytes)


@pytest.mark.unit
def test_shares_are_the_weights_over_their_sum():
    t = bruteforce.random_tables(1)
    pts = points.points(t, [6.0, 18.0], [1.0, 2.0])
    np.testing.assert_allclose(pts.share, [0.25, 0.75])
    assert pts.rate(1) == 2.0 and points.points(t, [1.0], [None]).rate(0) is None


@pytest.mark.unit
@pytest.mark.parametrize(
    "kw, says",
    [
        ({"weight": [0.0]}, "positive"),
        ({"kv_scale": [1.0, 2.0]}, "kv_scale has shape"),
        ({"decode_speed": [-1.0]}, "decode_speed must be positive"),
        ({"max_violation": 1.0}, "max_violation"),
        ({"paths": [None, None]}, "2 path tables for 1 points"),
    ],
)
def test_a_bad_column_is_refused(kw, says):
    t = bruteforce.random_tables(2)
    args = {"weight": [1.0], **kw}
    with pytest.raises(ValueError, match=says):
        points.points(t, args.pop("weight"), [t.rate_rps], **args)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(4))
def test_one_point_builds_the_single_rate_model(seed):
    t = bruteforce.random_tables(seed)
    a, b = milp.build(t).prob, milp.build_points(points.single(t)).prob
    assert [v.name for v in a.variables()] == [v.name for v in b.variables()]
    assert [_row(n, r) for n, r in a.rows.items()] == [_row(n, r) for n, r in b.rows.items()]


def _row(name, r):
    return name, [(v.name, c) for v, c in r.items()], r.sense, r.constant


@pytest.mark.unit
def test_line_level_sits_a_hair_above_the_load_and_never_past_the_cap():
    assert at_rates.line_level(0.5, 0.9) == pytest.approx(0.5, rel=1e-5)
    assert at_rates.line_level(0.5, 0.9) > 0.5
    assert at_rates.line_level(0.95, 0.9) == 0.9


@pytest.fixture(scope="module")
def default_pdd():
    path = str(example_path("pdd-paper"))
    ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    p = fixed_rate.plan(problem_of(ctx), get("pdd"), cls, 40.0, caps)
    return Shared.of(problem_of(ctx), get("pdd"), cls, caps), p


@pytest.mark.integration
def test_one_rate_is_the_fixed_rate_plan(default_pdd):
    sh, p = default_pdd
    t = p.tables
    pts = at_rates.rate_points(sh, t.meta["combo"], t.lines, [40.0], [1.0])
    sol = milp.solve_points(pts)
    assert sol.cost_per_hour == p.cost_per_hour and sol.counts == p.solution.counts
    assert sol.line_index == p.solution.line_index


@pytest.mark.integration
def test_lower_rates_get_their_own_tables_and_never_raise_the_cost(default_pdd):
    sh, p = default_pdd
    t = p.tables
    pts = at_rates.rate_points(sh, t.meta["combo"], t.lines, [16.0, 40.0, 16.0, 28.0], [6.0] * 4)
    # the peak shares the nominal tables; equal rates share one rebuilt set
    assert pts.paths[1] is None and pts.paths[0] is pts.paths[2] and pts.paths[3] is not None
    # a lower rate: a shorter prefill wait and a lighter line, so no class misses more often
    # (to 1e-9: the tail model's far end is not monotone at 1e-12, which no row can see)
    for o in range(len(t.lines)):
        for q in (0.9, 0.99):
            low, peak = pts.paths[0][o].miss[q]["p_md"], t.paths[o].miss[q]["p_md"]
            assert np.all(low <= peak + 1e-9)
        assert pts.line_level[0, o] < pts.line_level[1, o] or t.lines[o].config is None
    sol = milp.solve_points(pts)
    assert sol.cost_per_hour >= p.cost_per_hour - 1e-9
    assert [pt.rate_rps for pt in sol.points] == [16.0, 40.0, 16.0, 28.0]
