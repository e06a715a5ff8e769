"""What one transfer gets on a shared, lossy line: other tenants' share, loss that grows with
the line's load, slow start after idle as Linux restarts a window, the sender's copy and
setup; each against hand arithmetic, and the replay's restart against its idle gaps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency.line import tcp, transfer
from pdd_plan.latency.line.delay_shape import spread_points, transfer_quantiles
from pdd_plan.sim.queues import LineStats
from pdd_plan.sim.replay import _ramp


def _sku(**kw) -> LineSKU:
    d = dict(name="t", gbps=10, cost_per_month=1, rtt_ms=20, loss_rate=1e-4, streams_per_transfer=1)
    d.update(kw)
    return LineSKU(**d)


@pytest.mark.unit
def test_other_tenants_take_their_share_of_the_line():
    sku = _sku(background_load=0.3)
    # 10 Gb/s x 0.9 goodput x 0.7 left to us
    assert sku.bytes_per_s == pytest.approx(10e9 / 8 * 0.9 * 0.7)
    line = transfer.LineConfig(sku, 2)
    assert line.capacity_bytes_s == pytest.approx(2 * 10e9 / 8 * 0.9 * 0.7)
    with pytest.raises(ValidationError):
        _sku(background_load=0.99)


@pytest.mark.unit
def test_congestive_loss_grows_with_the_line_load_and_slows_a_connection():
    sku = _sku(loss_rate=1e-5, congestive_loss_rate=4e-4, background_load=0.5)
    line = transfer.LineConfig(sku, 1)
    # our 50% of the usable share on a line half used by others: u = 0.5 + 0.5 x 0.5
    assert line.utilization(0.5) == pytest.approx(0.75)
    loaded, rho = line.loaded(0.5)
    assert loaded.sku.loss_rate == pytest.approx(1e-5 + 4e-4 * 0.75)
    # Mathis: MSS / RTT x sqrt(3/2) / sqrt(p), less the 24 B header per 1 MiB message
    mathis = 1448 / 0.02 * math.sqrt(1.5) / math.sqrt(1e-5 + 3e-4)
    assert loaded.connection_bytes_s == pytest.approx(mathis * 1048576 / (1048576 + 24))
    # the pool is not what binds here: the same share of the same usable capacity
    assert rho == pytest.approx(0.5 * line.usable_bytes_s / loaded.usable_bytes_s)
    assert line.loaded(0.9)[0].connection_bytes_s < loaded.connection_bytes_s
    # without congestive loss the line is itself
    plain = transfer.LineConfig(_sku(), 1)
    assert plain.loaded(0.5) == (plain, 0.5)
    with pytest.raises(ValidationError):
        _sku(loss_rate=0.6, congestive_loss_rate=0.5)


@pytest.mark.unit
def test_linux_restarts_the_window_halved_per_rto_idle():
    sku = _sku()  # RTO = 20 ms RTT + 200 ms TCP_RTO_MIN
    assert sku.rto_s == pytest.approx(0.22)
    idle = np.array([0.1, 0.22, 0.25, 0.45, 0.67, 10.0, np.inf])
    # tcp_cwnd_restart: delta = idle; while ((delta -= rto) > 0) halve
    assert tcp.restart_halvings(idle, sku).tolist() == [0, 0, 1, 2, 3, 45, np.inf]
    rate = 4e6  # window 80 KB at 20 ms; the initial window 14,480 B
    w = tcp.restart_window_bytes(np.array([0, 1, 2, 3, np.inf]), rate, sku)
    assert w.tolist() == pytest.approx([80_000, 40_000, 20_000, 14_480, 14_480])


@pytest.mark.unit
def test_slow_start_from_a_restart_window_by_hand():
    sku = _sku()
    rate, rtt = 4e6, 0.02  # W* = 80 KB
    # from 20 KB: 2 rounds (20 + 40 KB = 60 KB) to reach 80 KB, then the rest at the rate
    x = 1e6
    t = 2 * rtt + (x - 60_000) / rate
    got = tcp.slow_start_s(np.array([x]), rate, sku, np.array([20_000.0]))[0]
    assert got == pytest.approx(t - x / rate)
    # a warm window (W*) costs nothing; a small transfer's rounds are whole RTTs
    assert tcp.slow_start_s(np.array([x]), rate, sku, np.array([80_000.0]))[0] == 0.0
    small = tcp.slow_start_s(np.array([30_000.0]), rate, sku, np.array([20_000.0]))[0]
    assert small == pytest.approx(2 * rtt - 30_000 / rate)  # 20 KB then 10 of 40 KB


@pytest.mark.unit
def test_expected_restart_cost_matches_a_poisson_sender_by_monte_carlo():
    """A sender's transfers as Poisson, its lanes busy a fixed hold: the law's mean penalty
    against drawn idle gaps put through Linux's restart."""
    line = transfer.LineConfig(_sku(slow_start="after_idle"), 1)
    x, lam, hold = np.array([2e6]), 2.0, 0.3
    law = line.expected_idle_slow_start_s(x, lam, hold)[0]
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1 / lam, 200_000) - hold  # idle after the previous one's hold
    busy = gaps <= 0  # M/G/inf with fixed holds: the lanes are idle with chance exp(-lam hold)
    idle = np.where(busy, 0.0, gaps)
    mc = float(np.mean(line.idle_slow_start_s(np.full(idle.size, x[0]), idle)))
    # tolerance: 3%: the Monte Carlo error of 200,000 seeded gaps
    assert law == pytest.approx(mc, rel=0.03)
    assert 0 < law < line.slow_start_s(x)[0]


