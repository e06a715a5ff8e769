"""The fleet MILP against brute force, and the planner's infeasibility diagnoses.

(a) `milp.solve` (objective 'cost', fixed rate) against `optimize.bruteforce`, which enumerates
every integer decision and checks the continuous rest with an independent LP (scipy linprog),
on seeded random small tables; (b) end to end: `plan_architecture`'s cost on a tiny real
scenario equals the minimum brute-force cost over every combination it enumerates (bounding
switched off), so neither a per-combination MILP nor the bound loses the optimum; (c) through
the command line: each kind of infeasible scenario gets its own diagnosis and exit 1, an
architecture that alone is infeasible is reported under `infeasible` with exit 0, and the
relaxation a message suggests is checked by re-running with it.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.oracles import bruteforce
from pdd_plan.optimize import milp
from pdd_plan.optimize.tables import DecodeCandidate, FleetTables, PathTable, rdma_option

# ================================================================== (a) MILP vs brute force

SEEDS = range(12)  # fixed: derandomized; the draws include feasible and infeasible tables


def _agree(t, tag: str) -> float | None:
    sol = milp.solve(t)
    ref = bruteforce.solve(t)
    assert (sol is None) == (ref is None), (
        f"{tag}: feasibility differs: MILP {sol and sol.cost_per_hour}, brute force "
        f"{ref and ref.cost}"
    )
    if ref is None:
        return None
    assert sol.cost_per_hour == pytest.approx(ref.cost, rel=1e-6), (
        f"{tag}: MILP {sol.counts} line {sol.line_index} ${sol.cost_per_hour}/h, "
        f"brute force {ref.counts} line {ref.line_index} ${ref.cost}/h"
    )
    # the MILP's own decision is feasible by the independent check, at the cost it reports
    n_md = len(t.md)
    counts = [sol.counts[c.key] for c in t.md + t.rld]
    cap = t.decode_cap
    md = (
        cap * sum(k * c.tokens_per_s for k, c in zip(counts[:n_md], t.md)),
        cap * sum(k * c.kv_pool_bytes / c.step_s for k, c in zip(counts[:n_md], t.md)),
    )
    rld = (
        cap * sum(k * c.tokens_per_s for k, c in zip(counts[n_md:], t.rld)),
        cap * sum(k * c.kv_pool_bytes / c.step_s for k, c in zip(counts[n_md:], t.rld)),
    )
    assert bruteforce.flows_feasible(t, sol.line_index, md, rld), tag
    want = (
        sum(k * c.cost_per_hour for k, c in zip(counts, t.md + t.rld))
        + t.lines[sol.line_index].cost_per_hour
        + t.prefill_cost_per_hour
    )
    assert sol.cost_per_hour == pytest.approx(want, rel=1e-9), tag
    # its flows meet every class's demand
    total = sum(sol.flows.values())
    np.testing.assert_allclose(total, t.rate_rps * t.weight, rtol=1e-6, atol=1e-9)
    return ref.cost


@pytest.mark.unit
@pytest.mark.parametrize("seed", SEEDS)
def test_milp_matches_brute_force_on_random_tables(seed):
    _agree(bruteforce.random_tables(seed), f"seed {seed}")


@pytest.mark.unit
def test_random_tables_cover_both_outcomes_and_every_shape():
    # guards the generator: a change that made every draw feasible (or trivial) would make the
    # comparison above vacuous
    ts = [bruteforce.random_tables(s) for s in SEEDS]
    feasible = [bruteforce.solve(t) is not None for t in ts]
    assert 0 < sum(feasible) < len(ts)
    assert {len(t.weight) for t in ts} >= {2, 3, 4}
    assert {len(t.rld) for t in ts} >= {0, 1, 2}
    assert {len(t.lines) for t in ts} >= {1, 2, 3}
    assert {len(t.md) for t in ts} == {1, 2}
    # K > 1 somewhere: the integer choice is not just on/off
    assert max(max(bruteforce.upper_counts(t), default=0) for t in ts) >= 3


def _hand_tables(gpus_b: int = 100) -> FleetTables:
    """The instance tests/unit/perf/test_hand_arithmetic.py solves by hand ($34/h: 3 MD + 1 RLD). Class 0 (80 %)
    goes direct; class 1 (20 %) misses the P90 on p_md and may relay (50 of its 100 tokens on RLD).
    MD gives 0.5 x 800 tok/s per $10/h instance, RLD 0.5 x 100 per $4/h one; 10 req/s."""

    def cand(key, role, dc, gpu, cost, tps):
        return DecodeCandidate(key, role, dc, gpu, 8, cost, tps, 1e12, 0.01)

    paths = PathTable(
        allowed={"p_md": np.array([True, True]), "p_rld_md": np.array([False, True])},
        miss={
            0.9: {"p_md": np.array([0.0, 1.0]), "p_rld_md": np.array([0.0, 0.0])},
            0.99: {"p_md": np.array([0.0, 0.05]), "p_rld_md": np.array([0.0, 0.0])},
        },
        md_tokens={"p_md": np.array([100.0, 100.0]), "p_rld_md": np.array([0.0, 50.0])},
        rld_tokens={"p_md": np.array([0.0, 0.0]), "p_rld_md": np.array([0.0, 50.0])},
        crosses_line={"p_md": True, "p_rld_md": True, "p_rld": False},
        times=None,
    )
    return FleetTables(
        weight=np.array([0.8, 0.2]),
        line_bytes=np.zeros(2),
        kv_bytes=np.ones(2),
        md=[cand("md", "main_decode", "B", "h200", 10.0, 800.0)],
        rld=[cand("rld", "relay_decode", "A", "h100", 4.0, 100.0)],
        lines=[rdma_option()],
        paths=[paths],
        gpus_left={("A", "h100"): 100, ("B", "h200"): gpus_b},
        decode_cap=0.5,
        rate_rps=10.0,
    )


@pytest.mark.unit
def test_brute_force_on_the_hand_solved_instance():
    cost, counts, line = bruteforce.solve(_hand_tables())
    assert cost == pytest.approx(34.0)
    assert counts == {"md": 3, "rld": 1} and line == 0
    # 16 GPUs in B: two MD instances carry 800 tok/s, MD needs at least 900 however it routes
    assert bruteforce.solve(_hand_tables(gpus_b=16)) is None
    assert milp.solve(_hand_tables(gpus_b=16)) is None


@pytest.mark.unit
def test_brute_force_upper_counts_cover_the_load():
    t = bruteforce.random_tables(3)
    for k, c in zip(bruteforce.upper_counts(t), t.md + t.rld):
        assert k >= 0
        assert k * c.gpus <= t.gpus_left[c.datacenter, c.gpu]


# ================================================================== (b) end to end, tiny real case


# ================================================================== (c) diagnoses through the CLI
