"""sim.tails on a real plan: the prefill stage replayed alone is a full replay's prefill, bit for
bit; a verification with a long stage states composed TTFT figures, deterministically, each
inside its interval, with the checks on them; 0 leaves the replay's own figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.sim import setup, tails
from pdd_plan.sim.replay import replay_requests
from pdd_plan.sim.run import verify

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def busy():
    """The default's IDC-PD plan: its prefill pool ~96% busy."""
    path = ROOT / "examples" / "pdd-paper.yaml"
    ctx = build_context(Scenario.model_validate(yaml.safe_load(path.read_text())), str(path))
    return ctx.replay_setup, optimize(ctx, verify=False).plans["idc_pd"]


def test_stage_is_the_full_replays_prefill(busy) -> None:
    rs, p = busy
    n = 6000
    full = replay_requests(rs, p, "idc_pd", setup.requests(rs, n, rs.seed, p.goodput_rps))
    fl = setup.fleet(rs.profiles, rs.file, p, "idc_pd")
    tails._CACHE.clear()
    st = tails.stage_waits(rs, fl, p.goodput_rps, n, rs.seed)
    waits = full.prefill_start_s - full.arrival_s
    assert st.requests == n
    assert np.array_equal(st.waits, waits[st.warmup :])


def test_verify_composes_a_long_stage(busy) -> None:
    rs, p = busy
    plain = verify(rs, p, "idc_pd", 4000, stop_early=False)
    v = verify(rs, p, "idc_pd", 4000, stop_early=False, stage_requests=40_000)
    again = verify(rs, p, "idc_pd", 4000, stop_early=False, stage_requests=40_000)
    f = v.figures
    assert "tails" not in plain.figures
    assert f["tails"]["prefill_stage_requests"] == 40_000  # 96% busy: the most asked for
    assert f["ttft_s"] == again.figures["ttft_s"] and f["ttft_s_ci"] == again.figures["ttft_s_ci"]
    assert f["ttft_s"] != plain.figures["ttft_s"]
    for k in ("p50", "p90", "p99"):
        lo, hi = f["ttft_s_ci"][k]
        assert lo <= f["ttft_s"][k] <= hi
    assert f["ttft_s"]["p50"] <= f["ttft_s"]["p90"] <= f["ttft_s"]["p99"]
    assert v.checks["ttft_p99"].simulated == f["ttft_s"]["p99"]
    # the rest of each first token is the replay's: the TPOT figures are untouched
    assert f["tpot_ms"] == plain.figures["tpot_ms"]


def test_deferred_tails_are_the_synchronous_plan(monkeypatch) -> None:
    """`optimize` runs its rounds on the plain replays' verdicts and settles the composed ones
    after the draws (optimize.tails); forced to plan on the composed verdicts throughout
    instead, it prints the same plan, byte for byte."""
    from typer.testing import CliRunner

    from pdd_plan.cli import app
    from pdd_plan.optimize import tails as pending

    args = ["optimize", "-f", "json", "--draws", "0", "--sim-requests", "4000"]
    args += ["--tail-requests", "100000"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    settle = pending.Pending.settle
    monkeypatch.setattr(pending.Pending, "settle", lambda self, plan: settle(self, plan) and None)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert again.stdout == first.stdout
    assert '"tails"' in first.stdout


def test_recomposed_is_the_composed_verify(busy) -> None:
    """A composed verdict from the plain replay of the same call (what optimize's replay
    child does) is the composed verify's, figure for figure."""
    from pdd_plan.sim.run import recomposed, verify_replay

    rs, p = busy
    plain = verify_replay(rs, p, "idc_pd", 4000)
    got = recomposed(rs, p, "idc_pd", plain, 4000, None, 40_000)
    assert got.as_dict() == verify(rs, p, "idc_pd", 4000, stage_requests=40_000).as_dict()
    assert got.figures["tails"]["prefill_stage_requests"] == 40_000


def test_a_stage_drawn_ahead_of_its_rate_is_the_same_stage(busy) -> None:
    # the replay child draws the stage's requests before the plan's rate is known
    # (tails.draw_ahead): the stage it then replays must be the one drawn when asked
    rs, p = busy
    n, rate = 12_000, p.goodput_rps
    fl = setup.fleet(rs.profiles, rs.file, p, "idc_pd")
    setup._AHEAD.clear()
    tails._CACHE.clear()
    asked = tails.stage_waits(rs, fl, rate, n, rs.seed)
    tails._CACHE.clear()
    tails.draw_ahead(rs, 4000, rs.seed, n)
    assert len(setup._AHEAD) == 1
    drawn = next(iter(setup._AHEAD.values()))
    tails.draw_ahead(rs, 4000, rs.seed, n)  # asked again (a plan made again): kept, not redrawn
    assert next(iter(setup._AHEAD.values())) is drawn
    ahead = tails.stage_waits(rs, fl, rate, n, rs.seed)
    assert (ahead.requests, ahead.warmup) == (asked.requests, asked.warmup)
    assert np.array_equal(ahead.waits, asked.waits)
    # another rate scales the same draw: the requests drawn at that rate when asked, bit for bit
    for r in (0.5 * rate, 1.7 * rate):
        got = setup.requests(rs, n, rs.seed, r).req
        setup._AHEAD.clear()
        fresh = setup.requests(rs, n, rs.seed, r).req
        tails.draw_ahead(rs, 4000, rs.seed, n)
        for f in ("arrival_s", "input_tokens", "output_tokens", "hit_p", "hit_d"):
            assert np.array_equal(getattr(got, f), getattr(fresh, f)), f
    # read-only: a replay that wrote into its requests would change every later one
    with pytest.raises(ValueError):
        setup.requests(rs, n, rs.seed, rate).req.input_tokens[0] = 1
    # another length or seed is drawn when asked (the draw ahead is a guess)
    other = setup.requests(rs, n - 1, rs.seed, rate).req
    setup._AHEAD.clear()
    assert np.array_equal(other.arrival_s, setup.requests(rs, n - 1, rs.seed, rate).req.arrival_s)


def test_nothing_is_drawn_ahead_without_a_stage_longer_than_the_replay(busy) -> None:
    rs, _ = busy
    setup._AHEAD.clear()
    tails.draw_ahead(rs, 4000, rs.seed, 4000)  # a stage no longer than the replay: none
    assert not setup._AHEAD
    tails.draw_ahead(rs, 4000, rs.seed, 10 * tails.MAX_STAGE)  # at most MAX_STAGE
    [(_, n, _)] = setup._AHEAD
    assert n == tails.MAX_STAGE
    setup._AHEAD.clear()
