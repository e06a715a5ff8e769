"""The simulator's perf tables agree with the roofline functions they tabulate."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.perf import roofline
from pdd_plan.perf.instance import parallelism_candidates
from pdd_plan.resolve import load_scenario, resolve
from pdd_plan.sim.tables import ExtendTable, PrefillTimes, StepTable

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def ctx():
    from pdd_plan import profiles

    path = str(profiles.example_path())
    return resolve(load_scenario(path), path)


def _inst(ctx, gpu: str):
    return parallelism_candidates(ctx.model, ctx.gpus[gpu], 32)[0]


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


def test_step_and_extend_tables(ctx) -> None:
    inst = _inst(ctx, "h200")
    steps = StepTable(inst, 40_000, 100_000, 512)
    for b, c in ((1, 40_000), (100, 66_000), (333, 81_234), (512, 100_000)):
        assert steps(b, c) == pytest.approx(roofline.decode_step(inst, b, c).total_s, rel=0.01)
    one = StepTable(inst, 66_000, 66_000, 64)
    assert len(one.cols) == 1
    assert one(64, 1.0) == pytest.approx(roofline.decode_step(inst, 64, 66_000).total_s)
    ext = ExtendTable(inst, 256, np.array([30_000, 66_000]))
    for k, c in ((1, 30_000), (100, 50_000), (256, 66_000)):
        assert ext(k, c) == pytest.approx(roofline.extend_time(inst, k, c).total_s, rel=0.01)
    assert ext(0, 66_000) == 0.0
