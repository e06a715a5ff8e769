"""Worker command lines per engine (SGLang, vLLM, TensorRT-LLM) from one plan row, for the
targets that run them (Dynamo; KServe runs vLLM), checked against the engine's flag table.

The plan's parallel shape is SGLang's (perf/ models it): ``tp`` is the instance's GPUs, ``dp``
attention data-parallel ranks inside it, ``ep`` the expert-parallel ranks. Each engine spells
it its own way (deploy-targets.md §1, "Parallelism"):

* SGLang: ``--tp-size gpus --dp-size dp --enable-dp-attention --ep-size ep`` (as `sglang.py`);
* vLLM: world = tp x dp, so ``--tensor-parallel-size gpus/dp --data-parallel-size dp``, and
  ``--enable-expert-parallel`` makes experts span all tp x dp ranks;
* TensorRT-LLM: ``--tensor-parallel-size gpus``, ``--enable-attention-dp`` (attention DP size =
  TP size) and ``--expert-parallel-size ep``.

Where an engine cannot express the plan's shape exactly, ``shape_notes`` says so.
"""

from __future__ import annotations

import json

from pdd_plan.common.errors import InputError
from pdd_plan.emit import flags, sglang, transfer
from pdd_plan.emit.plan import ENGINES, Deployment, Group

DYNAMO_MODULE = {"sglang": "dynamo.sglang", "vllm": "dynamo.vllm", "trtllm": "dynamo.trtllm"}
# NIXL over UCX for vLLM (llm-d's P/D guide sets the same, deploy-targets.md §3)
VLLM_NIXL = {
    "kv_connector": "NixlConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"backends": ["UCX"]},
}
TRTLLM_CACHE_BACKEND = "NIXL"  # cache_transceiver_config.backend (DEFAULT | UCX | NIXL | MPI)


def check_engine(engine: str, version: str | None) -> str:
    """The flag-table version for ``engine`` (default: the newest table); one-line InputError
    for an unknown engine or a version with no table."""
    if engine not in ENGINES:
        raise InputError(
            None, "--engine", f"unknown engine '{engine}'", f"use one of {', '.join(ENGINES)}"
        )
    have = flags.available(engine)
    if version is not None and version not in have:
        raise InputError(
            None,
            "--engine-version",
            f"no {engine} flag table for version '{version}'",
            f"use one of {', '.join(have)} (versions whose argument definitions were read)",
        )
    return version or have[0]


def version_problems(engine: str, version: str, argvs: list[list[str]]) -> None:
    """A one-line InputError when the chosen engine version lacks flags the plan needs."""
    sel = ((engine, version),)
    missing: list[str] = []
    for argv in argvs:
        for p in flags.check_argv(argv, sel):
            if "unknown flag" in p:
                flag = p.split("unknown flag ", 1)[1].split()[0]
                if flag not in missing:
                    missing.append(flag)
    if missing:
        raise InputError(
            None,
            "--engine-version",
            f"{engine} {version} has no {', '.join(missing)}, which this plan needs",
            f"use {flags.versions()[engine]}",
        )


def vllm_tp(g: Group) -> int:
    """vLLM's tensor-parallel size: world = tp x dp, and the plan's tp is the GPUs."""
    return g.gpus_per_instance // g.dp if g.dp > 1 and g.gpus_per_instance % g.dp == 0 else g.tp


