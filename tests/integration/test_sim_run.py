"""The simulator end to end: every architecture on the same machinery, the relay and its two
handoff modes, the DRC on a hashed trace, verify(), and invariants of the per-request records."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.outputs.plan import ArchitecturePlan, LineChoice
from pdd_plan.sim.queues import P_MD, P_RLD, P_RLD_MD
from pdd_plan.sim.run import run, verify

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pdd-paper.yaml"
MOONCAKE = ROOT / "traces" / "mooncake_conversation_trace.jsonl"


def _ctx(**changes):
    d = yaml.safe_load(EXAMPLE.read_text())
    # the hand-made fleets below cross the pristine eth-10g (their figures are about its queue)
    d["link"]["candidates"] = ["eth-10g", "eth-25g", "eth-40g", "eth-100g"]
    for k, v in changes.items():
        d[k] = v if not isinstance(v, dict) else {**d.get(k, {}), **v}
    return build_context(Scenario.model_validate(d), str(EXAMPLE))


def _row(role, gpu, dc, count, n, dp):
    return {
        "role": role,
        "gpu": gpu,
        "datacenter": dc,
        "count": count,
        "gpus_per_instance": n,
        "tp": n,
        "dp": dp,
        "ep": n,
    }


def _line(sku: str, count: int) -> dict:
    z = {"cost_per_hour": 0.0, "utilization": 0.0, "rtt_ms": 0.0}
    return {"sku": sku, "gbps": 10.0, "count": count, **z}


def _arch_plan(
    instances: list[dict], line: dict | None, rate: float, routing: dict | None = None
) -> ArchitecturePlan:
    """A typed per-architecture plan around a hand-made fleet (predictions zeroed)."""
    zero = {"p50": 0.0, "p90": 0.0}
    return ArchitecturePlan.model_validate(
        {
            "instances": [{**i, "cost_per_hour": 0.0} for i in instances],
            "line": line,
            "cost_per_hour": 0.0,
            "goodput_rps": rate,
            "bcr": 0.0,
            "ttft_s": {**zero, "p99": 0.0},
            "tpot_ms": zero,
            "route_share": {"p_md": 1.0, "p_rld_md": 0.0, "p_rld": 0.0},
            "rld_token_share": 0.0,
            "routing": routing or {},
            "prefill_utilization": 0.0,
            "kv_transfer_s": {"mean": 0.0},
            "binding_constraints": [],
            "shadow_prices": {},
            "solver": {"status": "hand-made", "milps": 0, "optimality_gap": 0.0},
        }
    )


def _relay_plan(line_count: int = 2) -> ArchitecturePlan:
    """A PDD fleet with a relay pool (the optimizer may not buy one for the default scenario)."""
    rows = [
        _row("prefill", "h100", "dc-a", 6, 16, 8),
        _row("relay_decode", "h100", "dc-a", 1, 16, 8),
        _row("main_decode", "h200", "dc-b", 1, 16, 16),
    ]
    return _arch_plan(rows, _line("eth-10g", line_count), 40.0, RELAY_ROUTING)


# relay the two lowest hit-rate bins; outputs up to 500 tokens finish on relay decode
RELAY_ROUTING = {"relay_at_or_below_hit_rate": 0.4, "singular_max_output_tokens": 500}


@pytest.fixture(scope="module")
def default():
    ctx = _ctx()
    return ctx, optimize(ctx)


@pytest.mark.parametrize("arch", ["pdd", "cdc_pd", "idc_pd"])
def test_every_architecture_runs(default, arch: str) -> None:
    ctx, plan = default
    res = run(ctx, plan, arch, 4000, 1)
    s = res.summary()
    assert s["requests"] == 4000
    assert not np.isnan(res.dec.end_s).any() and not np.isnan(res.dec.first_s).any()
    assert (res.ttft_s > 0).all() and (res.e2e_s >= res.ttft_s).all()
    assert (res.prefill_start_s >= res.arrival_s - 1e-12).all()
    for key in ("ttft_s", "tpot_ms", "kv_transfer_s", "e2e_s"):
        q = s[key]
        assert q["p50"] <= q["p90"] <= q["p99"]
    assert sum(s["route_share"].values()) == pytest.approx(1.0)
    assert 0 < s["goodput_rps"] <= s["offered_rps"] + 1e-9
    # TPOT never beats the single-request decode step, and stays near the TPOT target
    assert s["tpot_ms"]["p50"] <= ctx.scenario.sla.tpot_ms * 1.05
    if arch == "idc_pd":
        assert s["line_utilization"] is None and s["connection_pool"] is None
        assert s["kv_transfer_s"]["p99"] < 0.1  # RDMA: milliseconds
    else:
        assert 0 < s["line_utilization"] < 1
        assert s["route_share"]["p_md"] == 1.0 or arch == "pdd"


@pytest.mark.parametrize("mode", ["catch_up", "one_shot"])
def test_relay_paths(mode: str) -> None:
    """The plan's routing relays the low-hit requests; singular ones end on RLD."""
    ctx = _ctx(sla={"ttft_p90_s": 0.6, "ttft_p99_s": 3.0, "tpot_ms": 60}, policy={"handoff": mode})
    res = run(ctx, _relay_plan(), "pdd", 20_000, 0)
    s = res.summary()
    r, out, k = res.route, res.output_tokens, res.dec.rld_tokens
    share = s["route_share"]
    assert share["p_rld_md"] > 0.02 and share["p_rld"] > 0.002
    # exactly the requests at or below the plan's hit threshold relay (no load-driven choice)
    low = res.hit_p <= RELAY_ROUTING["relay_at_or_below_hit_rate"]
    assert ((r != P_MD) == low).all()
    assert ((r == P_RLD) == (low & (out <= 500))).all()
    cap = ctx.scenario.policy.relay_max_tokens
    assert (k[r == P_MD] == 0).all()
    assert (k[r == P_RLD] == out[r == P_RLD]).all()
    assert (out[r == P_RLD] <= ctx.scenario.policy.singular_max_output_tokens).all()
    assert (k[r == P_RLD_MD] <= np.minimum(cap, out[r == P_RLD_MD])).all()
    assert (k[r == P_RLD_MD] > 0).mean() > 0.5  # RLD really decodes while the KV crawls
    # p_rld sends nothing; relayed requests see their first token before their KV lands on MD
    assert (res.line_bytes[r == P_RLD] == 0).all() and np.isnan(res.hit_d[r == P_RLD]).all()
    relayed = (r == P_RLD_MD) & (k > 0)
    # (to 1 ms: after perf v2 one relayed request in ~3,700 sees its first token 0.3 ms after
    # its KV lands, a near-tie between the relay's first step and the transfer)
    assert (res.dec.first_s[relayed] <= res.kv_at_decode_s[relayed] + 1e-3).all()
    kept = res.kept()  # the summary is over the requests past the replay's warm-up
    assert s["rld_token_share"] == pytest.approx(k[kept].sum() / out[kept].sum(), rel=1e-5)
    assert not np.isnan(res.dec.end_s).any()
    # relaying cuts the TTFT tail of the same fleet, all routed direct (CDC-PD)
    direct = run(ctx, _relay_plan(), "cdc_pd", 20_000, 0).summary()
    assert s["ttft_s"]["p99"] < direct["ttft_s"]["p99"]


