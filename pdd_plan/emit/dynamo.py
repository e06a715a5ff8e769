"""NVIDIA Dynamo DynamoGraphDeployment (DGD) from a plan (deploy-targets.md §1).

A DGD lives in one namespace of one cluster and holds components (frontend, prefill, decode,
...). A plan becomes:

* IDC-PD (one datacenter): one DGD, Frontend + a prefill and a decode component per pool.
* Across datacenters, ``one-cluster`` (default): one Kubernetes cluster spans both datacenters;
  one DGD with the Frontend, prefill and main-decode components, each pinned to its datacenter
  by node selector, and ``experimental.kvTransferPolicy`` *preferred* (not required, which would
  fail every request: no decode worker shares the prefill's datacenter) so prefill in one
  datacenter can hand off to decode in the other.
* Across datacenters, ``per-datacenter``: a cluster per datacenter; Dynamo's documented
  multi-pool pattern, a control DGD (Frontend + GlobalRouter, its JSON config in a ConfigMap) and
  one DGD per pool with a LocalRouter and the workers (global-router-configuration.mdx).

Relay decode has no Dynamo role: it is its own DGD (its own Dynamo namespace, so the Frontend
does not send it ordinary decode traffic) and idles until a router applies pdd-routing.yaml.

Rules the schema does not enforce, kept here: every component's container is ``main``; a
``main`` image tag that is not a semver needs ``runtimeVersionOverride`` (v1beta1 admission);
YAML 1.1 boolean-like strings (y, n, on, off, ...) are quoted, because the DGD admission webhook
rejects them as env values (AIC dgd_model.py; see `yaml11`).
"""

from __future__ import annotations

import json
import re

from pdd_plan.emit import engines, transfer
from pdd_plan.emit.k8s import labels
from pdd_plan.emit.plan import Deployment, Group, dns

DYNAMO_VERSION = "1.4.0"  # the runtime images' tag (deploy-targets.md §1 example)
RUNTIME_IMAGE = {
    "sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime",
    "vllm": "nvcr.io/nvidia/ai-dynamo/vllm-runtime",
    "trtllm": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime",
}
ZONE_LABEL = "topology.kubernetes.io/zone"  # node label naming each node's datacenter
PREFERRED_WEIGHT = 0.5  # never binds here: no decode worker shares the prefill's datacenter
NS = "${K8S_NAMESPACE}"  # Kubernetes namespace, filled by envsubst as Dynamo's examples do
ROUTER_CONFIG = "global_router_config.json"
_SEMVER = re.compile(r"^v?\d+\.\d+\.\d+$")


def image(dep: Deployment, engine: str) -> str:
    return dep.options.image or f"{RUNTIME_IMAGE[engine]}:{DYNAMO_VERSION}"


def needs_version_override(img: str) -> bool:
    """v1beta1 admission reads the runtime version from the image tag; a digest or a tag
    that is not a semver (``latest``) needs ``runtimeVersionOverride``."""
    tail = img.rsplit("/", 1)[-1]
    tag = tail.split(":", 1)[1] if ":" in tail and "@" not in tail else ""
    return not _SEMVER.match(tag)


# ------------------------------------------------------------------ neutral components
def _worker(dep: Deployment, g: Group, engine: str, name: str, pinned: bool) -> dict:
    sel = {g.node_label: g.node_label_value}
    if pinned:
        sel[ZONE_LABEL] = g.datacenter
    env = [{"name": e["name"], "value": e["value"]} for e in transfer.env(dep, g)]
    if dep.staging_buffer and engine == "sglang":
        env.append({"name": "SGLANG_DISAGG_STAGING_BUFFER", "value": "1"})
    return {
        "name": name,
        "type": "prefill" if g.role == "prefill" else "decode",
        "replicas": g.count,
        "argv": engines.dynamo_argv(dep, g, engine),
        "env": env,
        "gpus": g.gpus_per_node,
        "resource": g.resource,
        "nodes": g.nodes,
        "selector": sel,
        "labels": labels(dep, g),
    }


def component_name(g: Group) -> str:
    return "".join(p.capitalize() for p in g.name.split("-")) + "Worker"


def _frontend(dep: Deployment, args: list[str] | None, env: list[dict], pinned: bool) -> dict:
    sel = {ZONE_LABEL: dep.router_dc} if pinned else {}
    return {
        "name": "Frontend",
        "type": "frontend",
        "replicas": 1,
        "argv": ["python3", "-m", "dynamo.frontend", *args] if args else None,
        "env": env,
        "selector": sel,
        "labels": labels(dep, None, role="router"),
    }


