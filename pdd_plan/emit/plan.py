"""From a plan dict to the deployment the emitters render: instance groups, nodes, hosts, flags.

The plan is read only through its dict (``optimize`` output, or a plan YAML written by
``pdd-plan optimize --out``): ``plans[arch].instances`` rows, ``line``, ``routing`` and
``route_share``, and ``inputs`` (the validated scenario: policy, search, model).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from .. import profiles
from ..errors import InputError
from ..schema.gpu import GPUProfile
from ..schema.model import ModelProfile

ARCHITECTURES = ("pdd", "cdc_pd", "idc_pd")
ROLES = ("prefill", "relay_decode", "main_decode", "decode")
ROLE_ORDER = {r: i for i, r in enumerate(ROLES)}
DOMAIN = "pdd.local"  # placeholder DNS domain of the sglang target's hosts
TRANSFER_BACKENDS = ("mooncake", "nixl", "mooncake_tcp")

_ROW_INTS = ("count", "gpus_per_instance", "tp", "dp", "ep")


def data_file(name: str) -> Path:
    return Path(str(resources.files("pdd_plan") / "emit" / "data" / name))


@lru_cache(maxsize=1)
def node_labels() -> dict[str, dict[str, str]]:
    return yaml.safe_load(data_file("gpu-node-labels.yaml").read_text(encoding="utf-8"))["gpus"]


def dns(s: str) -> str:
    """A DNS-1123 label from any name: lower case, [a-z0-9-], no leading/trailing '-'."""
    out = re.sub(r"[^a-z0-9-]+", "-", str(s).lower()).strip("-")
    return re.sub(r"-{2,}", "-", out) or "x"


def label_value(s: str) -> str:
    """A Kubernetes label value (<= 63 chars of [A-Za-z0-9-_.], alphanumeric at both ends)."""
    out = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(s))[:63].strip("-_.")
    return out or "x"


@dataclass(frozen=True)
class EmitOptions:
    """Deployment choices the plan does not make (all have documented defaults)."""

    model_path: str | None = None  # default: the model profile's hf_id (else its name)
    image: str = "lmsysorg/sglang:latest"  # runs both launch_server and sglang_router
    transfer_backend: str = "mooncake"
    ib_device: str = "mlx5_0"  # --disaggregation-ib-device where KV moves over RDMA (mooncake)
    trust_remote_code: bool = False
    port: int = 30000
    bootstrap_port: int = 8998
    router_port: int = 8000
    dist_port: int = 20102  # --dist-init-addr port of multi-node instances
    prefill_policy: str = "cache_aware"
    decode_policy: str = "power_of_two"

    def __post_init__(self) -> None:
        if self.transfer_backend not in TRANSFER_BACKENDS:
            raise InputError(
                None,
                "--transfer-backend",
                f"unknown transfer backend '{self.transfer_backend}'",
                f"use one of {', '.join(TRANSFER_BACKENDS)}",
            )


@dataclass(frozen=True)
class Group:
    """One instance row of the plan: `count` identical instances of one role, GPU and DC."""

    role: str
    gpu: str
    datacenter: str
    count: int
    gpus_per_instance: int
    tp: int
    dp: int
    ep: int
    nodes: int  # hosts (pods) per instance = --nnodes = LWS size
    gpus_per_node: int
    name: str  # DNS-safe, unique within the datacenter (e.g. "prefill", "main-decode-h200")
    mem_fraction: float
    rdma: bool  # its KV peers are all reachable over RDMA: emit --disaggregation-ib-device
    resource: str  # nvidia.com/gpu | amd.com/gpu
    node_label: str
    node_label_value: str
    label_known: bool

    @property
    def mode(self) -> str:
        return "prefill" if self.role == "prefill" else "decode"

    @property
    def dc(self) -> str:
        return dns(self.datacenter)


@dataclass(frozen=True)
class Deployment:
    scenario: str
    model: ModelProfile
    model_path: str
    architecture: str
    groups: list[Group]
    datacenters: list[str]  # with instances, prefill datacenter first
    router_dc: str
    chunk_tokens: int
    policy: dict
    routing: dict
    route_share: dict
    line: dict | None
    sla: dict
    options: EmitOptions
    staging_buffer: bool  # SGLANG_DISAGG_STAGING_BUFFER=1 (non-MLA model, prefill TP != decode TP)
    notes: list[str] = field(default_factory=list)

    @property
    def arch_dns(self) -> str:
        return dns(self.architecture)

    def groups_in(self, dc: str) -> list[Group]:
        return [g for g in self.groups if g.datacenter == dc]

    @property
    def drc(self) -> bool:
        return bool(self.policy.get("drc", False))

    def router_decodes(self) -> list[Group]:
        """Decode pools the stock router sends to: main decode (pdd, cdc_pd) or decode (idc_pd).
        Relay decode is left out: only a PDD-aware router (not upstream) can use it."""
        return [g for g in self.groups if g.role in ("main_decode", "decode")]

    def prefills(self) -> list[Group]:
        return [g for g in self.groups if g.role == "prefill"]


def load_plan(path: str | Path) -> dict:
    """A plan YAML/JSON file as a dict; one-line InputError for anything else."""
    from ..schema.io import read_yaml

    data = read_yaml(path)
    check_plan(data, str(path))
    return data


def check_plan(data: object, file: str | None = None) -> None:
    fix = "write one with `pdd-plan optimize --out PLAN.yaml`"
    if not isinstance(data, dict) or "plans" not in data or "inputs" not in data:
        raise InputError(file, None, "not a plan file (no 'plans' and 'inputs' at the top)", fix)
    if not isinstance(data["plans"], dict) or not data["plans"]:
        raise InputError(file, "plans", "no plans in the plan file", fix)
    if not isinstance(data["inputs"], dict):
        raise InputError(file, "inputs", "expected the scenario mapping", fix)
    for a, p in data["plans"].items():
        if not isinstance(p, dict) or not isinstance(p.get("instances"), list):
            raise InputError(file, f"plans.{a}.instances", "missing or not a list", fix)


def context(plan: dict, file: str | None = None):
    """The resolved scenario (model and GPU profiles) a plan was made from."""
    from ..resolve import resolve
    from ..schema import Scenario
    from ..schema.io import parse

    where = f"{file} (inputs)" if file else "plan inputs"
    sc = parse(Scenario, plan["inputs"], where)
    return resolve(sc, file or "")


def arch_plan(plan: dict, architecture: str, file: str | None = None) -> dict:
    if architecture not in ARCHITECTURES:
        raise InputError(
            None,
            "--architecture",
            f"unknown architecture '{architecture}'",
            f"use one of {', '.join(ARCHITECTURES)}",
        )
    plans = plan["plans"]
    if architecture not in plans:
        have = ", ".join(plans)
        why = (plan.get("infeasible") or {}).get(architecture)
        raise InputError(
            file,
            "--architecture",
            f"the plan has no '{architecture}' architecture"
            + (f" (infeasible: {why})" if why else f" (it has: {have})"),
            f"use one of {have}",
        )
    return plans[architecture]


def nodes_for(n_gpus: int, gpus_per_node: int) -> int:
    """Hosts per instance: the fewest that hold it with the same GPU count on each."""
    k = max(1, math.ceil(n_gpus / max(gpus_per_node, 1)))
    while n_gpus % k:
        k += 1
    return k


def _rows(p: dict, architecture: str, file: str | None) -> list[dict]:
    out = []
    for i, row in enumerate(p["instances"]):
        where = f"plans.{architecture}.instances[{i}]"
        if not isinstance(row, dict):
            raise InputError(file, where, "not a mapping", "re-run optimize --out")
        try:
            r = {k: int(row[k]) for k in _ROW_INTS}
            r.update(role=str(row["role"]), gpu=str(row["gpu"]), datacenter=str(row["datacenter"]))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(
                file, where, f"malformed instance row ({e})", "re-run optimize --out"
            ) from None
        if r["role"] not in ROLES:
            raise InputError(
                file, f"{where}.role", f"unknown role '{r['role']}'", f"use one of {ROLES}"
            )
        if r["count"] < 0 or min(r[k] for k in _ROW_INTS[1:]) < 1:
            raise InputError(file, where, "counts and parallel sizes must be positive", "")
        if r["count"] > 0:
            out.append(r)
    out.sort(key=lambda r: (ROLE_ORDER[r["role"]], r["datacenter"], r["gpu"]))
    if not any(r["role"] == "prefill" for r in out):
        raise InputError(file, f"plans.{architecture}.instances", "no prefill instances", "")
    if not any(r["role"] in ("main_decode", "decode") for r in out):
        raise InputError(file, f"plans.{architecture}.instances", "no decode instances", "")
    return out


def _rdma(role: str, architecture: str, has_relay: bool) -> bool:
    """KV moves over RDMA between the instance and all its peers."""
    if architecture == "idc_pd":
        return True
    if architecture == "pdd":
        return role == "relay_decode" or (role == "prefill" and has_relay)
    return False


def build(
    plan: dict,
    architecture: str = "pdd",
    options: EmitOptions | None = None,
    model: ModelProfile | None = None,
    gpus: dict[str, GPUProfile] | None = None,
    file: str | None = None,
) -> Deployment:
    """The deployment of one architecture of ``plan``. ``model``/``gpus``: resolved profiles
    (default: bundled profiles named by the plan)."""
    o = options or EmitOptions()
    check_plan(plan, file)
    p = arch_plan(plan, architecture, file)
    inputs = plan["inputs"]
    if model is None:
        model = profiles.model(str(inputs.get("model") or plan.get("model")), "inputs.model", file)
    rows = _rows(p, architecture, file)
    has_relay = any(r["role"] == "relay_decode" for r in rows)
    labels = node_labels()
    groups: list[Group] = []
    notes: list[str] = []
    for r in rows:
        g = (gpus or {}).get(r["gpu"]) or profiles.gpu(r["gpu"], "instances.gpu", file)
        gpn = int(g.interconnect.gpus_per_node)
        nodes = nodes_for(r["gpus_per_instance"], gpn)
        lab = labels.get(r["gpu"])
        known = lab is not None
        if lab is None:
            lab = {
                "resource": "amd.com/gpu" if "amd" in g.display_name.lower() else "nvidia.com/gpu",
                "label": "amd.com/gpu.product-name"
                if "amd" in g.display_name.lower()
                else "nvidia.com/gpu.product",
                "value": label_value(g.display_name.replace(" ", "-")),
            }
            notes.append(
                f"GPU '{r['gpu']}' has no known node label; its nodeSelector "
                f"{lab['label']}={lab['value']} is a guess from the profile's display name"
            )
        same = [x for x in rows if x["role"] == r["role"] and x["datacenter"] == r["datacenter"]]
        base = dns(r["role"])
        name = base if len(same) == 1 else f"{base}-{dns(r['gpu'])}"
        taken = {x.name for x in groups if x.datacenter == r["datacenter"]}
        k, nm = 2, name
        while nm in taken:
            nm, k = f"{name}-{k}", k + 1
        groups.append(
            Group(
                role=r["role"],
                gpu=r["gpu"],
                datacenter=r["datacenter"],
                count=r["count"],
                gpus_per_instance=r["gpus_per_instance"],
                tp=r["tp"],
                dp=r["dp"],
                ep=r["ep"],
                nodes=nodes,
                gpus_per_node=r["gpus_per_instance"] // nodes,
                name=nm,
                mem_fraction=float(g.efficiency.mem_fraction),
                rdma=_rdma(r["role"], architecture, has_relay),
                resource=lab["resource"],
                node_label=lab["label"],
                node_label_value=lab["value"],
                label_known=known,
            )
        )
    prefill_dc = next(g.datacenter for g in groups if g.role == "prefill")
    dcs = [prefill_dc] + sorted({g.datacenter for g in groups} - {prefill_dc})
    search = inputs.get("search") or {}
    tps = {g.tp for g in groups}
    return Deployment(
        scenario=str(plan.get("scenario") or inputs.get("name") or "plan"),
        model=model,
        model_path=o.model_path or model.hf_id or model.name,
        architecture=architecture,
        groups=groups,
        datacenters=dcs,
        router_dc=prefill_dc,
        chunk_tokens=int(search.get("prefill_chunk_tokens", 8192)),
        policy=dict(inputs.get("policy") or {}),
        routing=dict(p.get("routing") or {}),
        route_share=dict(p.get("route_share") or {}),
        line=p.get("line"),
        sla=dict(plan.get("sla") or inputs.get("sla") or {}),
        options=o,
        staging_buffer=model.attention.kind == "gqa" and len(tps) > 1,
        notes=notes,
    )
