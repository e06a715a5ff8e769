"""A pass with prompt tokens on an engine that runs it outside a CUDA graph takes at least the
host's launch time (engines.yaml eager_launch; perf/roofline.py _pass)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.perf import engine_limits, fixed_cost, grid, roofline
from pdd_plan.perf.instance import Instance

pytestmark = pytest.mark.unit


def _dsv3(engine=None) -> Instance:
    return Instance(
        profiles.model("deepseek-v3"), profiles.gpu("h200"), 8, tp=8, ep=1, engine=engine
    )


def test_one_token_deepseek_pass_is_sglang_pr_12160s():
    """SGLang PR 12160: a 1-token DeepSeek-V3 prefill pass, 82.64 ms eager. 61 layers x (11
    MLA + 3 quant kernels) + 3 dense FFNs x (4 + 2) + 58 MoE FFNs x (8 + 3 shared + 4 quant)
    + 4 per pass = 1,746 kernels, + 2 x 61 TP all-reduces = 1,868 launches at 44.2 us."""
    inst = _dsv3()
    assert fixed_cost.launches_per_pass(inst) == 1868
    p = roofline.chunk_time(inst, 1, 6)
    step = roofline.chunk_time(_dsv3("vllm"), 1, 6).overhead_s  # the engine's step overhead
    assert p.total_s - step == pytest.approx(1868 * 44.2e-6)  # host-bound: the host's time
    assert p.total_s - step == pytest.approx(82.64e-3, rel=2e-3)


def test_graphed_engine_pays_no_launch_time():
    eager, graphed = _dsv3(), _dsv3("vllm")
    assert graphed.eager_prompt[0] == 0.0
    assert (
        roofline.chunk_time(graphed, 1, 0).total_s < 0.25 * roofline.chunk_time(eager, 1, 0).total_s
    )
    # decode steps run from CUDA graphs on every engine
    assert (
        roofline.decode_step(eager, 1, 1000).total_s
        == roofline.decode_step(graphed, 1, 1000).total_s
    )


def test_long_pass_is_the_gpus_and_time_grows_with_tokens():
    inst = _dsv3()
    n = np.array([1, 64, 512, 2048, 8192, 16384], dtype=float)
    t = np.array([roofline.chunk_time(inst, x, 0).total_s for x in n])
    assert np.all(np.diff(t) >= -1e-12)
    free = roofline.chunk_time(_dsv3("vllm"), 16384, 0).total_s
    assert t[-1] == pytest.approx(free)  # the GPU's time, longer than the host's
    g = grid.chunk_times(inst, n, [0.0]).total_s.ravel()
    assert np.allclose(g, t, rtol=1e-12)


def test_bad_launch_time_is_a_one_line_error(tmp_path):
    bundled = engine_limits.data_dir() / "profiles" / "runtime" / "engines.yaml"
    bad = tmp_path / "engines.yaml"
    bad.write_text(bundled.read_text().replace("per_launch_us: 44.2", "per_launch_us: -1"))
    with pytest.raises(InputError) as e:
        engine_limits.load_engines(str(bad))
    assert "per_launch_us" in str(e.value) and "\n" not in str(e.value)