def _plain(name: str, argv: list[str], mount: str | None = None) -> dict:
    """A component with no Dynamo type (GlobalRouter, LocalRouter), as Dynamo's examples."""
    return {"name": name, "type": None, "replicas": 1, "argv": argv, "mount": mount}


# ------------------------------------------------------------------ rendering per API version
def _container(c: dict, img: str) -> dict:
    out: dict = {"name": "main", "image": img}
    if c.get("argv"):
        out["command"] = c["argv"][:3]
        out["args"] = c["argv"][3:]
    if c.get("env"):
        out["env"] = c["env"]
    return out


def _v1beta1(c: dict, img: str) -> dict:
    cont = _container(c, img)
    spec: dict = {}
    if c.get("gpus"):
        n = str(c["gpus"])
        cont["resources"] = {"limits": {c["resource"]: n}, "requests": {c["resource"]: n}}
    if c.get("mount"):
        cont["volumeMounts"] = [{"name": "router-config", "mountPath": "/config", "readOnly": True}]
        spec["volumes"] = [{"name": "router-config", "configMap": {"name": c["mount"]}}]
    if c.get("selector"):
        spec["nodeSelector"] = c["selector"]
    spec["containers"] = [cont]
    pod: dict = {"spec": spec}
    if c.get("labels"):
        pod = {"metadata": {"labels": c["labels"]}, "spec": spec}
    out: dict = {"name": c["name"]}
    if c.get("type"):
        out["type"] = c["type"]
    out["replicas"] = c["replicas"]
    if c.get("nodes", 1) > 1:
        out["multinode"] = {"nodeCount": c["nodes"]}
    if needs_version_override(img):
        out["runtimeVersionOverride"] = DYNAMO_VERSION
    out["podTemplate"] = pod
    return out


def _v1alpha1(c: dict, img: str) -> dict:
    out: dict = {}
    t = c.get("type")
    if t in ("prefill", "decode"):
        out |= {"componentType": "worker", "subComponentType": t}
    elif t:
        out["componentType"] = t
    out["replicas"] = c["replicas"]
    if c.get("gpus"):
        out["resources"] = {"limits": {"gpu": str(c["gpus"])}, "requests": {"gpu": str(c["gpus"])}}
    if c.get("nodes", 1) > 1:
        out["multinode"] = {"nodeCount": c["nodes"]}
    if c.get("env"):
        out["envs"] = c["env"]
    if needs_version_override(img):
        out["runtimeVersionOverride"] = DYNAMO_VERSION
    if c.get("labels"):
        out["labels"] = c["labels"]
    cont = _container(c, img)
    cont.pop("env", None)
    pod: dict = {"mainContainer": cont}
    if c.get("mount"):
        cont["volumeMounts"] = [{"name": "router-config", "mountPath": "/config", "readOnly": True}]
        pod["volumes"] = [{"name": "router-config", "configMap": {"name": c["mount"]}}]
    if c.get("selector"):
        pod["nodeSelector"] = c["selector"]
    out["extraPodSpec"] = pod
    return out


def dgd(
    dep: Deployment,
    name: str,
    comps: list[dict],
    engine: str,
    api: str,
    policy: dict | None = None,
    dc: str | None = None,
) -> dict:
    img = image(dep, engine)
    spec: dict = {"backendFramework": engine}
    if api == "v1beta1":
        spec["components"] = [_v1beta1(c, img) for c in comps]
    else:
        spec["services"] = {c["name"]: _v1alpha1(c, img) for c in comps}
    if policy:
        spec["experimental"] = {"kvTransferPolicy": policy}
    meta = {"name": name, "labels": labels(dep, None, role="dynamo", dc=dc)}
    return {
        "apiVersion": f"nvidia.com/{api}",
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": spec,
    }


# ------------------------------------------------------------------ the forms
def _served(dep: Deployment) -> list[Group]:
    """Groups the Frontend routes to: prefill and (main) decode; not the relay."""
    return [g for g in dep.groups if g.role != "relay_decode"]


def _relay(dep: Deployment) -> list[Group]:
    return [g for g in dep.groups if g.role == "relay_decode"]


def one_cluster(dep: Deployment, engine: str, api: str) -> dict[str, list[dict]]:
    """IDC-PD, or both datacenters in one cluster: one DGD (+ one for the relay pool)."""
    across = len(dep.datacenters) > 1
    env = [{"name": "DYN_ROUTER_MODE", "value": "kv"}] if across else []
    comps = [_frontend(dep, None, env, across)]
    comps += [_worker(dep, g, engine, component_name(g), across) for g in _served(dep)]
    policy = None
    if across:
        policy = {
            "labelKey": ZONE_LABEL,
            "domain": "zone",
            "enforcement": "preferred",
            "preferredWeight": PREFERRED_WEIGHT,
        }
    docs = [dgd(dep, dep.arch_dns, comps, engine, api, policy)]
    relay = [_worker(dep, g, engine, component_name(g), across) for g in _relay(dep)]
    if relay:
        docs.append(dgd(dep, f"{dep.arch_dns}-relay-decode", relay, engine, api))
    return {"dynamo.yaml": docs}