def test_one_shot_stalls_more_than_catch_up() -> None:
    sla = {"ttft_p90_s": 0.6, "ttft_p99_s": 3.0, "tpot_ms": 60}
    res = {}
    for mode in ("catch_up", "one_shot"):
        ctx = _ctx(sla=sla, policy={"handoff": mode})
        res[mode] = run(ctx, _relay_plan(), "pdd", 20_000, 0)
    relayed = res["one_shot"].route == P_RLD_MD
    assert (res["catch_up"].route == res["one_shot"].route).all()  # routing precedes decode
    tp = {m: float(np.nanmean(res[m].tpot_s[relayed])) for m in res}
    assert tp["one_shot"] >= tp["catch_up"]


def test_hashed_trace_drc_evolves_with_routing() -> None:
    d = yaml.safe_load((ROOT / "examples" / "mooncake-conversation.yaml").read_text())
    d["workload"]["trace"] = str(MOONCAKE)
    ctx = build_context(Scenario.model_validate(d), str(ROOT / "examples" / "x.yaml"))
    rows = [
        _row("prefill", "h100", "dc-a", 1, 16, 8),
        _row("relay_decode", "h100", "dc-a", 1, 16, 8),
        _row("main_decode", "h200", "dc-b", 1, 16, 16),
    ]
    plan = _arch_plan(rows, _line("eth-10g", 1), 3.4)
    res = run(ctx, plan, "cdc_pd", 3000, 0)
    s = res.summary()
    assert s["requests"] == 3000 and s["workload"].endswith("mooncake_conversation_trace.jsonl")
    assert 0 < s["hit_rate"]["decode_mean"] <= s["hit_rate"]["prefill_mean"] + 1e-9
    # the DRC sizes what crosses the line: only the tokens MD does not hold
    from pdd_plan.latency.line.transfer import line_bytes

    want = line_bytes(ctx.model, res.input_tokens, res.hit_d, True)
    np.testing.assert_allclose(res.line_bytes, want, rtol=1e-9)
    # a tight budget makes the backlog router send requests to RLD; those that end there never
    # populate the DRC
    sla = {"ttft_p90_s": 0.05, "ttft_p99_s": 1, "tpot_ms": 60}
    pol = {**d.get("policy", {}), "router": "backlog"}
    ctx2 = build_context(
        Scenario.model_validate({**d, "sla": sla, "policy": pol}),
        str(ROOT / "examples" / "x.yaml"),
    )
    res2 = run(ctx2, plan, "pdd", 3000, 0)
    assert (res2.route == P_RLD).any()
    assert np.isnan(res2.hit_d[res2.route == P_RLD]).all()
    assert not np.isnan(res2.hit_d[res2.route != P_RLD]).any()


