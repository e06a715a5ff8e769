"""perf.grid: roofline.chunk_time vectorized over contexts gives the scalar function's numbers,
and the simulator's prefill tables built from it equal the scalar composition."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.inputs import profiles
from pdd_plan.perf import grid, roofline
from pdd_plan.perf.instance import Instance
from pdd_plan.sim.timings import PrefillTimes

pytestmark = pytest.mark.unit

NEW = np.array([1.0, 2.0, 7.0, 64.0, 300.0, 1000.0, 4096.0, 8192.0, 16384.0])
CONTEXT = np.array([0.0, 1.0, 100.0, 1000.0, 5000.0, 32768.0, 100000.0])


def _instances() -> list[Instance]:
    h100, h200 = profiles.gpu("h100"), profiles.gpu("h200")
    v3 = profiles.model("deepseek-v3")
    return [
        Instance(profiles.model("llama-3.1-8b"), h100, 1, tp=1, ep=1),  # dense GQA, one GPU
        Instance(profiles.model("llama-3.1-70b"), h100, 4, tp=4, ep=1),  # TP all-reduce
        Instance(v3, h200, 16, tp=16, ep=16, dp=16),  # MLA, EP, overlap by the default
        Instance(v3, h200, 16, tp=16, ep=16, dp=16, two_batch_overlap=True),
        Instance(v3, h200, 16, tp=16, ep=16, dp=16, single_batch_overlap=True),
        Instance(profiles.model("deepseek-v3.2"), h200, 8, tp=8, ep=8),  # DSA
        Instance(profiles.model("deepseek-v4-pro"), h100, 16, tp=16, ep=16, dp=8),  # compressed
        Instance(profiles.model("qwen3-30b-a3b"), h100, 2, tp=2, ep=2),  # small MoE
    ]


@pytest.mark.parametrize("inst", _instances(), ids=lambda i: i.label)
def test_chunk_times_equal_the_scalar_chunk_time(inst: Instance) -> None:
    got = grid.chunk_times(inst, NEW, CONTEXT)
    assert got.total_s.shape == (len(NEW), len(CONTEXT))
    for i, n in enumerate(NEW):
        for j, c in enumerate(CONTEXT):
            want = roofline.chunk_time(inst, float(n), float(c))
            cb, mb = want._bound_split()
            parts = (cb, mb, want.communication_s, want.hidden_communication_s, want.overhead_s)
            for part, value in zip(got, parts):
                assert part[i, j] == pytest.approx(value, rel=1e-12, abs=1e-300)
            assert got.total_s[i, j] == pytest.approx(want.total_s, rel=1e-12)


def test_prefill_table_equals_the_scalar_composition() -> None:
    """Each entry of a prefill slice is (q full chunks + the tail chunk).total_s, summed with
    PassTime arithmetic from scalar chunk_time calls."""
    inst = _instances()[6]
    pt = PrefillTimes(inst, 8192)
    ck = 8192.0
    for q, lo, hi in [(0, 100.0, 60000.0), (2, 0.0, 30000.0)]:
        cg, z = pt._tabulate(q, lo, hi)
        for j in (0, len(cg) // 2, len(cg) - 1):
            full = None
            for i in range(q):
                p = roofline.chunk_time(inst, ck, float(cg[j]) + i * ck)
                full = p if full is None else full + p
            for i in (0, len(pt.rg) // 3, len(pt.rg) - 1):
                tail = roofline.chunk_time(inst, float(pt.rg[i]), float(cg[j]) + q * ck)
                want = (tail if full is None else full + tail).total_s
                assert z[i, j] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("inst", _instances()[::2], ids=lambda i: i.label)
def test_prefill_times_equal_the_scalar_prefill_time(inst: Instance) -> None:
    """Whole prefills (full chunks then the short tail), including a prompt of exactly one
    chunk, one over it and a long one over a long cached prefix."""
    new = np.array([1.0, 500.0, 8192.0, 8193.0, 20000.0, 70000.0])
    cached = np.array([0.0, 30000.0, 0.0, 1000.0, 8192.0, 90000.0])
    got = grid.prefill_times(inst, new, cached, 8192)
    for g, n, c in zip(got, new, cached):
        want = roofline.prefill_time(inst, float(n), float(c), 8192).total_s
        assert g == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("inst", _instances(), ids=lambda i: i.label)
def test_decode_steps_equal_the_scalar_decode_step(inst: Instance) -> None:
    batches = np.array([1.0, 2.0, 3.0, 17.0, 64.0, 256.0])
    for context in (0.0, 4096.0, 100000.0):
        got = grid.decode_steps(inst, batches, context)
        for g, b in zip(got, batches):
            want = roofline.decode_step(inst, float(b), context).total_s
            assert g == pytest.approx(want, rel=1e-12)