def vllm_args(dep: Deployment, g: Group, role_flag: bool = True) -> list[str]:
    """vLLM engine flags (``--model`` first) for one instance of the group."""
    a = ["--model", dep.model_path]
    if dep.options.trust_remote_code:
        a.append("--trust-remote-code")
    a += ["--tensor-parallel-size", str(vllm_tp(g))]
    if g.dp > 1:
        a += ["--data-parallel-size", str(g.dp)]
        if g.nodes > 1:
            a += ["--data-parallel-size-local", str(max(1, g.dp // g.nodes))]
    if g.moe_a2a or g.ep > 1:
        a.append("--enable-expert-parallel")
    if g.moe_a2a:
        mode = "deepep_high_throughput" if g.role == "prefill" else "deepep_low_latency"
        a += ["--all2all-backend", mode]
        if g.two_batch_overlap:
            a.append("--enable-dbo")
        if g.redundant_experts:
            a += ["--enable-eplb", "--num-redundant-experts", str(g.redundant_experts)]
    a += ["--gpu-memory-utilization", f"{g.mem_fraction:g}"]
    if g.role == "prefill":
        a += ["--max-num-batched-tokens", str(dep.chunk_tokens)]
    a += vllm_limit_args(dep, g)
    if dep.model.page_size > 1:
        a += ["--block-size", str(dep.model.page_size)]
    if role_flag:
        a += ["--disaggregation-mode", g.mode]
    a += ["--kv-transfer-config", json.dumps(VLLM_NIXL, separators=(",", ":"))]
    return a


def vllm_limit_args(dep: Deployment, g: Group) -> list[str]:
    """The scenario's engine limits on a decode instance as vLLM's flags: each DP rank is an
    engine core with its own scheduler, so `--max-num-seqs` is the instance's running-request
    limit divided among the ranks (as SGLang divides its own) and `--max-num-batched-tokens`
    one scheduler's budget, as the scenario's is. vLLM has no flag for the largest CUDA-graph
    batch in the flag tables bundled here (emit/data), so that limit is left to its default."""
    lim = dep.engine_limits
    if g.role == "prefill" or not lim:
        return []
    a: list[str] = []
    if "max_running_requests" in lim:
        a += ["--max-num-seqs", str(max(1, lim["max_running_requests"] // g.dp))]
    if "max_num_tokens" in lim:
        a += ["--max-num-batched-tokens", str(lim["max_num_tokens"])]
    return a


def trtllm_args(dep: Deployment, g: Group) -> list[str]:
    a = ["--model", dep.model_path, "--served-model-name", dep.model_path]
    a += ["--tensor-parallel-size", str(g.gpus_per_instance)]
    if g.ep > 1:
        a += ["--expert-parallel-size", str(g.ep)]
    if g.dp > 1:
        a.append("--enable-attention-dp")
    a += ["--gpus-per-node", str(g.gpus_per_node)]
    if g.role == "prefill":
        a += ["--max-num-tokens", str(dep.chunk_tokens)]
    if dep.model.page_size > 1:
        a += ["--kv-block-size", str(dep.model.page_size)]
    a += ["--disaggregation-mode", g.mode]
    over = {"cache_transceiver_config": {"backend": TRTLLM_CACHE_BACKEND}}
    a += ["--override-engine-args", json.dumps(over, separators=(",", ":"))]
    return a


def dynamo_argv(dep: Deployment, g: Group, engine: str) -> list[str]:
    """``python3 -m dynamo.<engine> ...`` for one worker of the group. Multi-node addressing
    (leader address, node rank) is left to the Dynamo operator, which injects it."""
    head = ["python3", "-m", DYNAMO_MODULE[engine]]
    if engine == "sglang":
        return head + sglang.tokens(sglang.server_flags(dep, g))
    if engine == "vllm":
        return head + vllm_args(dep, g)
    return head + trtllm_args(dep, g)


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, t in enumerate(argv):
        if t == flag and i + 1 < len(argv):
            return argv[i + 1]
        if t.startswith(flag + "="):
            return t.split("=", 1)[1]
    return None


def backend_of(argv: list[str]) -> str | None:
    """The KV transfer backend a worker command line asks for (None: not a worker)."""
    b = _flag_value(argv, "--disaggregation-transfer-backend")
    if b is not None:
        return b
    kv = _flag_value(argv, "--kv-transfer-config")
    if kv is not None:
        return str(json.loads(kv).get("kv_connector"))
    over = _flag_value(argv, "--override-engine-args")
    if over is not None:
        return str((json.loads(over).get("cache_transceiver_config") or {}).get("backend"))
    return None


def rdma_only(backend: str) -> bool:
    """RDMA-only transports: Mooncake's RDMA backend (SGLang), vLLM's MooncakeConnector."""
    return transfer.rdma_only(backend) or backend == "MooncakeConnector"


def shape_notes(dep: Deployment, engine: str) -> list[str]:
    """Where an engine cannot express the plan's parallel shape exactly."""
    out = []
    for g in dep.groups:
        if engine == "vllm" and g.ep > 1 and g.ep != g.gpus_per_instance:
            out.append(
                f"{g.role} ({g.gpu}): the plan has EP {g.ep} over {g.gpus_per_instance} GPUs; "
                "vLLM's expert parallelism spans all tensor x data parallel ranks"
            )
        if engine == "trtllm" and 1 < g.dp < g.gpus_per_instance:
            out.append(
                f"{g.role} ({g.gpu}): the plan has attention DP {g.dp} over "
                f"{g.gpus_per_instance} GPUs; TensorRT-LLM's attention DP size equals its TP size"
            )
        if engine == "trtllm" and g.moe_a2a:
            out.append(
                f"{g.role} ({g.gpu}): the plan assumed DeepEP all-to-all; TensorRT-LLM picks "
                "its MoE all-to-all itself (set moe_config in the engine YAML to match)"
            )
    return out
