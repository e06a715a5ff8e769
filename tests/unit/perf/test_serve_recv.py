"""SGLang's --scheduler-recv-interval in the serve phase and the replay: the scheduler polls
for new requests once per R decode steps (at once after a pass with prompt tokens or while
idle: managers/scheduler_recv_skipper.py), so the requests sent between two polls share one
prefill batch and wait for the poll."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.common.errors import InputError
from pdd_plan.perf import engine_limits, serve_steady
from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.perf.serve_step import StepCost
from pdd_plan.sim.serve_replay import replay
from tests.unit.sim.test_serve_replay import _inst

pytestmark = pytest.mark.unit


class _Recorder(StepCost):
    """The replay's step times, with the prompt sequences of every prefill pass recorded."""

    def __init__(self, inst, eng) -> None:
        super().__init__(inst, eng)
        self.passes: list[float] = []

    def time(self, decode=0.0, context=0.0, seqs=0.0, new=0.0, cached=0.0) -> float:
        if seqs > 0:
            self.passes.append(seqs)
        return super().time(decode, context, seqs, new, cached)


def _run(r: int, c: int = 6, n: int = 48):
    inst = _inst("dense")
    eng = serve_engine("sglang", inst.gpu.memory.hbm_gb).with_limits(recv_interval=r)
    cost = _Recorder(inst, eng)
    # prompts of 64 tokens (one pass holds every prompt sent), outputs spread so completions
    # fall on different decode steps
    isl, osl = sl.fixed(64), sl.histogram([17, 29, 41, 53], [1, 1, 1, 1])
    rep = replay(inst, eng, isl, osl, num_prompts=n, concurrency=c, seed=5, cost=cost)
    return rep, cost.passes


def test_arrivals_between_polls_share_one_prefill_pass():
    """Every prompt is prefilled in exactly one pass (64-token prompts, a budget of thousands);
    at R = 10 the requests sent over ten decode steps come in one pass: fewer passes than at
    R = 1, where each completion step's request is prefilled at once, and about one pass per
    interval's worth of decode steps."""
    rep1, p1 = _run(1)
    rep10, p10 = _run(10)
    assert sum(p1) == pytest.approx(48) and sum(p10) == pytest.approx(48)
    assert len(p10) < len(p1)
    decode_steps = rep10.steps - len(p10)
    assert len(p10) <= 1 + math.ceil(decode_steps / 10) + 1  # + the last, idle poll
    assert max(p10) > 1  # a burst of arrivals in one interval: one pass for several


def test_polling_trades_ttft_for_fewer_stalls():
    """The wait for the poll raises TTFT; fewer prefill passes stall the decodes less often."""
    rep1, _ = _run(1)
    rep10, _ = _run(10)
    assert np.mean(rep10.ttft_s) > np.mean(rep1.ttft_s)
    assert np.mean(rep10.tpot_s) <= np.mean(rep1.tpot_s) * (1 + 1e-9)


def test_interval_one_is_the_plain_scheduler():
    """R = 1 polls at every step: the replay is the one without the poll, step for step."""
    rep, _ = _run(1)
    inst = _inst("dense")
    eng = serve_engine("sglang", inst.gpu.memory.hbm_gb)
    isl, osl = sl.fixed(64), sl.histogram([17, 29, 41, 53], [1, 1, 1, 1])
    ref = replay(inst, eng, isl, osl, num_prompts=48, concurrency=6, seed=5)
    assert rep.steps == ref.steps and rep.duration_s == pytest.approx(ref.duration_s)


class _Linear:
    """Hand-checkable step times: a decode step t_d, a prefill pass alpha + beta x tokens."""

    t_d, alpha, beta = 0.010, 0.020, 1e-5

    def decode(self, b, ctx):
        return self.t_d

    def prefill_tokens(self, tokens, prompt, cached=0.0):
        return self.alpha + self.beta * tokens if tokens > 0 else 0.0


def test_steady_state_prefill_batch_against_hand_arithmetic():
    """separate(): a = B / E[O - 1] requests sent per decode step, aR between two polls, a
    prefill batch q = E[I] aR / (1 - e^-aR) tokens (under the chunk), d / q batches per decode
    step with d = B E[I] / E[O - 1]; TTFT carries half the longest poll wait (R - 1) t_d."""
    eng = serve_engine("sglang", 80).with_limits(recv_interval=30)
    isl, osl = sl.fixed(100), sl.fixed(201)
    b, others = 8.0, 7.0 / 8.0
    s = serve_steady.separate(_Linear(), eng, isl, osl, b, others)
    a = b / 200.0
    q = 100.0 * (a * 30) / (1 - math.exp(-a * 30))
    assert s.prompt_tokens == pytest.approx(q)
    assert s.prompt_share == pytest.approx(b * 100.0 / 200.0 / q)
    t_p = _Linear.alpha + _Linear.beta * q
    assert s.tpot_s == pytest.approx(_Linear.t_d + others * (b * 100.0 / 200.0 / q) * t_p)
    assert s.poll_s == pytest.approx(29 * _Linear.t_d)
    one = serve_steady.separate(_Linear(), serve_engine("sglang", 80), isl, osl, b, others)
    assert one.poll_s == 0.0
    assert s.tpot_s < one.tpot_s  # fewer, larger batches: the fixed part paid less often


def test_an_idle_engine_polls_at_once():
    """Concurrency 1 (no request decoding besides the one sent): no wait for the poll."""
    eng = serve_engine("sglang", 80).with_limits(recv_interval=30)
    s = serve_steady.separate(_Linear(), eng, sl.fixed(100), sl.fixed(201), 1.0, 0.0)
    assert s.poll_s == 0.0


def test_bad_recv_interval_is_a_one_line_error(tmp_path):
    bundled = engine_limits.data_dir() / "profiles" / "runtime" / "engines.yaml"
    text = bundled.read_text().replace("recv_interval: 1", "recv_interval: 0", 1)
    bad = tmp_path / "engines.yaml"
    bad.write_text(text)
    with pytest.raises(InputError) as e:
        engine_limits.load_engines(str(bad))
    msg = str(e.value)
    assert "recv_interval" in msg and "\n" not in msg
