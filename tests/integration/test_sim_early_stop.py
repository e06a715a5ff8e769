"""Early stopping of verification replays (sim.sequential) on a real plan: a look's leading
requests are the full replay's bit for bit, and a look that settles keeps the full replay's
verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.sim import sequential, setup
from pdd_plan.sim.replay import replay_requests
from pdd_plan.sim.run import verify

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def narrow():
    path = ROOT / "examples" / "narrow-line.yaml"
    ctx = build_context(Scenario.model_validate(yaml.safe_load(path.read_text())), str(path))
    return ctx.replay_setup, optimize(ctx, verify=False).plans["idc_pd"]


def test_a_look_is_the_full_replay_seen_early(narrow) -> None:
    rs, p = narrow
    reqs = setup.requests(rs, 6000, rs.seed, p.goodput_rps)
    full = replay_requests(rs, p, "idc_pd", reqs, rs.seed)
    look = replay_requests(rs, p, "idc_pd", reqs, rs.seed, None, 3000)
    n = sequential.exact_prefix(look.dec.end_s, float(reqs.req.arrival_s[3000]))
    assert 2500 < n < 3000  # a few seconds of decode still running at the look
    for f in ("ttft_s", "tpot_s", "e2e_s", "prefill_start_s", "kv_ready_s"):
        assert np.array_equal(getattr(full, f)[:n], getattr(look, f)[:n], equal_nan=True), f
    # past the exact prefix the look's drain differs from the full replay
    assert not np.array_equal(full.e2e_s[:3000], look.e2e_s)


def test_settled_look_keeps_the_verdict(narrow) -> None:
    rs, p = narrow
    whole = verify(rs, p, "idc_pd", 8000, stop_early=False)
    early = verify(rs, p, "idc_pd", 8000)
    assert whole.early_stop is None and whole.figures["requests"] == 8000
    assert early.early_stop.replayed == 4000
    assert early.early_stop.full_length == 8000
    assert early.figures["requests"] < 4000
    assert early.sla_met == whole.sla_met
    assert {k: c.ok for k, c in early.checks.items()} == {k: c.ok for k, c in whole.checks.items()}
