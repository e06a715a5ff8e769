"""KServe LLMInferenceService ``serving.kserve.io/v1alpha2`` from a plan (deploy-targets.md §2).

One LLMInferenceService holds one prefill and one decode workload, vLLM only (KServe's presets
run ``vllm serve ... ${VLLM_ADDITIONAL_ARGS}``; it ships no SGLang or TensorRT-LLM preset). So it
expresses IDC-PD and CDC-PD plans with one GPU type per role, and refuses the rest in one line:
a PDD plan's relay pool is a third workload, two decode GPU types are two decode workloads.

Parallel shape (vLLM's, see engines.py): ``parallelism.tensor`` = GPUs / DP, ``data`` and
``dataLocal`` (DP ranks per pod) when DP > 1, ``expert`` when experts are parallel. KServe's
webhook rules outside the CRD, kept here: ``worker`` (a multi-node instance) needs DP or PP,
``data`` and ``dataLocal`` go together, ``replicas`` and ``scaling`` exclude each other.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from pdd_plan.common.errors import InputError
from pdd_plan.emit import engines, flags
from pdd_plan.emit.dynamo import ZONE_LABEL
from pdd_plan.emit.k8s import labels
from pdd_plan.emit.plan import Deployment, Group

API = "serving.kserve.io/v1alpha2"
ARGS_ENV = "VLLM_ADDITIONAL_ARGS"
# vLLM flags the KServe preset already sets from `parallelism` (config-llm-*-template.yaml and
# the data-parallel preset): not repeated in VLLM_ADDITIONAL_ARGS
PRESET_FLAGS = (
    "--model",
    "--tensor-parallel-size",
    "--data-parallel-size",
    "--data-parallel-size-local",
    "--enable-expert-parallel",
    "--disaggregation-mode",
    "--kv-transfer-config",
)


def refusal(dep: Deployment) -> str | None:
    """Why KServe cannot express this plan (None: it can)."""
    relay = [g for g in dep.groups if g.role == "relay_decode"]
    if relay:
        return (
            f"a {dep.architecture} plan with a relay-decode pool needs three workloads; an "
            "LLMInferenceService has one prefill and one decode workload"
        )
    for role in ("prefill", "decode"):
        gs = [g for g in dep.groups if g.mode == role]
        if len(gs) > 1:
            kinds = ", ".join(f"{g.gpu} in {g.datacenter}" for g in gs)
            return f"the plan has {len(gs)} {role} pools ({kinds}); KServe takes one per service"
    for g in dep.groups:
        if g.nodes > 1 and g.dp <= 1:
            return (
                f"{g.role} runs TP {g.tp} over {g.nodes} nodes; KServe spans nodes only with "
                "data or pipeline parallelism"
            )
    if dep.options.engine not in ("sglang", "vllm"):  # sglang: the default, not asked for
        return f"KServe ships vLLM presets only, not {dep.options.engine}"
    return None


def check_plan(dep: Deployment, file: str | None = None) -> None:
    why = refusal(dep)
    if why:
        raise InputError(
            file,
            "--target kserve",
            f"cannot express this plan: {why}",
            "emit --target llm-d or dynamo, or choose -a cdc_pd / idc_pd",
        )


def additional_args(dep: Deployment, g: Group) -> str:
    """VLLM_ADDITIONAL_ARGS: the plan's vLLM flags the preset does not set, and the KV
    connector (NIXL over UCX; producer on prefill, consumer on decode, as KServe's P/D sample)."""
    a = engines.vllm_args(dep, g, role_flag=False)
    out: list[str] = []
    i = 0
    while i < len(a):
        flag = a[i]
        takes = i + 1 < len(a) and not a[i + 1].startswith("--")
        if flag not in PRESET_FLAGS:
            out += a[i : i + (2 if takes else 1)]
        i += 2 if takes else 1
    kv = dict(engines.VLLM_NIXL, kv_role="kv_producer" if g.role == "prefill" else "kv_consumer")
    out += ["--kv-transfer-config", json.dumps(kv, separators=(",", ":"))]
    return shlex.join(out)


def _parallelism(g: Group) -> dict:
    p: dict = {"tensor": engines.vllm_tp(g)}
    if g.dp > 1:
        p["data"] = g.dp
        p["dataLocal"] = max(1, g.dp // g.nodes)
    if g.ep > 1:
        p["expert"] = True
    return p


def _pod(dep: Deployment, g: Group, leader: bool) -> dict:
    n = str(g.gpus_per_node)
    c: dict = {
        "name": "main",
        "resources": {"limits": {g.resource: n}, "requests": {g.resource: n}},
    }
    if dep.options.image:
        c["image"] = dep.options.image
    if leader:
        c["env"] = [
            {"name": ARGS_ENV, "value": additional_args(dep, g)},
            {
                "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
        ]
    sel = {g.node_label: g.node_label_value}
    if len(dep.datacenters) > 1:
        sel[ZONE_LABEL] = g.datacenter
    return {"nodeSelector": sel, "containers": [c]}


def _workload(dep: Deployment, g: Group) -> dict:
    w: dict = {
        "replicas": g.count,
        "parallelism": _parallelism(g),
        "template": _pod(dep, g, leader=True),
    }
    if g.nodes > 1:
        w["worker"] = _pod(dep, g, leader=False)
    return w


def documents(dep: Deployment) -> dict[str, list[dict]]:
    check_plan(dep)
    pre = next(g for g in dep.groups if g.role == "prefill")
    dec = next(g for g in dep.groups if g.mode == "decode")
    spec: dict = {
        "model": {"uri": f"hf://{dep.model_path}", "name": dep.model_path},
        **_workload(dep, dec),
        "router": {"route": {}, "gateway": {}, "scheduler": {}},
        "prefill": _workload(dep, pre),
    }
    doc = {
        "apiVersion": API,
        "kind": "LLMInferenceService",
        "metadata": {"name": dep.arch_dns, "labels": labels(dep, None, role="kserve")},
        "spec": spec,
    }
    return {"kserve.yaml": [doc]}


def webhook_problems(doc: dict) -> list[str]:
    """KServe's webhook rules that the CRD does not carry (llm_inference_service_validation.go):
    a ``worker`` needs data or pipeline parallelism, ``data`` and ``dataLocal`` go together,
    pipeline and data parallelism exclude each other."""
    out = []
    spec = doc.get("spec") or {}
    for where, w in (("spec", spec), ("spec/prefill", spec.get("prefill") or {})):
        p = w.get("parallelism") or {}
        if "worker" in w and not (p.get("data") or p.get("pipeline")):
            out.append(f"{where}: worker needs parallelism.data or parallelism.pipeline")
        if ("data" in p) != ("dataLocal" in p):
            out.append(f"{where}/parallelism: data and dataLocal go together")
        if p.get("data") and p.get("pipeline"):
            out.append(f"{where}/parallelism: pipeline and data parallelism exclude each other")
    return out


def args_env(container: dict) -> list[str]:
    """The VLLM_ADDITIONAL_ARGS values of a container (KServe's preset appends them)."""
    env: Any = container.get("env") if isinstance(container.get("env"), list) else []
    return [
        str(e.get("value", "")) for e in env if isinstance(e, dict) and e.get("name") == ARGS_ENV
    ]


def args_problems(value: str, selection: flags.Selection = ()) -> list[str]:
    """VLLM_ADDITIONAL_ARGS parsed against the vLLM flag table."""
    try:
        args = shlex.split(value)
    except ValueError as e:
        return [f"{ARGS_ENV}: does not split as shell words ({e})"]
    argv = ["python3", "-m", "vllm.entrypoints.openai.api_server", *args]
    return flags.check_argv(argv, selection)
