"""The compiled prefill and line loops (sim.queue_kernel) against the pure-Python loops they
replaced: the same starts, servers, ends, bytes, fresh connections and counters, bit for bit,
ties included (times rounded so they occur)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.sim import queue_kernel
from pdd_plan.sim.queues import (
    LineInputs,
    _compiled,
    _least_loaded_compiled,
    _least_loaded_python,
    _replay,
    run_line,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("counts", [[4], [3, 0, 2], [1, 1]])
def test_least_loaded_matches_python(counts: list[int]) -> None:
    rng = np.random.default_rng(sum(counts))
    n = 3000
    a = np.round(np.cumsum(rng.exponential(0.1, n)), 1)
    svc = [np.round(rng.exponential(0.3, n), 1) for _ in counts]
    got = _least_loaded_compiled(a, svc, counts, None)
    want = _least_loaded_python(a, svc, counts, None)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[1].dtype == want[1].dtype


@pytest.mark.parametrize(("cap", "pool"), [(3e8, 3), (math.inf, 8), (2e8, 1)])
def test_line_matches_python(cap: float, pool: int) -> None:
    rng = np.random.default_rng(pool)
    n = 3000
    ready = np.sort(np.round(rng.uniform(0, 300, n), 1))
    size = rng.exponential(1e8, n)
    size[rng.random(n) < 0.05] = -1.0  # p_rld: nothing crosses
    inp = LineInputs(ready, rng.permutation(n), size, 1.25e9, cap, pool, 0.02)
    s, e, x, fresh_c, (t_c, transfers_c, most_c) = _compiled(inp, n, lambda *a: None)
    start, end, sent, fresh = [math.nan] * n, [math.nan] * n, [0.0] * n, []
    t_end, transfers, most = _replay(inp, None, (start, end, sent, fresh), lambda *a: None)
    assert np.array_equal(s, np.array(start), equal_nan=True)
    assert np.array_equal(e, np.array(end), equal_nan=True)
    assert np.array_equal(x, np.array(sent))
    assert fresh_c == fresh
    assert (t_c, transfers_c, most_c) == (t_end, transfers, most)
    assert most > 0  # the pool filled: the FIFO of waiters was exercised
    # run_line takes either loop: the same replay
    st = run_line(inp)[4]
    assert (st.fresh, st.transfers, st.max_waiting) == (fresh, transfers, most)


def test_small_replays_compile_nothing_new() -> None:
    """A loop not compiled yet runs in Python below COMPILE_FROM requests (a fresh install's
    verification replays), compiled from it."""
    if queue_kernel.cached(queue_kernel.line_events):
        pytest.skip("the line loop is compiled or cached already")
    assert not queue_kernel.wanted(queue_kernel.line_events, queue_kernel.COMPILE_FROM - 1)
    assert queue_kernel.wanted(queue_kernel.line_events, queue_kernel.COMPILE_FROM)


def test_which_loop_a_replay_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule, kernel state by kernel state: a loop loaded in this process runs at any size;
    one in numba's cache loads from LOAD_FROM requests (below, the Python loop costs less
    than the load); one in neither compiles from COMPILE_FROM."""
    e = queue_kernel.least_loaded
    assert 0 < queue_kernel.LOAD_FROM < queue_kernel.COMPILE_FROM
    for now, cached, n, want in [
        (True, True, 1, True),
        (False, True, queue_kernel.LOAD_FROM - 1, False),
        (False, True, queue_kernel.LOAD_FROM, True),
        (False, False, queue_kernel.LOAD_FROM, False),
        (False, False, queue_kernel.COMPILE_FROM - 1, False),
        (False, False, queue_kernel.COMPILE_FROM, True),
    ]:
        monkeypatch.setattr(queue_kernel, "ready_now", lambda _e, v=now: v)
        monkeypatch.setattr(queue_kernel, "cached", lambda _e, v=cached: v)
        assert queue_kernel.wanted(e, n) is want, (now, cached, n)


def test_bilinear_matches_the_vectorized_one(monkeypatch) -> None:
    """The compiled table lookup against timings._bilinear's numpy one: the same bits, points
    off the grid (clamped) and on its nodes included."""
    import sys

    from pdd_plan.sim import timings

    rng = np.random.default_rng(3)
    xg, yg = np.sort(rng.uniform(0, 10, 9)), np.sort(rng.uniform(0, 10, 6))
    z = rng.random((9, 6))
    x = np.concatenate([rng.uniform(-1, 11, 5000), xg])
    y = np.concatenate([rng.uniform(-1, 11, 5000), yg[rng.integers(0, 6, 9)]])
    queue_kernel.ready(queue_kernel.bilinear)
    got = np.empty(x.size)
    queue_kernel.bilinear(xg, yg, z, x, y, got)
    monkeypatch.delitem(sys.modules, "pdd_plan.sim.queue_kernel")  # the numpy path
    assert np.array_equal(got, timings._bilinear(xg, yg, z, x, y))
