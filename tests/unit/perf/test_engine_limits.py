"""A decode batch bounded by the engine's limits as well as the KV pool; an explicit batch is
honoured; a KV misfit explained per GPU; factors at a fit bound flagged."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from pdd_plan.calibration import fit as cal
from pdd_plan.cli.main import app
from pdd_plan.inputs import profiles
from pdd_plan.inputs.calibrated import with_efficiency
from pdd_plan.inputs.schema.gpu import FamilyFactors
from pdd_plan.perf import engine_limits, kv_refusal
from pdd_plan.perf.instance import Instance

pytestmark = pytest.mark.unit


def _inst(model: str, gpu: str, n: int, **kw) -> Instance:
    return Instance(profiles.model(model), cal.analytic_gpu(gpu), n, tp=n, ep=1, **kw)


def test_sglang_cuda_graph_cap_by_gpu_memory_tp_and_dp_rank():
    # server_args: < 160 GB GPUs run graphs up to 256 at TP < 4 and 512 at TP >= 4; larger 512
    assert engine_limits.engine_caps(_inst("llama-3.1-8b", "h100", 1))["cuda_graph"] == 256
    assert engine_limits.engine_caps(_inst("llama-3.1-70b", "h100", 4))["cuda_graph"] == 512
    assert engine_limits.engine_caps(_inst("llama-3.1-8b", "b200", 1))["cuda_graph"] == 512
    # one scheduler (and set of graphs) per attention-DP rank
    v3 = Instance(profiles.model("deepseek-v3"), cal.analytic_gpu("h200"), 8, tp=8, ep=8, dp=8)
    assert engine_limits.engine_caps(v3)["cuda_graph"] == 8 * 256  # attention TP 1 per rank


def test_batch_is_the_smallest_limit_and_a_configured_limit_replaces_the_engines():
    inst = _inst("llama-3.1-8b", "h100", 1)
    kv = inst.kv_max_batch(500.0)
    assert kv > 256  # a short context: the KV pool holds more than the graphs
    assert inst.max_batch(500.0) == 256
    assert dataclasses.replace(inst, max_running=300).max_batch(500.0) == 300
    assert dataclasses.replace(inst, max_running=10**6).max_batch(500.0) == kv


def test_kv_in_whole_pages_of_live_context():
    # vLLM's 16-token pages: 1,001 live tokens hold 1,008 tokens of KV
    assert engine_limits.pages(1001, 16) == 1008
    assert engine_limits.pages(1008, 16) == 1008
    assert engine_limits.pages(0, 16) == 0


def test_explicit_batch_above_the_engine_cap_is_honoured():
    args = ["perf", "-m", "llama-3.1-8b", "-g", "h100", "--gpus", "1", "--phase", "decode"]
    r = CliRunner().invoke(app, [*args, "-L", "500", "-B", "300", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["batch"] == 300


def test_kv_misfit_is_explained_per_gpu_and_suggests_dp_attention():
    # Qwen3-235B (4 KV heads) at TP 32 keeps 8 copies of every request's KV
    inst = Instance(profiles.model("qwen3-235b-a22b"), cal.analytic_gpu("h20"), 32, tp=32, ep=32)
    what, fix = kv_refusal.kv_refusal(inst, 256, 8192.0)
    assert "on each of the 32 GPUs" in what and "8 copies" in what
    assert "--dp-attention" in fix and "--dp 8" in fix
    # by hand: 94 layers x 4 heads x 128 x (K, V) x 2 B = 192,512 B a token; 256 x 8,192 tokens
    # x 8 copies / 32 GPUs = 100.9 GB a GPU
    assert "100.9 GB" in what
    alt = kv_refusal.dp_alternative(inst)
    assert alt.kv_replication == 1 and alt.kv_max_batch(8192.0) > 256
    args = ["perf", "-m", "qwen3-235b-a22b", "-g", "h20", "--gpus", "32", "--phase", "decode"]
    r = CliRunner().invoke(app, [*args, "--batch", "256", "-L", "8192"])
    assert r.exit_code == 2 and "--dp-attention" in r.output and "Traceback" not in r.output


def test_a_factor_at_a_fit_bound_is_flagged():
    g = cal.analytic_gpu("h20")
    assert cal.factors_at_bound(g.efficiency) == []  # analytic: nothing fitted
    moe = FamilyFactors(mfu=0.3, mbu=0.5, step_overhead_ms=20.0, basis="test")
    fitted = with_efficiency(g, mfu=1.0, mbu=0.7, step_overhead_ms=2.0, mode="calibrated", moe=moe)
    flags = cal.factors_at_bound(fitted.efficiency)
    assert flags == [
        "dense mfu 1 at the fit's bound 1",
        "moe step_overhead_ms 20 at the fit's bound 20",
    ]


def test_paged_kv_holds_the_live_context_and_reserving_engines_the_whole_request():
    from pdd_plan.perf import layers, offline

    inst = _inst("llama-3.1-70b", "h100", 4)
    live = dataclasses.replace(offline.SGLANG, max_batch=None, max_num_tokens=10**6)
    keep = dataclasses.replace(live, kv_admission="reserve")
    isl, osl = 1000.0, 3000.0
    # by hand: the pool over one request's KV at ISL + OSL/2 (live) or ISL + OSL (reserved)
    pool = inst.kv_pool_bytes
    want_live = int(pool // float(layers.kv_bytes(inst.model, isl + osl / 2)))
    want_keep = int(pool // float(layers.kv_bytes(inst.model, isl + osl)))
    assert offline.offline_throughput(inst, isl, osl, live).batch == want_live
    assert offline.offline_throughput(inst, isl, osl, keep).batch == want_keep
    assert want_live > want_keep
    assert offline.TRTLLM_BENCH.kv_admission == "reserve"
