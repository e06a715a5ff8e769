"""The simulator's queueing engines against closed forms on long runs (within 5%, load 0.5-0.9).

FIFO prefill (Lindley / least-loaded heap): M/M/1 and M/D/1 mean waits, M/M/2 against Erlang C.
Line (processor sharing over a connection pool): M/G/1-PS mean response time by job size,
E[T | x] = x / (C (1 - rho)), with exponential sizes. Decode (fluid continuous batching):
exactly a FIFO queue at batch cap 1, and processor sharing when the step grows with the batch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.sim.decode.decoder import DecodeInputs, Engine, run_decode
from pdd_plan.sim.queues import LineInputs, fifo_least_loaded, lindley_wait, run_line

LOADS = (0.5, 0.7, 0.9)


def _poisson(rng: np.random.Generator, rate: float, n: int) -> np.ndarray:
    return np.cumsum(rng.exponential(1.0 / rate, n))


@pytest.mark.unit
@pytest.mark.parametrize("rho", LOADS)
def test_mm1_mean_wait(rho: float) -> None:
    rng = np.random.default_rng(11)
    n = 2_000_000
    a = _poisson(rng, rho, n)
    s = rng.exponential(1.0, n)
    start, server = fifo_least_loaded(a, [s], [1])
    w = float(np.mean(start - a))
    # tolerance: 5%: over 3 batch-means standard errors of the seeded run at load 0.9 (1.4% for
    # M/M/1 at 2,000,000 requests; under 1% at 0.5 and 0.7)
    assert w == pytest.approx(rho / (1 - rho), rel=0.05)
    assert (server == 0).all()


@pytest.mark.unit
@pytest.mark.parametrize("rho", LOADS)
def test_md1_mean_wait(rho: float) -> None:
    rng = np.random.default_rng(12)
    n = 2_000_000
    a = _poisson(rng, rho, n)
    w = float(np.mean(lindley_wait(a, np.ones(n))))
    # tolerance: 5%: over 5 batch-means standard errors of the seeded run (50 batches of 2,000,000
    # requests: 0.25%, 0.29% and 0.89% of the mean at loads 0.5, 0.7 and 0.9)
    assert w == pytest.approx(rho / (2 * (1 - rho)), rel=0.05)


def _erlang_c_wait(c: int, lam: float, mu: float) -> float:
    a = lam / mu
    top = a**c / math.factorial(c) * c / (c - a)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c * mu - lam)


@pytest.mark.unit
@pytest.mark.parametrize("rho", LOADS)
def test_least_loaded_is_mmc(rho: float) -> None:
    """Sending each arrival to the server that frees first is a central FCFS M/M/c queue."""
    rng = np.random.default_rng(13)
    n = 600_000
    a = _poisson(rng, 2 * rho, n)
    s = rng.exponential(1.0, n)
    start, server = fifo_least_loaded(a, [s], [2])
    # tolerance: 5%: the Monte Carlo error of 600,000 seeded requests
    assert float(np.mean(start - a)) == pytest.approx(_erlang_c_wait(2, 2 * rho, 1.0), rel=0.05)
    assert set(np.unique(server)) == {0, 1}
    # two groups of one identical server each: the same system
    start2, _ = fifo_least_loaded(a, [s, s], [1, 1])
    np.testing.assert_allclose(start2, start, rtol=0, atol=1e-9)


@pytest.mark.unit
def test_lindley_matches_a_plain_loop() -> None:
    rng = np.random.default_rng(14)
    a = _poisson(rng, 0.8, 2000)
    s = rng.exponential(1.0, 2000)
    w, free = [], 0.0
    for t, x in zip(a, s):
        st = max(t, free)
        w.append(st - t)
        free = st + x
    np.testing.assert_allclose(lindley_wait(a, s), w, atol=1e-9)


@pytest.mark.unit
@pytest.mark.parametrize("rho", LOADS)
def test_line_is_mg1_ps_by_job_size(rho: float) -> None:
    """A huge pool, no flow cap, no RTT: the line is M/G/1-PS, E[T | x] = x / (C (1 - rho))."""
    rng = np.random.default_rng(21)
    n = 600_000
    cap = 2.0  # bytes/s
    x = rng.exponential(1.0, n)
    a = _poisson(rng, rho * cap, n)
    start, end, sent, route, st = run_line(
        LineInputs(a, np.arange(n), x, cap, math.inf, 10**9, 0.0)
    )
    t = end - a
    assert (start == a).all() and (route == 0).all()
    # tolerance: 5%: the seeded run's Monte Carlo error (600,000 requests)
    assert float(t.mean()) == pytest.approx(x.mean() / (cap * (1 - rho)), rel=0.05)
    edges = np.quantile(x, [0.0, 0.25, 0.5, 0.75, 0.9, 1.0])
    b = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, 4)
    for k in range(5):
        m = b == k
        # tolerance: 5%: each size bin's mean has a batch-means standard error (50 batches of the
        # seeded run) of 0.3-0.4% at load 0.5, 0.8-0.9% at 0.7 and 2.1-2.5% at 0.9: 2 SE at the
        # highest load
        assert float(t[m].mean()) == pytest.approx(
            float(x[m].mean()) / (cap * (1 - rho)), rel=0.05
        ), f"size bin {k}"
    # the line is busy a share rho of the time and carries every byte
    assert st.busy_s / st.span_s == pytest.approx(rho, rel=0.02)
    assert st.bytes_sent == pytest.approx(float(x.sum()))


@pytest.mark.unit
def test_line_pool_of_one_is_fifo() -> None:
    """One connection: transfers queue FIFO and each gets the whole line (capped)."""
    rng = np.random.default_rng(22)
    n = 20_000
    x = rng.exponential(1.0, n)
    a = _poisson(rng, 0.7, n)
    start, end, *_ = run_line(LineInputs(a, np.arange(n), x, 1.0, math.inf, 1, 0.0))
    w = lindley_wait(a, x)
    np.testing.assert_allclose(start - a, w, atol=1e-7)
    np.testing.assert_allclose(end, a + w + x, atol=1e-7)


@pytest.mark.unit
def test_line_flow_cap_and_rtt() -> None:
    """A lone transfer moves at the per-connection cap; two together share the line."""
    # 10 bytes at a 2 B/s cap on a 3 B/s line: 5 s; RTT is added by the caller on delivery
    start, end, *_ = run_line(
        LineInputs(np.array([0.0]), np.array([0]), np.array([10.0]), 3.0, 2.0, 4, 0.1)
    )
    assert end[0] == pytest.approx(5.0)
    # two equal transfers at once: 1.5 B/s each (line-bound, under the cap)
    _, end, *_ = run_line(
        LineInputs(np.array([0.0, 0.0]), np.array([0, 1]), np.array([3.0, 3.0]), 3.0, 2.0, 4, 0.0)
    )
    np.testing.assert_allclose(end, [2.0, 2.0])


@pytest.mark.unit
def test_line_router_and_backlog() -> None:
    """The rule relays a request whose predicted delay (backlog + own bytes) / C breaks its
    budget; a short-output one finishes on relay decode and sends nothing."""
    from pdd_plan.sim.queues import Router

    ready = np.array([0.0, 0.1, 0.2])
    size = np.array([10.0, 1.0, 1.0])
    # budget 3 s, C = 1 B/s: request 0 alone needs 10 s -> relay; request 1 arrives behind a
    # backlog of ~9.9 bytes -> relay; request 2 (output 5 <= singular 8) -> p_rld
    router = Router([0.0, 0.0, 0.0], [100, 100, 5], 3.0, 8)
    start, end, sent, route, st = run_line(
        LineInputs(ready, np.arange(3), size, 1.0, math.inf, 8, 0.0, router)
    )
    assert route.tolist() == [1, 1, 2]
    assert np.isnan(end[2]) and sent[2] == 0.0 and st.transfers == 2
    router = Router([0.0, 0.0, 0.0], [100, 100, 100], 100.0, 8)
    *_, route, _ = run_line(LineInputs(ready, np.arange(3), size, 1.0, math.inf, 8, 0.0, router))
    assert route.tolist() == [0, 0, 0]


class _Steps:
    """A stand-in step table: step seconds by batch, one context column."""

    def __init__(self, by_batch: list[float]):
        self.cols = [by_batch]
        self.bmax = len(by_batch) - 1

    def __call__(self, b: int, ctx: float) -> float:
        return self.cols[0][min(b, self.bmax)]


def _decode(out: np.ndarray, arrive: np.ndarray, eng: Engine):
    n = len(out)
    z = np.zeros(n)
    return run_decode(
        DecodeInputs(
            np.zeros(n, np.int8), arrive, arrive, out, z + 1, z + 1, z, z, [eng], [], None, 1, False
        )
    )


@pytest.mark.unit
def test_decode_batch_of_one_is_fifo() -> None:
    rng = np.random.default_rng(31)
    n, s = 100_000, 0.01
    out = rng.integers(1, 200, n)
    a = _poisson(rng, 0.8 / (out.mean() * s), n)
    d = _decode(out, a, Engine(_Steps([s, s]), 1, 1e30))
    w = lindley_wait(a, out * s)
    np.testing.assert_allclose(d.md_admit_s, a + w, atol=1e-7)
    np.testing.assert_allclose(d.end_s, a + w + out * s, atol=1e-7)
    np.testing.assert_allclose(d.first_s, a + w + s, atol=1e-7)


@pytest.mark.unit
@pytest.mark.parametrize("rho", (0.5, 0.9))
def test_decode_step_linear_in_batch_is_ps(rho: float) -> None:
    """step(B) = B c: every request gets 1 / (B c) tokens/s, i.e. M/G/1-PS of 1/c tokens/s."""
    rng = np.random.default_rng(32)
    n, c, bmax = 300_000, 0.001, 4000
    out = rng.exponential(100.0, n).astype(np.int64) + 1
    a = _poisson(rng, rho / (out.mean() * c), n)
    d = _decode(out, a, Engine(_Steps([c * max(b, 1) for b in range(bmax + 1)]), bmax, 1e30))
    t, x = d.end_s - a, out * c
    # tolerance: 5%: the seeded run's Monte Carlo error (300,000 requests)
    assert float(t.mean()) == pytest.approx(x.mean() / (1 - rho), rel=0.05)
    big = x >= np.quantile(x, 0.9)
    assert float(t[big].mean()) == pytest.approx(float(x[big].mean()) / (1 - rho), rel=0.05)


@pytest.mark.unit
def test_decode_kv_pool_bounds_the_batch() -> None:
    """Reserved KV caps the batch below bmax: with room for two, the third waits."""
    out = np.array([10, 10, 10])
    a = np.array([0.0, 0.0, 0.0])
    z = np.zeros(3)
    eng = Engine(_Steps([1.0] * 9), 8, 2.5)
    d = run_decode(
        DecodeInputs(
            np.zeros(3, np.int8), a, a, out, z + 1, z + 1, z + 1.0, z, [eng], [], None, 1, False
        )
    )
    np.testing.assert_allclose(d.md_admit_s, [0.0, 0.0, 10.0])
    np.testing.assert_allclose(d.end_s, [10.0, 10.0, 20.0])