def test_verify_reports_checks_and_bottleneck(default) -> None:
    ctx, plan = default
    v = verify(ctx.replay_setup, plan.plans["pdd"], "pdd", 3000, 0)
    assert set(v.checks) == {"ttft_p90", "ttft_p99", "tpot_p90"}
    assert v.sla_met == all(c.ok for c in v.checks.values())
    assert v.bottleneck is None if v.sla_met else v.bottleneck in ("prefill", "line", "decode")
    assert set(v.tail_breakdown_s) == {"prefill_wait", "prefill", "kv_transfer", "decode_wait"}
    # each check against its SLA field, by hand from the replay's own percentiles
    assert v.checks["ttft_p90"].simulated == v.figures["ttft_s"]["p90"]
    assert v.checks["ttft_p90"].target == ctx.scenario.sla.ttft_p90_s
    assert v.checks["tpot_p90"].ok == (v.figures["tpot_ms"]["p90"] <= ctx.scenario.sla.tpot_ms)
    # an overloaded line fails the SLA and is named
    ctx2 = _ctx(sla={"ttft_p90_s": 2.0, "ttft_p99_s": 3.0, "tpot_ms": 60})
    slow = plan.plans["cdc_pd"].model_copy(update={"line": LineChoice(**_line("eth-10g", 1))})
    v2 = verify(ctx2.replay_setup, slow, "cdc_pd", 3000, 0)
    assert not v2.sla_met and v2.bottleneck == "line"
    assert v2.figures["line_utilization"] > 0.9


def test_records_frame(default) -> None:
    ctx, plan = default
    res = run(ctx, plan, "pdd", 500, 0)
    df = res.records()
    assert len(df) == 500
    assert set(df["path"]) <= {"p_md", "p_rld_md", "p_rld"}
    np.testing.assert_allclose(df["ttft_s"], res.ttft_s)
    kept = df["sla_ok"][~df["warmup"]]  # the summary is over the requests past the warm-up
    assert math.isclose(kept.mean(), res.summary()["sla_attainment"], rel_tol=1e-5)


def test_backlog_router_is_an_option() -> None:
    """``policy.router: backlog`` ignores the plan's threshold and relays on the line backlog:
    a tight budget relays high-hit requests too; a loose one relays none."""
    tight = {"ttft_p90_s": 0.6, "ttft_p99_s": 3.0, "tpot_ms": 60}
    ctx = _ctx(sla=tight, policy={"router": "backlog"})
    res = run(ctx, _relay_plan(), "pdd", 20_000, 0)
    assert ((res.route != P_MD) & (res.hit_p > 0.4)).any()
    loose = {"ttft_p90_s": 100.0, "ttft_p99_s": 200.0, "tpot_ms": 60}
    res = run(_ctx(sla=loose, policy={"router": "backlog"}), _relay_plan(), "pdd", 4000, 0)
    assert (res.route == P_MD).all()


def test_replay_relays_the_share_the_plan_made() -> None:
    """Issue 13: on the narrow line the optimizer relays the lowest hit-rate classes; the
    verification replay relays the same requests, not what a backlog rule would pick. The
    plan with no relay sits at the P99 limit (law 14.3 s, a 100k replay 14.7 s, the 20k
    verification window 15.9 s > 15 s), so the verification re-solves once with the line's
    delay stretched and relays hit rates in [0, 0.8) (12.4% of requests); that plan's
    percentiles carry the stretch, so the replay's TTFT P90 is at most the plan's, within 20%."""
    path = ROOT / "examples" / "narrow-line.yaml"
    ctx = build_context(Scenario.model_validate(yaml.safe_load(path.read_text())), str(path))
    p = optimize(ctx).plans["pdd"]
    assert p.routing.relay_at_or_below_hit_rate == 0.8  # the bin's upper edge, not its mean
    planned = p.route_share.p_rld_md + p.route_share.p_rld
    # tolerance: the published-rounding of the share (12.4%, the docstring) to half a point
    assert planned == pytest.approx(0.124, abs=0.005)
    sim = p.simulated.route_share
    # tolerance: half a point: the replay's share of 20,000 sampled requests (binomial SE 0.23
    # points at 12.4%), over 2 SE
    assert sim.p_rld_md + sim.p_rld == pytest.approx(planned, abs=0.005)
    assert p.simulated.sla_met
    assert 0.8 * p.ttft_s.p90 <= p.simulated.ttft_s.p90 <= p.ttft_s.p90
