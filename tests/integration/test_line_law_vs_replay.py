"""The analytic law against the replay on hand-written fleets (tests/law_fleets.py): TTFT and
KV-transfer P50/P90/P99 within 15% over the line's behaviours (slow start after idle, loss that
grows with the line's load, other tenants' share, the sender's copy, per-transfer setup, the
per-transfer rate cap of a shared line, the pristine line), the narrow line fed Poisson and
bursty arrivals, relay decode routed as the router routes, and the prefill pool's G/G/c wait.

Each fleet is evaluated as `pdd-plan evaluate` does and replayed, seeded, at the same rate: the
same fleet, the same line, no optimizer in between (a recalibration moves what the optimizer
buys, not these fleets)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.sim.queues import P_MD
from pdd_plan.workload.classes import build_classes
from tests.law_fleets import DEFAULT_PDD, Case, compare, row, scenario

pytestmark = pytest.mark.slow

P6, P7, P1 = (row("prefill", "h100", "dc-a", n, 16) for n in (6, 7, 1))
MD2, MD1, MD_NL = (
    row("main_decode", "h200", "dc-b", 2, 16),
    row("main_decode", "h200", "dc-b", 1, 32),
    row("main_decode", "h200", "dc-b", 1, 8),
)
RLD = row("relay_decode", "h100", "dc-a", 1, 16)
IDC = row("decode", "h100", "dc-a", 2, 32)
NL = {"line_base": "eth-1g", "example": "narrow-line", "n": 100_000}

# Measured (law vs replay, TTFT then KV P50/P90/P99, %; the classes drawn as a Latin
# hypercube): after_idle_4 -3.9/-1.6/+0.3, -4.7/-1.7/+0.3; after_idle_30 -0.3/-2.6/+0.1,
# -5.0/-1.7/+0.4; congestive +0.7/-2.1/+0.1, -5.2/-2.0/+0.2; every_transfer -0.1/-2.5/+0.1,
# -4.6/-1.7/+0.4; pdd_shared -4.5/-1.5/+0.5, -4.4/-1.4/+0.6; pristine -1.1/+0.2/-1.0,
# -2.7/-2.8/-4.6; narrow -1.0/-5.4/-5.6, -10.8/-5.6/-5.7; narrow_cv2 +1.4/+0.3/-10.7,
# -7.1/+1.3/-10.4 (before the bursts law took a burst member by member: +2.2/+3.9/-7.3,
# -6.8/+5.2/-6.5); narrow_relay -1.7/-3.9/-9.9, -12.9/-5.9/-6.0 (before the law routed as
# the router does: +19.1/+15.1/+68.7, +10.3/+44.4/+24.6); shared_relay -0.2/-0.1/+1.5,
# -0.3/-5.2/+1.0 (before: +7.7/+1.7/+40.5, -3.8/+22.9/+0.7); default_kv -2.6/-1.1/-2.1,
# -3.6/-1.1/-1.4 (before a pool-bound line's delay took the wait's own shape:
# -16.5/-5.0/-2.1, -22.9/-4.3/-1.4, its KV P50 jumping with the rate: limited_ps.delay_shape);
# default_relay -1.7/-2.6/-5.9, -1.3/+1.0/+0.8; microbench +4.8/-1.9/-3.9, -0.6/-4.0/-5.9.
CASES = [
    # slow start after idle: at 4 req/s a prefill instance sends every 1.5 s, so its lanes
    # often idle past their RTO (220 ms) and restart; at 30 req/s they seldom do; shared-10g's
    # per-transfer cap (4 lanes of 0.058 Gb/s) on a 25 Gb/s line
    Case("after_idle_4", "cdc_pd", 4.0, (P6, MD2), {"gbps": 25}),
    Case("after_idle_30", "cdc_pd", 30.0, (P6, MD2), {"gbps": 25}),
    # loss that grows with the line's load (0.4 of it other tenants'), a 5 ms setup
    Case(
        "congestive",
        "cdc_pd",
        24.0,
        (P6, MD2),
        {
            "gbps": 25,
            "loss_rate": 2e-5,
            "congestive_loss_rate": 3e-4,
            "background_load": 0.4,
            "setup_ms": 5,
        },
    ),
    # slow start on every transfer, the sender's copy at 8 Gb/s on top of its fixed 24.5 ms
    Case(
        "every_transfer",
        "cdc_pd",
        30.0,
        (P6, MD2),
        {"gbps": 25, "slow_start": "every_transfer", "sender_copy_gbps": 8, "background_load": 0},
    ),
    # PDD's fleet with no relay pool on the shared line: every request P -> MD
    Case("pdd_shared", "pdd", 20.0, (P6, MD2), {"gbps": 25}),
    Case("pristine", "cdc_pd", 30.0, (P6, MD2), {}, "eth-25g"),
    # the narrow line (one prefill instance, a 1 Gb/s line ~67% busy), Poisson and bursty
    Case("narrow", "pdd", 1.8, (P1, MD_NL), {}, **NL),
    Case("narrow_cv2", "pdd", 1.8, (P1, MD_NL), {}, cv=2.0, **NL),
    # relay decode on the narrow line: an SLA that makes the MILP relay (hit <= 0.9, 14.1% of
    # requests, 2.1% ending on relay decode), the law's percentiles over the router's routing
    Case(
        "narrow_relay",
        "pdd",
        1.8,
        (P1, MD_NL, RLD),
        {},
        sla={"ttft_p90_s": 2.5, "ttft_p99_s": 8, "tpot_ms": 60},
        **NL,
    ),
    # relay decode on a pool-bound shared line (0.11 Gb/s a transfer, 64 in flight: 7 Gb/s of
    # a 25 Gb/s line, 90% used): the MILP relays hit <= 0.8 (12.4%, 1.8% ending on relay)
    Case(
        "shared_relay",
        "pdd",
        16.0,
        (P6, MD2, RLD),
        {"gbps": 25, "per_connection_gbps": 0.0275},
        sla={"ttft_p90_s": 10, "ttft_p99_s": 15, "tpot_ms": 60},
    ),
    # the default workload's KV law on the shared 25 Gb/s line (7 prefill instances ~84% busy)
    Case("default_kv", "pdd", 40.0, (P7, MD1), {}, "shared-25g", n=200_000),
    # the default's PDD fleet with one more prefill instance (83% busy): an SLA that makes the
    # MILP relay hit <= 0.9 (14.1% of requests, 2.1% ending on relay decode) on the 84%-used
    # line, the relay-diverted mix's TTFT (p_md's line wait, the paths' mixture, the handoff)
    Case(
        "default_relay",
        "pdd",
        40.0,
        (P7, MD1, RLD),
        {},
        "shared-25g",
        n=200_000,
        sla={"ttft_p90_s": 3, "ttft_p99_s": 6, "tpot_ms": 60},
    ),
    Case("microbench", "pdd", 40.0, (P7, MD1), {}, "eth-20g", "wan-microbench", n=100_000),
]


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_law_within_15_percent_of_the_replay(tmp_path, c):
    r = compare(tmp_path, c)
    assert len(r.law) == 6
    # tolerance: 15%, the line issue's stated bar for the law against the replay at P50/P90/P99
    assert all(abs(e) <= 0.15 for e in r.errors()), (c.name, r.law, r.sim)


def test_relayed_share_is_the_routers(tmp_path):
    """The law's route shares are the router's: every request at or below the threshold
    relays, the singular ones end on relay decode (the replay's shares to sampling error)."""
    r = compare(tmp_path, next(c for c in CASES if c.name == "narrow_relay"))
    k = r.res.kept()
    assert r.plan.routing.relay_at_or_below_hit_rate == pytest.approx(0.9)
    got = r.res.summary()["route_share"]
    # tolerance: 0.005, sampling error: a share p of 20,000 replayed requests has a standard
    # error sqrt(p (1 - p) / n), 0.0028 at p = 0.2, so 0.005 is about two of them at most
    for path in ("p_md", "p_rld_md", "p_rld"):
        assert getattr(r.plan.route_share, path) == pytest.approx(got[path], abs=0.005), path
    assert (r.res.route[k] != P_MD).mean() == pytest.approx(1 - r.plan.route_share.p_md, abs=5e-3)


# Bursty arrivals with relay decode on the narrow line (the SLA's 10/15 s make the MILP relay
# hit <= 0.8, 12.4% of requests): TTFT +3.6/-2.6/-3.1%, KV -6.7/+9.5/-5.8%. Before the law routed
# as the router does it read TTFT +13.1/+20.2/+52.0%, KV +6.5/+41.6/+22.0%; then, before the
# bursts law took the rest of a burst member by member (PS: each costs min(its size, what the
# transfer has left), each late by its own prefill, so the small come first and the large
# late) and the work found as the size law's residuals, TTFT +3.4/+0.8/+3.5%, KV
# -6.9/+16.0/-1.6%: the mid sizes (30-130 MB), where the relayed mix's P90 falls, read 12-20%
# long in their mean delay, now 3-10% (latency/line/bursts.py).
def test_bursty_relay_on_the_narrow_line(tmp_path):
    sla = {"ttft_p90_s": 10, "ttft_p99_s": 15, "tpot_ms": 60}
    c = Case("narrow_relay_cv2", "pdd", 1.8, (P1, MD_NL, RLD), {}, cv=2.0, sla=sla, **NL)
    e = compare(tmp_path, c).errors()
    assert all(abs(x) <= 0.15 for x in e), e


# The default's PDD fleet itself (tests/law_fleets.py DEFAULT_PDD), which `optimize` verifies
# with 20,000 requests: its analytic TTFT P50/P90/P99 1.64/4.40/7.89 s against that replay's
# 1.33/2.36/5.52. The gap is the replay's window, not the relay mix: prefill is 96.8% busy, so
# its wait relaxes over about as long as 20,000 requests last (500 s), and 20k replays read P90
# 2.36-6.37 s over seeds 0-5; longer ones close in on the law (200k 3.68; 1M 4.22/3.92/3.96/3.75
# over four seeds; 2M 4.19), and the KV transfer, the line's law, is within 5% at every length.
# What is left at 1M-2M, TTFT +5-17% at P90 and +4-21% at P99, is the prefill pool's G/G/c wait
# at 97% busy: IDC-PD on the same six instances (no line, no relay) reads +3/+8% P90 and +16%
# P99 against two 4M replays. The relay-diverted mix on the same line is default_relay above.
# Its routing: at the SLA's 10 s P90 and 15 s P99 the fleet meets it with no relay (analytic
# TTFT P90/P99 6.68/14.62 s), so the routing is pinned at a P99 of 14 s, the loosest that
# breaks it by about half a second: the MILP then relays at hit <= 0.4 (7.0% of requests,
# 1.0% ending on relay decode; TTFT P90/P99 4.11/8.40 s).
def test_default_pdd_fleet_line_law_and_routing(tmp_path):
    sla = {"ttft_p90_s": 10, "ttft_p99_s": 14, "tpot_ms": 60}
    c = Case("default_pdd", "pdd", 40.0, DEFAULT_PDD, {}, "shared-25g", sla=sla)
    r = compare(tmp_path, c)
    # tolerance: 15%, the line issue's bar (KV P50/P90/P99 only: a 20k replay of a pool 96%
    # busy leaves TTFT unsettled, the comment above)
    assert all(abs(e) <= 0.15 for e in r.errors()[3:]), r.errors()
    # the law's routing, and the replay routes the same (to sampling error)
    assert r.plan.routing.relay_at_or_below_hit_rate == pytest.approx(0.4)
    got = r.res.summary()["route_share"]
    # tolerance: 5e-4 pins the law's shares as measured (3-4 digits); 0.005 for the replay's,
    # its sampling error (standard error 0.0018 at p = 0.07 over 20,000 requests)
    for path, share in (("p_md", 0.93), ("p_rld_md", 0.0599), ("p_rld", 0.0101)):
        assert getattr(r.plan.route_share, path) == pytest.approx(share, abs=5e-4), path
        assert got[path] == pytest.approx(share, abs=0.005), path


# The G/G/c prefill wait end to end: IDC-PD (RDMA, no line) on 7 prefill instances ~84% busy,
# decode held off its cap (0.9) so prefill is the only queue. At cv 2 (gamma gaps of shape 1/4)
# 200,000 requests are not enough: that window's P99 reads 1.77 s where a million give 2.23.
# Measured: cv 1 +2.5/-1.0/-2.3%, cv 2 -1.8/-2.8/-5.2%.
@pytest.mark.parametrize("cv, n", [(1.0, 200_000), (2.0, 1_000_000)])
def test_prefill_wait_law_within_15_percent(tmp_path, cv, n):
    c = Case(f"idc_cv{cv}", "idc_pd", 40.0, (P7, IDC), None, cv=cv, n=n)
    r = compare(tmp_path, c, decode_cap=0.9)
    # tolerance: 15%, the line issue's bar, here on the prefill wait alone
    assert all(abs(e) <= 0.15 for e in r.errors()), (r.law, r.sim)


def test_first_token_is_one_step_at_the_operating_batch(tmp_path):
    """The microbenchmark's first token: one decode step at the operating batch, the step
    TPOT reports (Little's law's B = x step(B))."""
    r = compare(tmp_path, next(c for c in CASES if c.name == "microbench"))
    res, k = r.res, r.res.kept()
    first = (res.dec.first_s - res.kv_at_decode_s)[k][res.route[k] == P_MD]
    # tolerance: 1%: measured -0.07% (96,435 first tokens, the mean's standard error 0.004%);
    # what is left is the batch's wander about its operating point, which Little's law holds
    # only on average
    assert float(np.mean(first)) == pytest.approx(r.plan.tpot_ms.p50 / 1e3, rel=0.01)


def test_slow_start_after_idle_costs_what_the_replay_says(tmp_path):
    """At 4 req/s the restarts after idle add to the transfers, in the law and the replay: the
    law 18.0 ms of mean transfer time, the replay 17.1 ms (of 1.5 s). A pool gives each
    request to the instance idle longest, so a sender takes every 6th request (gaps Erlang-6,
    squared CV 0.20 in the replay) and finds its lanes idle 47% of the time; taken as Poisson
    they read 38% and 13.3 ms. Within 15%."""
    got = {}
    for mode in ("after_idle", "first_use"):
        d = tmp_path / mode  # profiles are read once per path
        d.mkdir()
        c = Case(mode, "cdc_pd", 4.0, (P6, MD2), {"gbps": 25, "slow_start": mode})
        got[mode] = compare(d, c).kv_mean
    law_cost = got["after_idle"][0] - got["first_use"][0]
    sim_cost = got["after_idle"][1] - got["first_use"][1]
    assert sim_cost > 0.01 and abs(law_cost / sim_cost - 1) <= 0.15, (law_cost, sim_cost)


def test_default_kv_law_rises_with_the_rate(tmp_path):
    """On default_kv's pool-bound line (64 transfers in flight at their cap, 96% of it used)
    the law's KV transfer and TTFT P50 rise with the rate; they jumped (0.658, 0.687, 0.550,
    0.690, 0.550 s at 39.6 .. 40.4 req/s) while a rounding-sized PS share gave every class's
    delay a squared CV of ~1e15, all of it an atom at zero."""
    c = next(c for c in CASES if c.name == "default_kv")
    path = scenario(tmp_path, c)
    ctx, fleets = fleet.from_scenario(build_context(load_scenario(path), path))
    fm = analytic.fleet_model(
        problem_of(ctx), fleets[c.arch], build_classes(ctx.class_spec), Caps(decode=1.0)
    )
    plans = [analytic.at_rate(fm, r).plan for r in (39.6, 39.8, 40.0, 40.2, 40.4)]
    kv = [p.kv_transfer_s.p50 for p in plans]
    ttft = [p.ttft_s.p50 for p in plans]
    assert all(b > a for a, b in zip(kv, kv[1:])), kv
    assert all(b > a for a, b in zip(ttft, ttft[1:])), ttft
