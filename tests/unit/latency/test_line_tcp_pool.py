"""The line as it really behaves (issue 13): one TCP connection's rate from the path, slow start,
the connection pool's wait against Erlang C, the pool and a busy line as one limited-processor-
sharing queue against the replay, and an over-capacity line replayed, not refused."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency import closed_forms
from pdd_plan.latency.closed_forms import erlang_c
from pdd_plan.latency.line import tcp, transfer
from pdd_plan.latency.line.law import transfer_law
from pdd_plan.sim.queues import LineInputs, LineStats, run_line
from pdd_plan.sim.result import SimResult


def _sku(**kw) -> LineSKU:
    # one stream per transfer unless a test stripes (k = 1 keeps the single-connection algebra)
    base = dict(
        name="t", gbps=20, cost_per_month=1, rtt_ms=10, loss_rate=0.0, streams_per_transfer=1
    )
    return LineSKU(**{**base, **kw})


@pytest.mark.unit
def test_mathis_and_window_limits_by_hand():
    s = _sku(loss_rate=1e-6)
    # MSS / RTT x sqrt(3/2) / sqrt(p) = 1448 B / 0.01 s x 1.2247449 / 0.001
    assert tcp.mathis_bytes_s(s) == pytest.approx(144_800 * 1.2247449 * 1000, rel=1e-6)
    # window / RTT = 4 MiB / 10 ms
    assert tcp.window_limit_bytes_s(s) == pytest.approx(4 * 1024 * 1024 / 0.01)
    # loss-based: the least of line goodput (20 Gb/s x 0.9 = 2.25e9 B/s), window, Mathis
    assert tcp.path_rate_bytes_s(s) == pytest.approx(1.773434e8, rel=1e-5)
    # BBR ignores random loss: window-limited
    assert tcp.path_rate_bytes_s(_sku(loss_rate=1e-6, congestion="bbr")) == pytest.approx(
        419_430_400.0
    )
    # a bigger window: the line's goodput binds
    big = _sku(max_window_bytes=1e9)
    assert tcp.path_rate_bytes_s(big) == pytest.approx(20e9 / 8 * 0.9)
    # the override wins, capped at the line
    assert tcp.path_rate_bytes_s(_sku(per_connection_gbps=10)) == pytest.approx(10e9 / 8 * 0.9)
    assert math.isinf(tcp.mathis_bytes_s(_sku(loss_rate=1e-6, rtt_ms=0)))


@pytest.mark.unit
def test_message_overhead_by_hand():
    s = _sku(message_bytes=1_000_000, message_header_bytes=24)
    r = 419_430_400.0
    assert tcp.flow_rate_bytes_s(s) == pytest.approx(r * 1e6 / 1_000_024)
    # a per-message ack: one RTT per 1 MB message
    ack = _sku(message_bytes=1_000_000, message_header_bytes=24, message_round_trip=True)
    assert tcp.flow_rate_bytes_s(ack) == pytest.approx(1e6 / (1_000_024 / r + 0.01))


@pytest.mark.unit
def test_single_transfer_is_slow_start_plus_size_over_rate_plus_rtt():
    s = _sku(slow_start="every_transfer", message_header_bytes=0)
    line = transfer.LineConfig(s, 1)
    r = 4 * 1024 * 1024 / 0.01  # window-limited rate, below the line's 2.25e9 B/s
    assert line.flow_cap_bytes_s == pytest.approx(r)
    iw = 10 * 1448
    # W* = r x RTT = 4,194,304 B = 289.7 IW -> 9 doubling rounds carrying IW (2^9 - 1) bytes
    ramp = iw * 511
    x = 20e6
    t_ss = 9 * 0.01 + (x - ramp) / r
    assert line.slow_start_s(np.array([x]))[0] == pytest.approx(t_ss - x / r)
    assert transfer.bare_transfer_s(np.array([x]), line)[0] == pytest.approx(t_ss + 0.01)
    # a small transfer ends within the ramp: ceil(log2(x / IW + 1)) = 3 round trips
    assert line.slow_start_s(np.array([1e5]))[0] == pytest.approx(0.03 - 1e5 / r)
    # alone on the line the simulator holds the connection x / rate; it opened a fresh one
    inp = LineInputs(np.array([0.0]), np.array([0]), np.array([x]), 2.25e9, r, 16, 0.01)
    start, end, _, _, st = run_line(inp)
    assert end[0] - start[0] == pytest.approx(x / r)
    assert st.fresh == [0]


@pytest.mark.unit
def test_striped_transfer_by_hand():
    """k = 4 streams (Mooncake's default lanes per peer): the transfer runs at 4 x one
    connection's rate, its 4 connections ramp side by side with x / 4 bytes each, and the pool
    of 16 connections serves 4 transfers at once."""
    s = _sku(slow_start="every_transfer", message_header_bytes=0, streams_per_transfer=4)
    line = transfer.LineConfig(s, 1)
    r1 = 4 * 1024 * 1024 / 0.01  # one connection, window-limited: 419,430,400 B/s
    assert line.connection_bytes_s == pytest.approx(r1)
    assert line.flow_cap_bytes_s == pytest.approx(4 * r1)  # 1.678e9 B/s < line 2.25e9 B/s
    assert (line.connections, line.streams, line.pool) == (64, 4, 16)
    assert transfer.LineConfig(_sku(streams_per_transfer=4, connections=18), 2).pool == 8
    assert line.usable_bytes_s == pytest.approx(2.25e9)  # the line binds, not 16 x 1.678e9
    x = 20e6
    # each connection sends 5e6 B < the ramp IW (2^9 - 1) = 7,399,280 B: it ends inside slow
    # start after ceil(log2(5e6 / 14,480 + 1)) = ceil(8.44) = 9 round trips = 0.09 s
    assert line.slow_start_s(np.array([x]))[0] == pytest.approx(0.09 - x / (4 * r1))
    assert transfer.bare_transfer_s(np.array([x]), line)[0] == pytest.approx(0.09 + 0.01)
    # without slow start: x / (4 r1) + RTT = 0.011921 + 0.01 s (k = 1: 0.047684 + 0.01 s)
    warm = transfer.LineConfig(_sku(message_header_bytes=0, streams_per_transfer=4), 1)
    assert transfer.bare_transfer_s(np.array([x]), warm)[0] == pytest.approx(x / (4 * r1) + 0.01)
    # the simulator: alone at 4 r1; two at once share the line, min(2.25e9 / 2, 4 r1) each
    cap, pool = line.flow_cap_bytes_s, line.pool
    start, end, *_ = run_line(
        LineInputs(np.zeros(1), np.arange(1), np.array([x]), 2.25e9, cap, pool, 0.01)
    )
    assert end[0] - start[0] == pytest.approx(x / (4 * r1))
    start, end, *_ = run_line(
        LineInputs(np.zeros(2), np.arange(2), np.full(2, x), 2.25e9, cap, pool, 0.01)
    )
    assert end - start == pytest.approx(np.full(2, x / 1.125e9))
    # the pool holds 16 transfers: a 17th arriving with 16 in flight waits for the first to end
    ready = np.concatenate([np.zeros(16), [1e-3]])
    start, end, *_ = run_line(
        LineInputs(ready, np.arange(17), np.full(17, x), 2.25e9, cap, pool, 0.01)
    )
    assert start[16] == pytest.approx(end[:16].min())
    assert start[16] == pytest.approx(16 * x / 2.25e9)  # 16 equal flows at C / 16 each


@pytest.mark.unit
def test_streams_must_fit_the_pool(tmp_path):
    with pytest.raises(ValueError, match="streams_per_transfer 8 exceeds connections 4"):
        _sku(streams_per_transfer=8, connections=4)
    # an inline scenario line: one error line, exit 2, naming the field
    import yaml

    d = yaml.safe_load((profiles.example_path()).read_text())
    d["link"]["candidates"] = [
        {"gbps": 10, "cost_per_month": 100, "connections": 2, "streams_per_transfer": 4}
    ]
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    r = CliRunner().invoke(app, ["optimize", str(p)])
    assert r.exit_code == 2, r.output
    assert "streams_per_transfer 4 exceeds connections 2" in r.output
    assert "Traceback" not in r.output


@pytest.mark.unit
def test_persistent_pool_opens_connections_only_when_all_are_busy():
    # three transfers one after the other: one connection, opened once
    ready = np.array([0.0, 1.0, 2.0])
    inp = LineInputs(ready, np.arange(3), np.full(3, 1e6), 1e9, 1e8, 4, 0.01)
    assert run_line(inp)[4].fresh == [0]
    # three at once: three connections
    inp = LineInputs(np.zeros(3), np.arange(3), np.full(3, 1e6), 1e9, 1e8, 4, 0.01)
    assert run_line(inp)[4].fresh == [0, 1, 2]


@pytest.mark.unit
@pytest.mark.parametrize("k", [1, 4])
def test_pool_wait_matches_erlang_c(k):
    """M/M/c: Poisson arrivals, exponential sizes, each transfer at its cap (the line has room
    for the whole pool), so service = size / cap. Mean wait C(c, a) E[S] / (c - a); the
    simulated mean over 300,000 transfers within 5% (its own sampling error is ~2%). With k
    streams per transfer the pool has c x k connections at cap / k each: the same c servers."""
    rng = np.random.default_rng(7)
    n, c, lam, es = 300_000, 4, 30.0, 0.1  # a = 3, utilization 0.75
    cap = 1e8
    line = transfer.LineConfig(
        _sku(
            gbps=c * cap * 10 * 8 / 0.9 / 1e9,
            per_connection_gbps=cap / k * 8 / 0.9 / 1e9,
            connections=c * k,
            streams_per_transfer=k,
            rtt_ms=0,
            message_header_bytes=0,
        ),
        1,
    )
    assert line.pool == c and line.flow_cap_bytes_s == pytest.approx(cap)
    ready = np.cumsum(rng.exponential(1 / lam, n))
    size = rng.exponential(es * cap, n)
    inp = LineInputs(ready, np.arange(n), size, c * cap * 10, line.flow_cap_bytes_s, line.pool, 0.0)
    start, end, _, _, _ = run_line(inp)
    a = lam * es
    want = erlang_c(c, a) * es / (c - a)
    # tolerance: 5%: the seeded replay's Monte Carlo error, as in test_sim_queues
    assert float(np.mean(start - ready)) == pytest.approx(want, rel=0.05)
    # the analytic line model says the same, given the size law as 400 equal-weight strata
    # (its hold is x / cap: the line has room, so the mean hold is E[S])
    rho = lam * es * cap / line.usable_bytes_s
    xs = _strata(size)
    got = float(np.mean(transfer_law(xs, np.ones(xs.size), line, rho).total)) - es
    assert got == pytest.approx(want, rel=0.05)


def _strata(size: np.ndarray, n: int = 400) -> np.ndarray:
    """The size law as ``n`` equal-weight quantile points (how the planner's strata see it)."""
    return np.quantile(size, (np.arange(n) + 0.5) / n)


@pytest.mark.unit
@pytest.mark.parametrize(
    "connections, per_connection_gbps, rho, law",
    [
        (16, None, 0.9, "exponential"),  # one transfer fills the line: M/M/1-PS until 16 hold it
        (16, None, 0.8, "lognormal"),
        (8, 0.3, 0.8, "lognormal"),  # 4 transfers fill the line, 8 slots
        (8, 0.3, 0.9, "exponential"),
    ],
)
def test_pool_behind_a_busy_line_matches_the_replay(connections, per_connection_gbps, rho, law):
    """The pool and the line are one limited-processor-sharing queue: at most c transfers share
    the line, the rest wait FIFO. The analytic mean time ready -> last byte (hold + pool wait)
    against a 300,000-transfer replay, within 8%, for exponential sizes (where the birth-death
    chain is exact) at 90% busy and a lognormal spread of squared CV 3.2 (the wait scaled by
    (1 + cs^2) / 2) at 80%. At 90% busy that spread's replays scatter by +-8% seed to seed and
    the law sits 0-16% under them: the verification replay's line_delay covers the rest."""
    rng = np.random.default_rng(11)
    n, ex = 300_000, 50e6
    sku = _sku(
        gbps=1,
        connections=connections,
        per_connection_gbps=per_connection_gbps,
        rtt_ms=0,
        message_header_bytes=0,
    )
    line = transfer.LineConfig(sku, 1)
    if law == "exponential":
        size = rng.exponential(ex, n)
    else:
        size = rng.lognormal(0.0, 1.2, n)
        size *= ex / size.mean()
    lam = rho * line.usable_bytes_s / ex
    ready = np.cumsum(rng.exponential(1 / lam, n))
    inp = LineInputs(
        ready,
        np.arange(n),
        size,
        line.capacity_bytes_s,
        line.flow_cap_bytes_s,
        line.pool,
        0.0,
    )
    start, end, _, _, _ = run_line(inp)
    sim = float(np.mean(end - ready))
    xs = _strata(size)
    got = float(np.mean(transfer_law(xs, np.ones(xs.size), line, rho).total))
    # tolerance: 8%: the replay's seed-to-seed scatter (the docstring): over seeds 1-5 and 11 the
    # law is -7.7% to +1.5% off the 300,000-transfer replay in these four cases (SD about 3%); seed
    # 11 is the low end in all four
    assert got == pytest.approx(sim, rel=0.08)


@pytest.mark.unit
def test_pool_is_stable_whenever_the_line_is():
    """One eth-1g line (16 transfer slots, one transfer fills it) at 95% busy: with the mean
    processor-sharing hold x / (C (1 - rho)) as an M/M/c service time the pool's offered load
    is rho / (1 - rho) = 19 erlangs on 16 slots (an infinite wait), yet the line's total rate is
    the same whatever the number of holders, so the queue is an M/M/1 one in total: E[N] =
    rho / (1 - rho), E[T] = E[x] / (C (1 - rho)) by Little's law, finite."""
    line = transfer.LineConfig(profiles.line("eth-1g"), 1)
    assert line.pool == 16 and line.flow_cap_bytes_s >= line.capacity_bytes_s
    rho, x = 0.95, np.array([50e6])
    assert rho / (1 - rho) > line.pool  # the old law's offered load: over the pool
    t = transfer_law(x, np.ones(1), line, rho).total - line.sku.rtt_ms / 1e3
    # exponential sizes (one class with cs^2 = 0 halves the wait: give it two strata whose
    # spread has cs^2 = 1, sizes 0 and 2 E[x])
    t2 = transfer_law(np.array([0.0, 2 * x[0]]), np.ones(2), line, rho).total
    mean2 = float(np.mean(t2)) - line.sku.rtt_ms / 1e3
    assert np.isfinite(t).all() and mean2 == pytest.approx(x[0] / (line.capacity_bytes_s * 0.05))
    n_s, n_q = closed_forms.limited_ps_numbers(16, rho, 1.0, 1.0)
    assert n_s + n_q == pytest.approx(rho / (1 - rho))
    assert n_q == pytest.approx(rho**17 / (1 - rho))  # P(N > 16) = rho^17, geometric tail
    assert closed_forms.limited_ps_numbers(16, 1.0, 1.0, 1.0) == (math.inf, math.inf)


def _stub(offered_bytes: float, span: float, usable: float) -> SimpleNamespace:
    st = LineStats(span_s=span, bytes_sent=offered_bytes * span, transfers=100, ready_span_s=span)
    ns = SimpleNamespace(line=st, line_capacity_bytes_s=2 * usable, line_usable_bytes_s=usable)
    ns.offered_window_s = lambda: SimResult.offered_window_s(ns)
    ns.line_load = lambda: SimResult.line_load(ns)
    return ns


@pytest.mark.unit
def test_unstable_when_offered_reaches_capacity():
    assert SimResult.unstable.fget(_stub(1.0e9, 100.0, 1.0e9))
    assert SimResult.unstable.fget(_stub(1.2e9, 100.0, 1.0e9))
    assert not SimResult.unstable.fget(_stub(0.9e9, 100.0, 1.0e9))


@pytest.mark.unit
def test_window_must_be_positive():
    r = CliRunner().invoke(app, ["simulate", "--window", "0"])
    assert r.exit_code == 2 and "--window" in r.output


@pytest.mark.unit
def test_unbounded_figures_never_reach_a_plan():
    """A plan whose transfer or TTFT figure is infinite is refused with a one-line reason
    (before: pydantic's non-finite error, exit 3)."""
    from pdd_plan.common.errors import InfeasibleError
    from pdd_plan.optimize import summary

    line = transfer.LineConfig(profiles.line("eth-1g"), 1)
    p = SimpleNamespace(architecture="pdd", line=line, line_rho=0.97)
    summary._finite_or_refuse(p, [1.0, 2.0])  # finite: nothing to say
    with pytest.raises(InfeasibleError) as e:
        summary._finite_or_refuse(p, [1.0, math.inf])
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("pdd: no plan meets the scenario: line capacity")
    assert "1 x eth-1g at 97%" in msg and e.value.reasons[0].kind == "line_capacity"
