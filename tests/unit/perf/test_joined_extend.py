"""The recompute handoff joined to a running decode batch (perf.handoff.joined_extend) against
hand arithmetic: a uniform wait on the step in flight plus the joined passes."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pdd_plan.evaluate.fleet import _faster
from pdd_plan.inputs import profiles
from pdd_plan.perf import handoff, layers, moe_terms, roofline
from pdd_plan.perf.handoff import joined_extend
from pdd_plan.perf.instance import Instance, parallelism_candidates

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def md() -> Instance:
    m = profiles.model("deepseek-v4-pro")
    g = profiles.gpu("h200")
    return parallelism_candidates(m, g, 16, extra_sizes=1)[-1]


def test_wait_and_pass_by_hand(md):
    b, ctx = 64, 65_536.0
    j = joined_extend(md, 100, ctx, b, ctx)
    step = roofline.decode_step(md, b, ctx).total_s
    mixed = roofline.mixed_pass(md, b, ctx, 1.0, 100, ctx).total_s
    attn, _ = layers.prefill_attention_flops(md.model, 100, ctx)
    rate = md.gpu.peak_flops(md.model.kv_cache.dtype) * moe_terms.attention_fractions(md.model)[0]
    excess = attn / rate * (1 / md.attn_tp - 1 / md.n_gpus)
    assert j.step_s == pytest.approx(step)
    assert j.pass_s == pytest.approx(mixed + excess)
    assert j.mean_s == pytest.approx(mixed + excess + step / 2)
    assert j.max_s == pytest.approx(mixed + excess + step)
    assert j.sd_s == pytest.approx(step / math.sqrt(12))
    assert j.chunks == 1


def test_more_than_a_lone_extend_and_grows_with_the_batch(md):
    ctx = 65_536.0
    lone = roofline.extend_time(md, 100, ctx).total_s
    small = joined_extend(md, 100, ctx, 8, ctx)
    big = joined_extend(md, 100, ctx, 256, ctx)
    assert small.mean_s > lone  # a joined pass carries the batch and waits for the step
    assert big.mean_s > small.mean_s and big.sd_s > small.sd_s


def test_chunks_split_a_long_extend(md):
    j = joined_extend(md, 3000, 65_536.0, 32, 65_536.0, chunk_tokens=1024)
    assert j.chunks == 3
    one = joined_extend(md, 3000, 65_536.0, 32, 65_536.0, chunk_tokens=8192)
    assert one.chunks == 1 and j.pass_s > one.pass_s  # every chunk pays the batch's pass again


def test_memoized_step_is_the_unmemoized_one_on_fresh_equal_instances(md):
    """The decode step joined_extend memoizes by value (perf.handoff.shape_key) is the one
    roofline gives, bit for bit, on a fresh instance equal to one seen before, and one of
    another batch, context or size is not taken from the memo."""
    twin = dataclasses.replace(md)  # a fresh instance on the same profiles
    assert twin is not md and handoff.shape_key(twin) == handoff.shape_key(md)
    cases = ((md, 64, 65_536.0), (twin, 64, 65_536.0), (twin, 65, 65_536.0), (md, 64, 8_192.0))
    for inst, b, ctx in cases:
        j = joined_extend(inst, 100, ctx, b, ctx)
        assert j.step_s == roofline.decode_step(inst, b, ctx).total_s
        assert j == joined_extend(inst, 100, ctx, b, ctx)  # asked again: the same bits
    other = parallelism_candidates(md.model, md.gpu, 16, extra_sizes=1)[0]
    assert handoff.shape_key(other) != handoff.shape_key(md)
    j = joined_extend(other, 100, 65_536.0, 64, 65_536.0)
    assert j.step_s == roofline.decode_step(other, 64, 65_536.0).total_s


def test_memo_is_not_shared_across_profiles_of_equal_shape(md):
    """An instance on another GPU profile object (a draw's `deployed` copy, 1.25x faster)
    misses the memo though its sizes are equal: the key holds the profile's identity."""
    fast = dataclasses.replace(md, gpu=_faster(md.gpu, 1.25))
    assert handoff.shape_key(fast) != handoff.shape_key(md)
    a = joined_extend(md, 100, 65_536.0, 64, 65_536.0)
    b = joined_extend(fast, 100, 65_536.0, 64, 65_536.0)
    assert b.step_s == roofline.decode_step(fast, 64, 65_536.0).total_s
    assert b.step_s == pytest.approx(a.step_s / 1.25, rel=1e-9)  # every pass 1/k (fleet._faster)
