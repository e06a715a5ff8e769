"""`pdd-plan emit` passes the scenario's engine limits (`engine:`), which the planner sized the
decode batch with, to the engines as their own launch flags: SGLang's --max-running-requests,
--cuda-graph-max-bs and --chunked-prefill-size (times dp: SGLang divides it by dp_size under DP
attention), vLLM's --max-num-seqs (per DP rank) and --max-num-batched-tokens; prefill instances
keep the plan's prefill chunk; a scenario without limits emits none (SGLang's defaults are what
the planner assumed)."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pytest
import yaml

from pdd_plan import emit
from pdd_plan.emit import engines, flags, sglang
from pdd_plan.emit.plan import EmitOptions
from pdd_plan.outputs.plan import parse_plan

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pdd-paper.optimize.yaml"
LIMITS = {"max_running_requests": 96, "cuda_graph_max_batch": 48, "max_num_tokens": 4096}


@pytest.fixture(scope="module")
def plan() -> dict:
    return yaml.safe_load(GOLDEN.read_text())


def _dep(plan: dict, limits: dict | None, arch: str = "pdd", dp: int | None = None):
    p = copy.deepcopy(plan)
    if limits is not None:
        p["inputs"]["engine"] = limits
    if dp is not None:  # a DP-attention decode shape (the default model's own is dp 1)
        for g in p["plans"][arch]["instances"]:
            if g["role"] != "prefill":
                g.update(gpus_per_instance=dp, tp=dp, dp=dp, ep=dp)
    return emit.build(parse_plan(p), arch, EmitOptions())


def _value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


@pytest.mark.parametrize("arch", ["pdd", "idc_pd"])
def test_sglang_decode_commands_carry_the_limits(plan, arch) -> None:
    dep = _dep(plan, LIMITS, arch)
    seen = set()
    for g in dep.groups:
        for _h, _i, _n, argv in sglang.instance_commands(dep, g):
            assert flags.check_argv(argv) == []  # every flag parses against SGLang's table
            seen.add(g.role)
            if g.role == "prefill":
                assert "--max-running-requests" not in argv and "--cuda-graph-max-bs" not in argv
                assert _value(argv, "--chunked-prefill-size") == str(dep.chunk_tokens * g.dp)
                continue
            assert _value(argv, "--max-running-requests") == "96"
            assert _value(argv, "--cuda-graph-max-bs") == "48"
            assert _value(argv, "--chunked-prefill-size") == str(4096 * g.dp)
    assert "prefill" in seen and len(seen) >= 2


def test_dp_attention_chunk_is_the_per_rank_budget_times_dp(plan) -> None:
    dep = _dep(plan, LIMITS, dp=8)
    dec = [g for g in dep.groups if g.role != "prefill"]
    assert dec and all(g.dp == 8 for g in dec)
    for g in dec:
        argv = sglang.instance_commands(dep, g)[0][3]
        assert _value(argv, "--chunked-prefill-size") == "32768"  # 4096 x 8, by hand
        assert _value(argv, "--max-running-requests") == "96"  # the instance's, SGLang divides
        a = engines.vllm_args(dep, g)
        assert _value(a, "--max-num-seqs") == "12"  # 96 // 8 ranks, each its own scheduler
        assert _value(a, "--max-num-batched-tokens") == "4096"


def test_partial_limits_emit_only_what_is_set(plan) -> None:
    dep = _dep(plan, {"cuda_graph_max_batch": 64})
    for g in dep.groups:
        argv = sglang.instance_commands(dep, g)[0][3]
        assert "--max-running-requests" not in argv
        want = None if g.role == "prefill" else "64"
        assert _value(argv, "--cuda-graph-max-bs") == want


def test_no_limits_no_flags_and_scripts_carry_them(plan) -> None:
    bare = emit.render(_dep(plan, None), "sglang")
    text = "\n".join(f.text for f in bare.values())
    assert "--max-running-requests" not in text and "--cuda-graph-max-bs" not in text
    files = emit.render(_dep(plan, LIMITS), "sglang")
    lines = [
        ln for f in files.values() for ln in f.text.splitlines() if "sglang.launch_server" in ln
    ]
    dec = [shlex.split(ln) for ln in lines if "--disaggregation-mode decode" in ln]
    assert dec and all("--max-running-requests" in a for a in dec)
    lws = emit.render(_dep(plan, LIMITS), "lws")
    assert any("--max-running-requests=96" in f.text for f in lws.values())
