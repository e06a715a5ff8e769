"""Replays drop the decode fill-up, and an unstable line keeps the window from empty (the
warm-up rule: tests/unit/sim/test_sim_warmup.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.outputs.plan import LineChoice
from pdd_plan.sim.result import sig
from pdd_plan.sim.run import run, verify
from tests.unit.sim import test_sim_warmup
from tests.unit.sim.test_sim_warmup import PLAN  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration
default = test_sim_warmup.default  # the unit tests' fixture


@pytest.mark.integration
def test_replay_drops_the_decode_fill_up(default) -> None:
    """The default plan replayed from empty: decode batches fill over about one request's
    decode time, so the cut lies near it, and the kept requests' TPOT (mean, P10) matches a
    long replay's better than the whole window's. Statistics are over the kept requests."""
    ctx, plan = default
    res = run(ctx, plan, "pdd", 20_000, 0)
    cut = res.warmup_requests
    assert res.warmup.settled and cut > 0
    decode_s = float(np.mean(res.dec.end_s - res.dec.first_s))  # one request's decode time
    cut_s = float(res.arrival_s[cut] - res.arrival_s[0])
    # (0.46x with perf v3's plan: its decode batches, small under the TPOT limit, fill sooner)
    assert 0.4 * decode_s < cut_s < 4.0 * decode_s
    long = run(ctx, plan, "pdd", 100_000, 1)
    ref = long.tpot_s[long.warmup_requests :]
    tp = res.tpot_s

    def err(x: np.ndarray) -> np.ndarray:
        got = [np.nanmean(x), np.nanpercentile(x, 10)]
        return np.abs(np.array(got) / [np.nanmean(ref), np.nanpercentile(ref, 10)] - 1)

    assert (err(tp[cut:]) < 0.6 * err(tp)).all()
    s = res.summary()
    assert s["warmup"] == {
        "method": "MSER-5",
        "requests": cut,
        "kept_requests": 20_000 - cut,
        "settled": True,
        "note": None,
    }
    assert s["requests"] == 20_000
    assert s["ttft_s"]["p99"] == sig(np.percentile(res.ttft_s[cut:], 99))
    df = res.records()
    assert df["warmup"].sum() == cut and df["warmup"].iloc[:cut].all()
    assert s["sla_attainment"] == sig(df["sla_ok"][~df["warmup"]].mean())
    again = run(ctx, plan, "pdd", 20_000, 0).summary()
    assert again == s  # deterministic


@pytest.mark.integration
def test_unstable_line_keeps_the_window_from_empty(default) -> None:
    ctx, plan = default
    z = {"cost_per_hour": 0.0, "utilization": 0.0, "rtt_ms": 0.0}
    one = LineChoice(sku="shared-10g", gbps=10.0, count=1, **z)
    slow = plan.plans["cdc_pd"].model_copy(update={"line": one})
    res = run(ctx, slow, "cdc_pd", 3000, 0)
    assert res.unstable
    w = res.summary()["warmup"]
    assert w["method"] == "none" and w["requests"] == 0 and w["kept_requests"] == 3000
    assert "unstable" in w["note"]
    v = verify(ctx.replay_setup, slow, "cdc_pd", 3000, 0)
    assert v.figures["warmup"]["requests"] == 0 and not v.sla_met
