"""The fleet MILP over operating points, family by family, on hand-made tables whose optimum
is worked out by hand.

The tables: one main-decode candidate ("md", 8 GPUs of h200 in B, $10/h, 800 tok/s at the TPOT
target), decode utilization cap 0.5, so one instance carries 400 tok/s; every request decodes
100 tokens on main decode. A point at r req/s needs 100 r tok/s: ceil(r / 4) instances
(10 req/s: 3, 20: 5, 30: 8). RDMA, no line, unless a test adds one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pdd_plan.optimize import milp, points
from pdd_plan.optimize.tables import (
    DecodeCandidate,
    FleetTables,
    LineOption,
    PathTable,
    rdma_option,
)

MD = DecodeCandidate("md", "main_decode", "B", "h200", 8, 10.0, 800.0, 1e12, 0.01)
RLD = DecodeCandidate("rld", "relay_decode", "A", "h100", 8, 4.0, 100.0, 1e12, 0.01)


def _paths(n: int = 1, miss_md: float = 0.0, relay: bool = False) -> PathTable:
    """p_md for every class (each misses the P90 target with chance `miss_md` there); with
    `relay`, p_rld_md too: 50 of the 100 tokens on relay decode, never a miss."""
    allowed = {"p_md": np.ones(n, bool)}
    miss = {q: {"p_md": np.full(n, miss_md if q == 0.9 else 0.0)} for q in (0.9, 0.99)}
    md_tok, rld_tok = {"p_md": np.full(n, 100.0)}, {"p_md": np.zeros(n)}
    if relay:
        allowed["p_rld_md"] = np.ones(n, bool)
        for q in miss:
            miss[q]["p_rld_md"] = np.zeros(n)
        md_tok["p_rld_md"], rld_tok["p_rld_md"] = np.full(n, 50.0), np.full(n, 50.0)
    crosses = {"p_md": True, "p_rld_md": True, "p_rld": False}
    return PathTable(allowed, miss, md_tok, rld_tok, crosses, times=None)


def _tables(
    rate: float | None = 10.0,
    kv_pool: float = 1e12,
    relay: bool = False,
    line: LineOption | None = None,
    line_bytes: float = 0.0,
    **kw,
) -> FleetTables:
    md = dataclasses.replace(MD, kv_pool_bytes=kv_pool)
    return FleetTables(
        weight=np.array([1.0]),
        line_bytes=np.array([line_bytes]),
        kv_bytes=np.array([1e9]),
        md=[md],
        rld=[RLD] if relay else [],
        lines=[line or rdma_option()],
        paths=[_paths(relay=relay)],
        gpus_left={("B", "h200"): 800, ("A", "h100"): 800},
        decode_cap=0.5,
        rate_rps=rate,
        **kw,
    )


def _solve(pts: points.OperatingPoints, objective: str = "cost") -> milp.PointsSolution:
    sol = milp.solve_points(pts, objective)
    assert sol is not None
    return sol


# ------------------------------------------------------------------ shared fleet, flows


@pytest.mark.unit
def test_two_rates_share_the_fleet_that_serves_the_larger():
    pts = points.points(_tables(), [12.0, 12.0], [10.0, 20.0])
    sol = _solve(pts)
    assert sol.counts == {"md": 5}  # 20 req/s x 100 tok / 400 tok/s per instance
    assert sol.cost_per_hour == pytest.approx(50.0)
    assert sol.base_cost_per_hour == pytest.approx(50.0)
    # each point routes its own rate
    assert [float(p.flows["p_md"][0]) for p in sol.points] == pytest.approx([10.0, 20.0])
    assert not any(p.violated or p.elastic for p in sol.points)


@pytest.mark.unit
def test_more_points_never_lower_the_shared_fleets_cost():
    rng = np.random.default_rng(7)
    rates = list(rng.uniform(2.0, 40.0, size=6))
    costs = []
    for k in range(1, len(rates) + 1):
        pts = points.points(_tables(), [1.0] * k, rates[:k])
        costs.append(_solve(pts).cost_per_hour)
        assert costs[-1] == pytest.approx(10.0 * np.ceil(max(rates[:k]) / 4.0))
    assert all(b >= a for a, b in zip(costs, costs[1:]))


@pytest.mark.unit
def test_kv_scale_enters_the_memory_row():
    # memory binds: 10 req/s x 100 tokens x 0.01 s x 1e9 B = 1e10 B.s; 0.5 x 4e9 per instance
    # -> 5 instances (throughput needs 3); twice the KV bytes -> 10
    t = _tables(kv_pool=4e9)
    assert _solve(points.single(t)).counts == {"md": 5}
    sol = _solve(points.points(t, [1.0, 1.0], [10.0, 10.0], kv_scale=[1.0, 2.0]))
    assert sol.counts == {"md": 10}


@pytest.mark.unit
def test_decode_speed_enters_the_throughput_row():
    # half the speed: 200 tok/s per instance at the cap, 1000 tok/s -> 5 instances
    sol = _solve(points.points(_tables(), [1.0, 1.0], [10.0, 10.0], decode_speed=[1.0, 0.5]))
    assert sol.counts == {"md": 5}
    # twice the speed in the only point: 2 instances (800 tok/s short of 1000: 3 -> 2 at 1600)
    assert _solve(points.points(_tables(), [1.0], [10.0], decode_speed=[2.0])).counts == {"md": 2}


@pytest.mark.unit
def test_a_points_own_ttft_tables_make_it_relay():
    # nominal: no miss, 3 MD ($30). The second point's tables (rebuilt there) have every
    # request miss the P90 on p_md: at least 90% must relay via p_rld_md, which puts 50 tokens
    # each on relay decode (100 tok/s per instance x 0.5 -> 9 req/s x 50 = 450 tok/s -> 9 RLD)
    # and 50 on main decode (9 x 50 + 1 x 100 = 550 tok/s -> 2 MD): 2 x 10 + 9 x 4 = $56
    t = _tables(relay=True)
    assert _solve(points.single(t)).cost_per_hour == pytest.approx(30.0)
    own = [_paths(miss_md=1.0, relay=True)]
    sol = _solve(points.points(t, [1.0, 1.0], [10.0, 10.0], paths=[None, own]))
    assert sol.counts == {"md": 2, "rld": 9}
    assert sol.cost_per_hour == pytest.approx(56.0)
    assert float(sol.points[1].flows["p_rld_md"][0]) == pytest.approx(9.0)


def _line(capacity: float) -> LineOption:
    return LineOption("1xtest", None, 0.9, 5.0, capacity)


@pytest.mark.unit
def test_line_speed_and_level_per_point():
    # 10 req/s x 1e6 B = 1e7 B/s on a 2e7 B/s line: utilization 0.5 under the 0.9 level;
    # at half the line's speed it is 1.0: no routing avoids the line (p_md only)
    t = _tables(line=_line(2e7), line_bytes=1e6)
    assert _solve(points.single(t)).cost_per_hour == pytest.approx(35.0)
    slow = points.points(t, [1.0, 1.0], [10.0, 10.0], line_speed=[1.0, 0.5])
    assert milp.solve_points(slow) is None
    # the same point with the level at 1.0 fits exactly
    lv = np.array([[0.9], [1.0]])
    pts = points.points(t, [1.0, 1.0], [10.0, 10.0], line_speed=[1, 0.5], line_level=lv)
    sol = milp.solve_points(pts)
    assert sol is not None and sol.cost_per_hour == pytest.approx(35.0)


# ------------------------------------------------------------------ elastic instances


def _elastic(t: FleetTables, price_factor: float, gpus: list[int]) -> points.Elastic:
    cost = np.array([c.cost_per_hour * price_factor for c in t.md + t.rld])
    return points.Elastic(cost, (("B", "h200"),), np.array([[g] for g in gpus]))


@pytest.mark.unit
def test_elastic_at_1_5x_covers_the_peak_on_the_trough_fleet():
    # 12 h at 10 req/s (3 instances), 12 h at 20 (5). Base 3 + 2 elastic in the peak:
    # 30 + 0.5 x 2 x 15 = $45/h, under all-base 50 and base 4 + 1 elastic (40 + 7.5)
    t = _tables()
    pts = points.points(t, [12.0, 12.0], [10.0, 20.0], elastic=_elastic(t, 1.5, [800, 800]))
    sol = _solve(pts)
    assert sol.counts == {"md": 3}
    assert [p.elastic for p in sol.points] == [{}, {"md": 2}]
    assert sol.cost_per_hour == pytest.approx(45.0)
    assert sol.base_cost_per_hour == pytest.approx(30.0)
    assert sol.points[1].elastic_cost_per_hour == pytest.approx(30.0)


@pytest.mark.unit
def test_elastic_at_2_5x_buys_it_all_as_base():
    # base 3 + 2 elastic: 30 + 0.5 x 2 x 25 = 55; base 4 + 1: 52.5; all base: 50
    t = _tables()
    pts = points.points(t, [12.0, 12.0], [10.0, 20.0], elastic=_elastic(t, 2.5, [800, 800]))
    sol = _solve(pts)
    assert sol.counts == {"md": 5} and all(not p.elastic for p in sol.points)
    assert sol.cost_per_hour == pytest.approx(50.0)


@pytest.mark.unit
def test_elastic_is_capped_by_what_the_site_can_add():
    # one instance's GPUs in the peak: base 4 + 1 elastic, 40 + 0.5 x 15 = $47.5
    t = _tables()
    pts = points.points(t, [12.0, 12.0], [10.0, 20.0], elastic=_elastic(t, 1.5, [0, 8]))
    sol = _solve(pts)
    assert sol.counts == {"md": 4} and sol.points[1].elastic == {"md": 1}
    assert sol.cost_per_hour == pytest.approx(47.5)


# ------------------------------------------------------------------ the chance constraint


@pytest.mark.unit
def test_a_cap_of_one_violation_in_three_sizes_for_the_second_largest():
    t = _tables()
    pts = points.points(t, [1 / 3] * 3, [10.0, 20.0, 30.0], max_violation=0.34)
    sol = _solve(pts)
    assert sol.counts == {"md": 5}  # 20 req/s's fleet; 30 req/s's needs 8
    assert [p.violated for p in sol.points] == [False, False, True]
    assert sol.cost_per_hour == pytest.approx(50.0)


@pytest.mark.unit
def test_a_looser_chance_cap_never_raises_the_cost():
    t = _tables()
    costs = []
    for cap in (0.0, 0.34, 0.67):
        pts = points.points(t, [1 / 3] * 3, [10.0, 20.0, 30.0], max_violation=cap)
        costs.append(_solve(pts).cost_per_hour)
    assert costs == pytest.approx([80.0, 50.0, 30.0])


@pytest.mark.unit
def test_the_chance_cap_weighs_points_by_their_share():
    # the peak is 2 h of 24: a cap of 0.1 of the hours lets it go, 0.05 does not
    t = _tables()
    for cap, want in ((0.1, 30.0), (0.05, 50.0)):
        pts = points.points(t, [22.0, 2.0], [10.0, 20.0], max_violation=cap)
        assert _solve(pts).cost_per_hour == pytest.approx(want)


@pytest.mark.unit
def test_a_violated_point_still_routes_its_demand():
    pts = points.points(_tables(), [1 / 3] * 3, [10.0, 20.0, 30.0], max_violation=0.34)
    sol = _solve(pts)
    assert float(sol.points[2].flows["p_md"][0]) == pytest.approx(30.0)


# ------------------------------------------------------------------ objectives over points


@pytest.mark.unit
def test_weighted_goodput_within_a_budget():
    # the rate free in both points (at most 10 and 20 req/s); $30/h buys 3 instances: 12 req/s
    # in each point at most, so 10 and 12: weighted goodput 11
    t = _tables(rate=None, budget_per_hour=30.0)
    pts = points.points(t, [1.0, 1.0], [None, None], rate_max=[10.0, 20.0])
    sol = _solve(pts, "goodput")
    assert [p.rate_rps for p in sol.points] == pytest.approx([10.0, 12.0])
    assert sol.counts == {"md": 3}


@pytest.mark.unit
def test_dinkelbach_over_points_finds_the_best_ratio():
    # cost 20 + 10 n; each point's rate at most min(its cap, 4 n): n = 1..5 give goodput
    # 4, 8, 11, 13, 15 for 30, 40, 50, 60, 70 $/h: the best ratio is n = 3, 11 / 50 = 0.22
    t = _tables(rate=None, prefill_cost_per_hour=20.0)
    pts = points.points(t, [1.0, 1.0], [None, None], rate_max=[10.0, 20.0])
    sol, best = milp.dinkelbach_points(pts)
    assert best == pytest.approx(0.22)
    assert sol.counts == {"md": 3}
    assert [p.rate_rps for p in sol.points] == pytest.approx([10.0, 12.0])


# ------------------------------------------------------------------ one point


@pytest.mark.unit
def test_one_point_is_the_single_rate_model_by_name():
    # the solver orders columns by name: a one-point model carries no point tag
    m = milp.build(_tables(relay=True))
    assert [v.name for v in m.prob.variables()] == [
        "f_0_p_md_0",
        "f_0_p_rld_md_0",
        "n_0",
        "n_1",
        "z_0",
    ]
    assert list(m.rows) == [
        "demand_0",
        "line_choice",
        "route_0_0",
        "main_decode_throughput",
        "main_decode_kv_memory",
        "relay_decode_throughput",
        "relay_decode_kv_memory",
        "gpus_A_h100",
        "gpus_B_h200",
        "ttft_p90",
        "ttft_p99",
    ]
    two = milp.build_points(points.points(_tables(relay=True), [1.0, 1.0], [10.0, 20.0]))
    # two points: tagged rows over the one shared fleet
    row = two.rows["main_decode_throughput_k1"]
    assert "demand_0_k1" in two.rows
    assert {v.name for v in row.keys()} == {"f_0_p_md_0_k1", "f_0_p_rld_md_0_k1", "n_0"}


@pytest.mark.unit
def test_solve_is_solve_points_of_one_point():
    t = _tables(relay=True)
    a, b = milp.solve(t), _solve(points.single(t))
    assert a.cost_per_hour == b.cost_per_hour and a.counts == b.counts
    assert a.rate_rps == b.points[0].rate_rps
    assert b.size == {"rows": 11, "columns": 5, "integers": 3}