@pytest.mark.unit
def test_expected_restart_cost_of_a_pool_sender_by_monte_carlo():
    """A sender of a pool of 6 takes every 6th request (the pool gives a request to the
    instance idle longest): Erlang-6 gaps, holds of two sizes; the law's chance of idle lanes
    and mean penalty against a drawn stream put through Linux's restart, the sender's lanes
    busy while any earlier transfer holds them."""
    line = transfer.LineConfig(_sku(slow_start="after_idle"), 1)
    x, lam, c = np.array([2e6]), 0.7, 6
    holds, hw = np.array([0.3, 4.0]), np.array([0.8, 0.2])
    law = line.expected_idle_slow_start_s(x, lam, float(np.dot(hw, holds)), c, holds, hw)[0]
    rng = np.random.default_rng(1)
    n = 200_000
    start = np.cumsum(rng.gamma(c, 1 / (c * lam), n))
    end = start + rng.choice(holds, n, p=hw)
    idle = start[1:] - np.maximum.accumulate(end)[:-1]
    mc = float(np.mean(line.idle_slow_start_s(np.full(n - 1, x[0]), np.maximum(idle, 0.0))))
    # tolerance: 5%: the law's approximation of the pool's Erlang-6 arrivals: it sits 2.4-3.5% under
    # the drawn stream over seeds 1-6 (the drawn mean's standard error is 0.2% at 200,000 requests)
    assert law == pytest.approx(mc, rel=0.05)
    # Poisson gaps of the same rate overlap more: fewer restarts
    assert line.expected_idle_slow_start_s(x, lam, float(np.dot(hw, holds)))[0] < 0.9 * law


@pytest.mark.unit
def test_the_senders_copy_and_setup_come_before_the_line():
    sku = _sku(sender_copy_ms=24.5, setup_ms=5, sender_copy_gbps=8)
    line = transfer.LineConfig(sku, 1)
    x = np.array([1e8])
    assert line.pre_line_s(x)[0] == pytest.approx(0.0295 + 1e8 / 1e9)
    bare = transfer.bare_transfer_s(x, line)[0]
    assert bare == pytest.approx(0.0295 + 0.1 + 1e8 / line.flow_cap_bytes_s + 0.02)


@pytest.mark.unit
def test_the_replay_restarts_a_senders_lanes_after_its_idle_gap():
    """Two senders; the second transfer of sender 0 starts 0.5 s after its first ended (idle
    past one RTO: one halving... two: 0.5 / 0.22 -> 2), sender 1's second overlaps its first
    (warm); every first transfer is cold."""
    line = transfer.LineConfig(_sku(slow_start="after_idle", loss_rate=1e-5), 1)
    b = np.full(4, 3e6)
    start = np.array([0.0, 1.5, 0.0, 0.5])
    end = np.array([1.0, 2.5, 1.0, 1.5])
    server = np.array([0, 0, 1, 1])
    got = _ramp(line, b, start, end, server, LineStats())
    want = line.idle_slow_start_s(b, np.array([np.inf, 0.5, np.inf, 0.0]))
    assert got == pytest.approx(want)
    assert got[3] == 0.0 and got[0] > got[1] > 0.0
    # each sender's idle runs from its own last transfer, not the previous sender's: sender 1
    # idles 1 s (restarts) though sender 0's last transfer ends after its second starts
    start, end = np.array([0.0, 5.0, 0.0, 2.0]), np.array([1.0, 6.0, 1.0, 3.0])
    got = _ramp(line, b, start, end, server, LineStats())
    assert got == pytest.approx(line.idle_slow_start_s(b, np.array([np.inf, 4.0, np.inf, 1.0])))
    assert got[3] > 0.0


