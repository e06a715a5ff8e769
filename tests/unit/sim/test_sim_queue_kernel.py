"""The compiled prefill and line loops (sim.queue_kernel) against the pure-Python loops they
replaced: the same starts, servers, ends, bytes, fresh connections and counters, bit for bit,
ties included (times rounded so they occur)."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from pdd_plan.sim.queues import LineInputs, _replay, fifo_least_loaded, run_line

pytestmark = pytest.mark.unit


def _fifo_python(a: np.ndarray, service_s: list[np.ndarray], counts: list[int]):
    """The loop fifo_least_loaded ran before it was compiled (heapq of (free, server))."""
    n = len(a)
    start, server = [0.0] * n, [0] * n
    groups = [(g, c) for g, c in enumerate(counts) if c > 0]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
    heaps = [[(0.0, first[g] + j) for j in range(c)] for g, c in groups]
    sls = [np.asarray(service_s[g], dtype=float).tolist() for g, _ in groups]
    for k, t in enumerate(a.tolist()):
        best, bi = math.inf, 0
        for i, h in enumerate(heaps):
            f = h[0][0]
            fin = (t if t > f else f) + sls[i][k]
            if fin < best:
                best, bi = fin, i
        f, j = heaps[bi][0]
        start[k], server[k] = (t if t > f else f), j
        heapq.heapreplace(heaps[bi], (best, j))
    return np.asarray(start), np.asarray(server, dtype=np.int32)


@pytest.mark.parametrize("counts", [[4], [3, 0, 2], [1, 1]])
def test_least_loaded_matches_python(counts: list[int]) -> None:
    rng = np.random.default_rng(sum(counts))
    n = 3000
    a = np.round(np.cumsum(rng.exponential(0.1, n)), 1)
    svc = [np.round(rng.exponential(0.3, n), 1) for _ in counts]
    got = fifo_least_loaded(a, svc, counts)
    want = _fifo_python(a, svc, counts)
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
    s, e, x, _, st = run_line(inp)
    start, end, sent, fresh = [math.nan] * n, [math.nan] * n, [0.0] * n, []
    t_end, transfers, most = _replay(inp, None, (start, end, sent, fresh), lambda *a: None)
    assert np.array_equal(s, np.array(start), equal_nan=True)
    assert np.array_equal(e, np.array(end), equal_nan=True)
    assert np.array_equal(x, np.array(sent))
    assert st.fresh == fresh
    assert (st.transfers, st.max_waiting) == (transfers, most)
    assert st.span_s == t_end - ready[0]
    assert most > 0  # the pool filled: the FIFO of waiters was exercised