def pool_name(dep: Deployment, g: Group) -> str:
    return f"{dep.arch_dns}-{dns(g.datacenter)}-{g.name}"


def _pool(dep: Deployment, g: Group, engine: str, api: str) -> dict:
    name = pool_name(dep, g)
    endpoint = "prefill" if g.role == "prefill" else "backend"
    router = _plain(
        "LocalRouter",
        ["python3", "-m", "dynamo.router", "--endpoint", f"{NS}-{name}.{endpoint}.generate"],
    )
    worker = _worker(dep, g, engine, component_name(g), pinned=False)
    return dgd(dep, name, [router, worker], engine, api, dc=g.datacenter)


def router_config(dep: Deployment) -> dict:
    """The GlobalRouter's JSON (GlobalRouterConfig, disagg mode): the plan's pools and a 1 x 1
    grid per side (the grid selects by ISL / context length and SLA target, not by the PDD
    rule: every cell maps to the first pool; pdd-routing.yaml holds the rule)."""
    pre = [g for g in dep.groups if g.role == "prefill"]
    dec = [g for g in dep.groups if g.role in ("main_decode", "decode")]
    dec += _relay(dep)  # listed, so a PDD-aware router can reach it; no grid cell selects it
    ttft = float(dep.sla["ttft_p90_s"]) * 1000  # the plan's SLA: the targets it planned for
    itl = float(dep.sla["tpot_ms"])
    return {
        "mode": "disagg",
        "num_prefill_pools": len(pre),
        "num_decode_pools": len(dec),
        "prefill_pool_dynamo_namespaces": [f"{NS}-{pool_name(dep, g)}" for g in pre],
        "decode_pool_dynamo_namespaces": [f"{NS}-{pool_name(dep, g)}" for g in dec],
        "prefill_pool_selection_strategy": {
            "ttft_min_ms": 0,
            "ttft_max_ms": ttft,
            "ttft_resolution": 1,
            "isl_min": 0,
            "isl_max": 1 << 20,
            "isl_resolution": 1,
            "prefill_pool_mapping": [[0]],
        },
        "decode_pool_selection_strategy": {
            "itl_min_ms": 0,
            "itl_max_ms": itl,
            "itl_resolution": 1,
            "context_length_min": 0,
            "context_length_max": 1 << 20,
            "context_length_resolution": 1,
            "decode_pool_mapping": [[0]],
        },
    }


def per_datacenter(dep: Deployment, engine: str, api: str) -> dict[str, list[dict]]:
    ctrl = f"{dep.arch_dns}-ctrl"
    cm = f"{ctrl}-global-router"
    cfg = router_config(dep)
    ttft = cfg["prefill_pool_selection_strategy"]["ttft_max_ms"]
    itl = cfg["decode_pool_selection_strategy"]["itl_max_ms"]
    front = ["--router-mode", "round-robin", "--namespace", f"{NS}-{ctrl}"]
    front += ["--model-name", dep.model_path]
    grouter = ["python3", "-m", "dynamo.global_router", "--config", f"/config/{ROUTER_CONFIG}"]
    grouter += ["--model-name", dep.model_path, "--namespace", f"{NS}-{ctrl}"]
    grouter += ["--default-ttft-target-ms", f"{ttft:g}", "--default-itl-target-ms", f"{itl:g}"]
    comps = [_frontend(dep, front, [], False), _plain("GlobalRouter", grouter, mount=cm)]
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": cm, "labels": labels(dep, None, role="router")},
        "data": {ROUTER_CONFIG: json.dumps(cfg, indent=2) + "\n"},
    }
    out: dict[str, list[dict]] = {}
    for dc in dep.datacenters:
        docs = [configmap, dgd(dep, ctrl, comps, engine, api)] if dc == dep.router_dc else []
        docs += [_pool(dep, g, engine, api) for g in dep.groups_in(dc)]
        out[f"dynamo-{dns(dc)}.yaml"] = docs
    return out


def documents(dep: Deployment, engine: str, api: str, topology: str) -> dict[str, list[dict]]:
    """{file name: Kubernetes documents} of the dynamo target."""
    if len(dep.datacenters) == 1 or topology == "one-cluster":
        return one_cluster(dep, engine, api)
    return per_datacenter(dep, engine, api)