@pytest.mark.unit
def test_spread_keeps_the_mean_and_widens_the_quantiles():
    pts, w, src = spread_points(np.array([1.0, 2.0]), np.array([0.5, 0.5]), np.array([0.2, 0.0]))
    assert src.tolist() == [0, 0, 0, 0, 1] and float(np.dot(w, pts)) == pytest.approx(1.5)
    # one entry, no delay: its median stays, its P90 moves toward the top of its spread
    one = transfer_quantiles(
        np.ones(1), np.zeros(1), np.zeros(1), np.zeros(1), np.ones(1), (0.5, 0.9), np.array([0.2])
    )
    assert one[0] == pytest.approx(1.0, abs=0.1) and one[1] > 1.2


@pytest.mark.unit
def test_a_rare_long_delay_does_not_blow_the_quantile_bracket():
    """A 0.1% chance of a delay of mean 1e18 s (a flow-capped line at low load reads such
    two-moment fits): the P50 is the bare time, not ~1e20 s (60 halvings of 60 x scale)."""
    q = transfer_quantiles(
        np.array([0.5]), np.array([1e15]), np.array([1e36]), np.array([0.999]), np.ones(1), (0.5,)
    )
    assert q[0] == pytest.approx(0.5, rel=1e-6)


@pytest.mark.unit
@pytest.mark.parametrize("rho", [0.5, 0.91, 0.95])
def test_a_pool_bound_line_has_the_waits_own_delay_shape(rho):
    """Every transfer at its cap (64 in flight x 4 connections x 0.0275 Gb/s = 7.0 Gb/s of a
    10 Gb/s line): no PS share, so the delay beyond the bare transfer is the pool wait alone:
    no delay with chance 1 - P(wait), else exponential, squared CV 2 / P(wait) - 1 (by hand:
    E[W^2] = 2 (m / p)^2 p). The per-byte figure lands an ulp above 1 / cap; taking that as a
    share read a squared CV of ~1e15, every class's delay an atom at zero (the law's KV P50
    jumping with the rate on the default's 96%-busy line)."""
    from pdd_plan.latency.line import limited_ps

    sku = _sku(connections=256, streams_per_transfer=4, per_connection_gbps=0.0275, loss_rate=0)
    line = transfer.LineConfig(sku, 1)
    assert line.pool * line.flow_cap_bytes_s < line.capacity_bytes_s
    x = np.array([20e6, 80e6, 300e6])
    w = np.array([0.5, 0.3, 0.2])
    q = limited_ps.limited_ps(x, line, rho, w)
    cv2, atom = limited_ps.delay_shape(x, line, rho, w, q)
    assert 0 < q.p_wait < 1
    np.testing.assert_allclose(cv2, 2.0 / q.p_wait - 1.0, rtol=1e-12)
    np.testing.assert_allclose(atom, 1.0 - q.p_wait, rtol=1e-6)


@pytest.mark.unit
def test_a_spread_entry_with_no_delay_is_its_uniform():
    """All of an entry's mass at no delay (the atom) and its bare time spread by sd 0.1 s: its
    quantiles are the uniform's on 1 +- sqrt(3) 0.1, a - h + 2 h q by hand (no step)."""
    h = math.sqrt(3.0) * 0.1
    got = transfer_quantiles(
        np.ones(1),
        np.zeros(1),
        np.zeros(1),
        np.ones(1),
        np.ones(1),
        (0.3, 0.5, 0.9),
        np.array([0.1]),
    )
    assert got == pytest.approx([1 - h + 2 * h * q for q in (0.3, 0.5, 0.9)], abs=1e-9)


@pytest.mark.unit
def test_uniform_delay_survival_is_the_window_mean_of_the_survival():
    """(F(u + h) - F(u - h)) / 2h against the survival averaged over 20,001 points of the
    window, for a law with an atom, a shift and an exponential tail."""
    from pdd_plan.latency.line.delay_shape import (
        delay_survival,
        two_moment,
        uniform_delay_survival,
    )

    law = two_moment(np.array([0.2]), np.array([0.05]), np.array([0.6]))
    u = np.linspace(-0.5, 1.5, 41)
    h = 0.3
    grid = np.linspace(-h, h, 20_001)
    want = delay_survival(u[:, None] + grid[None, :], law).mean(axis=1)
    got = uniform_delay_survival(u[:, None], np.array([h]), law)[:, 0]
    np.testing.assert_allclose(got, want, atol=2e-4)
