"""The simulator's perf tables agree with the roofline functions they tabulate."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import parallelism_candidates
from pdd_plan.sim.timings import ExtendTable, PrefillTimes, StepTable


@pytest.fixture(scope="module")
def ctx():
    from pdd_plan.inputs import profiles

    path = str(profiles.example_path())
    return build_context(load_scenario(path), path)


def _inst(ctx, gpu: str):
    return parallelism_candidates(ctx.model, ctx.gpus[gpu], 32)[0]


@pytest.mark.unit
def test_prefill_table_matches_prefill_time(ctx) -> None:
    inst = _inst(ctx, "h100")
    chunk = 8192
    table = PrefillTimes(inst, chunk)
    rng = np.random.default_rng(0)
    inp = rng.integers(1, 131_072, 150)
    hit = np.concatenate([rng.random(100), np.full(50, 0.97)])
    cached = np.floor(inp * hit)
    new = np.maximum(inp - cached, 1)
    exact = np.array(
        [roofline.prefill_time(inst, a, b, chunk).total_s for a, b in zip(new, cached)]
    )
    err = np.abs(table(new, cached) / exact - 1)
    # bilinear in (tail size, cached) within one chunk count: small except right at a regime
    # switch of the perf model (a kink in the tail size)
    assert err.max() < 0.03 and err.mean() < 0.005
    # exact chunk multiples and one-token prefills
    for n_, c_ in ((8192, 0), (16384, 1000), (1, 65535), (8193, 0)):
        assert table(np.array([n_]), np.array([c_]))[0] == pytest.approx(
            roofline.prefill_time(inst, n_, c_, chunk).total_s, rel=0.03
        )


@pytest.mark.unit
def test_step_and_extend_tables(ctx) -> None:
    inst = _inst(ctx, "h200")
    steps = StepTable(inst, 40_000, 100_000, 512)
    for b, c in ((1, 40_000), (100, 66_000), (333, 81_234), (512, 100_000)):
        # tolerance: 1%: the tables interpolate linearly between grid points of a smooth step-time
        # curve
        assert steps(b, c) == pytest.approx(roofline.decode_step(inst, b, c).total_s, rel=0.01)
    one = StepTable(inst, 66_000, 66_000, 64)
    assert len(one.cols) == 1
    assert one(64, 1.0) == pytest.approx(roofline.decode_step(inst, 64, 66_000).total_s)
    ext = ExtendTable(inst, 256, np.array([30_000, 66_000]))
    for k, c in ((1, 30_000), (100, 50_000), (256, 66_000)):
        # tolerance: 1%: the extend table interpolates linearly in context between its columns
        # (30,000 and 66,000 here) of a near-linear curve: 0.09% off at 50,000, 0.18% the worst of
        # five points tried; exact on the columns
        assert ext(k, c) == pytest.approx(roofline.extend_time(inst, k, c).total_s, rel=0.01)
    assert ext(0, 66_000) == 0.0


@pytest.mark.unit
def test_memoized_timings_are_keyed_by_value(ctx) -> None:
    """roofline.prefill_time and the replay's tables are memoized by Instance.value_key: an
    equal instance in separate profile objects shares them, a different one never does, and a
    memoized answer is what the perf model computes."""
    import dataclasses

    a = _inst(ctx, "h100")
    # equal values in separate profile objects (as a second scenario load may give)
    b = dataclasses.replace(a, model=a.model.model_copy(), gpu=a.gpu.model_copy())
    assert a.model is not b.model and a.value_key == b.value_key
    other = dataclasses.replace(a, expert_load=(a.expert_imbalance or 1.0) * 2.0)
    assert other.value_key != a.value_key
    e = a.gpu.efficiency  # a MoE model runs with the MoE factors: halve both families' mfu
    moe = e.moe.model_copy(update={"mfu": e.moe.mfu * 0.5}) if e.moe else None
    half_mfu = a.gpu.model_copy(update={"efficiency": e.model_copy(
        update={"mfu": e.mfu * 0.5, "moe": moe})})  # fmt: skip
    slow = dataclasses.replace(a, gpu=half_mfu)
    assert slow.value_key != a.value_key
    chunk = ctx.scenario.search.prefill_chunk_tokens
    for new, cached in ((30000.0, 5000.0), (100.0, 0.0)):
        exact = roofline._prefill_time(a, new, cached, chunk)
        assert roofline.prefill_time(a, new, cached, chunk) == exact
        assert roofline.prefill_time(b, new, cached, chunk) is roofline.prefill_time(
            a, new, cached, chunk
        )
        assert roofline.prefill_time(slow, new, cached, chunk).total_s > exact.total_s
    new, cached = np.array([30000.0, 9000.0]), np.array([5000.0, 0.0])
    t_a = PrefillTimes(a, chunk)(new, cached)
    assert np.array_equal(PrefillTimes(b, chunk)(new, cached), t_a)
    assert np.all(PrefillTimes(slow, chunk)(new, cached) > t_a)
    s_a, s_slow = StepTable(a, 1000.0, 9000.0, 64), StepTable(slow, 1000.0, 9000.0, 64)
    assert s_a.cols is StepTable(b, 1000.0, 9000.0, 64).cols
    assert s_slow(32, 5000.0) > s_a(32, 5000.0)


@pytest.mark.unit
def test_memoized_max_batch_is_the_bisection(ctx) -> None:
    """The replay's batch cap, memoized by value, is roofline's bisection: the largest batch
    whose step meets the TPOT (the next one misses it), the same for an equal instance, and
    smaller at a tighter TPOT."""
    import dataclasses

    from pdd_plan.sim.timings import max_batch

    a = _inst(ctx, "h100")
    b = dataclasses.replace(a, model=a.model.model_copy(), gpu=a.gpu.model_copy())
    tpot, c = 0.05, 5000.0
    got = max_batch(a, c, tpot)
    assert got == roofline.max_batch_for_tpot(a, c, tpot)[0] == max_batch(b, c, tpot)
    assert got >= 1 and roofline.decode_step(a, got, c).total_s <= tpot
    if got < a.max_batch(c):
        assert roofline.decode_step(a, got + 1, c).total_s > tpot
    assert max_batch(a, c, tpot / 2) < got
