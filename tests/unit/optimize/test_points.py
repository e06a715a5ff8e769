"""The table of operating points: its checks, what it shares with the nominal tables, and
points at given rates over one real combination (the default scenario)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.oracles import bruteforce
from pdd_plan.optimize import milp, points
from pdd_plan.optimize.search import at_rates


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
