"""The handoff's extends priced in one array pass (perf.pass_batch, handoff.joined_extends) are
the scalar pass's floats, bit for bit: on hand-built instances that walk every branch of
roofline._pass (two-batch overlap on, off and the engine's pick; a stated expert load; TP
attention with its all-reduce; no all-to-all without DP attention; dense and GQA models;
single-batch overlap, which takes the scalar pass), at batches from none to large, contexts
from none to long, and extends of one chunk and of several; and roofline.decode_step's memo
by value gives the unmemoized step."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pdd_plan.evaluate.fleet import _faster
from pdd_plan.inputs import profiles
from pdd_plan.latency import handoff as payload
from pdd_plan.perf import pass_batch, roofline
from pdd_plan.perf.handoff import joined_extend, joined_extends
from pdd_plan.perf.instance import Instance

pytestmark = pytest.mark.unit


def _inst(model: str, gpu: str, n: int, ep: int, dp: int, **kw) -> Instance:
    return Instance(profiles.model(model), profiles.gpu(gpu), n, n, ep, dp, **kw)


CASES = {
    "v4-pro dp16 ep16 (engine picks overlap)": ("deepseek-v4-pro", "h200", 16, 16, 16, {}),
    "v3 dp8 ep8 overlap on": ("deepseek-v3", "h200", 8, 8, 8, {"two_batch_overlap": True}),
    "v3 dp8 ep8 overlap off": ("deepseek-v3", "h200", 8, 8, 8, {"two_batch_overlap": False}),
    "v3 dp8 ep8 stated load": ("deepseek-v3", "h200", 8, 8, 8, {"expert_load": 1.7}),
    "v3 dp4 ep8 (TP-2 attention)": ("deepseek-v3", "h200", 8, 8, 4, {}),
    "v3 tp8 ep8 no DP attention": ("deepseek-v3", "h200", 8, 8, 1, {}),
    "v3.2 dp8 ep8 redundant": ("deepseek-v3.2", "b200", 8, 8, 8, {"redundant_experts": 32}),
    "v4-flash one GPU": ("deepseek-v4-flash", "b200", 1, 1, 1, {}),
    "mixtral dp2 ep2 (GQA MoE)": ("mixtral-8x7b", "h100", 2, 2, 2, {}),
    "llama 8b dense": ("llama-3.1-8b", "h100", 1, 1, 1, {}),
    "v3 single-batch overlap": ("deepseek-v3", "h200", 8, 8, 8, {"single_batch_overlap": True}),
}
KS = [1, 2, 7, 64, 100, 513, 2048, 4095, 8192, 9000, 20_000]


@pytest.fixture(scope="module", params=list(CASES))
def inst(request) -> Instance:
    model, gpu, n, ep, dp, kw = CASES[request.param]
    return _inst(model, gpu, n, ep, dp, **kw)


@pytest.mark.parametrize("batch", [0.0, 1.0, 37.0, 256.0])
@pytest.mark.parametrize("context", [0.0, 4096.0, 65_536.0])
def test_joined_extends_are_the_scalar_ones_bit_for_bit(inst, batch, context):
    got = joined_extends(inst, KS, context, batch, context)
    want = [joined_extend(inst, k, context, batch, context) for k in KS]
    assert got == want  # frozen dataclasses: every float compared exactly
    assert [j.chunks for j in got][-3:] == [1, 2, 3]  # 8192: one chunk; longer: scalar


@pytest.mark.parametrize("batch", [0.0, 1.0, 256.0])
def test_array_pass_is_mixed_pass_bit_for_bit(inst, batch):
    if not pass_batch.supported(inst):
        pytest.skip("single-batch overlap: the scalar pass prices it")
    n = np.array([1.0, 3.0, 100.0, 777.0, 8192.0])
    totals, _ = pass_batch.joined_totals(inst, batch, 4096.0, n, 10_000.0)
    want = [roofline.mixed_pass(inst, batch, 4096.0, 1.0, x, 10_000.0).total_s for x in n]
    assert totals.tolist() == want


def test_the_overlap_choice_differs_across_the_cases():
    """The cases above reach both sides of _pass's choice (else the tbo branch goes untested)."""
    on = _inst("deepseek-v3", "h200", 8, 8, 8, two_batch_overlap=True)
    off = dataclasses.replace(on, two_batch_overlap=False)
    a = joined_extend(on, 512, 4096.0, 64.0, 4096.0).pass_s
    b = joined_extend(off, 512, 4096.0, 64.0, 4096.0).pass_s
    assert a != b


def test_times_prices_pairs_as_recompute_alone(monkeypatch):
    """latency.handoff.times fills recompute's memo from the array pass: the same means as
    pricing each pair alone on an empty memo."""
    md = _inst("deepseek-v4-pro", "h200", 16, 16, 16)
    choice = payload.Choice("recompute", "test", payload.Payload(0.0, 0.0), None)
    k = np.array([1.0, 5.0, 5.0, 300.0, 9000.0, 120.0])
    ctx = np.array([8000.0, 8000.0, 8000.0, 8000.0, 8000.0, 500.0])
    monkeypatch.setattr(payload, "_RECOMPUTE", {})
    got = payload.times(choice, md, k, ctx, 48.0, 8192, None, 0.0, 9000.0)
    want = [joined_extend(md, a, c, 48.0, c, 8192).mean_s for a, c in zip(k, ctx)]
    assert got.tolist() == want


def test_bad_k_is_floored_to_one_token_as_the_scalar():
    md = _inst("deepseek-v3", "h200", 8, 8, 8)
    got = joined_extends(md, [0, -3, 0.5, 2], 4096.0, 16.0, 4096.0)
    assert got == [joined_extend(md, k, 4096.0, 16.0, 4096.0) for k in [0, -3, 0.5, 2]]


def test_decode_step_memo_is_the_unmemoized_step(monkeypatch):
    """roofline.decode_step's memo (by perf.instance.shape_key): a fresh instance equal to one
    seen gets the very step the pass computes, one on another GPU profile object (a draw's
    copy 1.25x faster) its own, and a per-request context array bypasses the memo."""
    monkeypatch.setattr(roofline, "_DECODE_MEMO", {})
    md = _inst("deepseek-v4-pro", "h200", 16, 16, 16)
    twin, fast = dataclasses.replace(md), dataclasses.replace(md, gpu=_faster(md.gpu, 1.25))
    for inst in (md, twin, fast):
        for b, ctx in ((64, 65_536.0), (65, 65_536.0), (64, 8192.0)):
            assert roofline.decode_step(inst, b, ctx) == roofline._decode_step(inst, b, ctx)
    assert len(roofline._DECODE_MEMO) == 6  # twin hit md's entries, fast did not
    slow, quick = roofline.decode_step(md, 64, 8192.0), roofline.decode_step(fast, 64, 8192.0)
    assert quick.total_s == pytest.approx(slow.total_s / 1.25, rel=1e-9)
    ctx = np.array([1000.0, 9000.0, 70_000.0])
    assert roofline.decode_step(md, 3, ctx) == roofline._decode_step(md, 3, ctx)
    assert len(roofline._DECODE_MEMO) == 6
