"""From a typed plan to the deployment the emitters render: instance groups, nodes, hosts,
flags. The plan (``optimize`` output, or a plan file written by ``pdd-plan optimize --out``)
is an `outputs.plan.Plan`, validated once on load, so its rows here are already well formed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from pdd_plan import architectures
from pdd_plan.architectures import ROLE_ORDER
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.common import control_character
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.names import dns_label
from pdd_plan.outputs import plan as schema_plan
from pdd_plan.outputs.plan import ArchitecturePlan, InstanceGroup, Plan
from pdd_plan.perf.instance import Instance

ARCHITECTURES = architectures.names()  # the built-in ones, for --architecture help
DECODE_ROLES = ("main_decode", "decode")
DOMAIN = "pdd.local"  # placeholder DNS domain of the sglang target's hosts
TRANSFER_BACKENDS = ("nixl", "mooncake", "mooncake_tcp")
ENGINES = ("sglang", "vllm", "trtllm")
DYNAMO_APIS = ("v1beta1", "v1alpha1")
DYNAMO_TOPOLOGIES = ("one-cluster", "per-datacenter")
SGLANG_IMAGE = "lmsysorg/sglang:latest"  # runs both launch_server and sglang_router


def data_file(name: str) -> Path:
    return Path(str(resources.files("pdd_plan") / "emit" / "data" / name))


@lru_cache(maxsize=1)
def node_labels() -> dict[str, dict[str, str]]:
    return yaml.safe_load(data_file("gpu-node-labels.yaml").read_text(encoding="utf-8"))["gpus"]


def dns(s: str) -> str:
    """A DNS-1123 label from any name (the schema's, which refuses datacenters that share one)."""
    return dns_label(s)


def label_value(s: str) -> str:
    """A Kubernetes label value (<= 63 chars of [A-Za-z0-9-_.], alphanumeric at both ends)."""
    out = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(s))[:63].strip("-_.")
    return out or "x"


# a container image reference (registry[:port]/path[:tag][@digest]): the characters the OCI
# distribution spec's grammar allows, nothing a shell or YAML would read as syntax
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]*(@[A-Za-z0-9_+.-]+:[A-Fa-f0-9]+)?")


@dataclass(frozen=True)
class EmitOptions:
    """Deployment choices the plan does not make (all have documented defaults)."""

    model_path: str | None = None  # default: the model profile's hf_id (else its name)
    image: str | None = None  # default: SGLANG_IMAGE, or the target's runtime image (Dynamo)
    transfer_backend: str = "nixl"  # per peer: RDMA in a datacenter, TCP across (transfer.py)
    ib_device: str = "mlx5_0"  # --disaggregation-ib-device where KV moves over RDMA (mooncake)
    trust_remote_code: bool = False
    port: int = 30000
    bootstrap_port: int = 8998
    router_port: int = 8000
    dist_port: int = 20102  # --dist-init-addr port of multi-node instances
    prefill_policy: str = "cache_aware"
    decode_policy: str = "power_of_two"
    engine: str = "sglang"  # dynamo: the worker engine (kserve: vllm only)
    engine_version: str | None = None  # the flag table's version (default: the one there is)
    api_version: str = "v1beta1"  # dynamo: nvidia.com/v1beta1 | v1alpha1
    topology: str = "one-cluster"  # dynamo across datacenters: one-cluster | per-datacenter

    def __post_init__(self) -> None:
        for flag, v in (("--image", self.image), ("--model-path", self.model_path)):
            # written into shell scripts and YAML: a newline would start another command
            if v is not None and (not v.strip() or control_character(v) is not None):
                raise InputError(
                    None, flag, f"holds a control character or is empty: {v!r}", "one line"
                )
        if self.image is not None and not IMAGE_REF.fullmatch(self.image):
            raise InputError(
                None,
                "--image",
                f"not a container image reference: {self.image!r}",
                "e.g. lmsysorg/sglang:latest or registry:5000/team/sglang@sha256:<digest>",
            )
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", self.ib_device):
            raise InputError(
                None, "--ib-device", f"not a device name: {self.ib_device!r}", "e.g. mlx5_0"
            )
        for flag, value, ok in (
            ("--transfer-backend", self.transfer_backend, TRANSFER_BACKENDS),
            ("--engine", self.engine, ENGINES),
            ("--api-version", self.api_version, DYNAMO_APIS),
            ("--dynamo-topology", self.topology, DYNAMO_TOPOLOGIES),
        ):
            if value not in ok:
                what = flag.lstrip("-").replace("-", " ")
                raise InputError(
                    None, flag, f"unknown {what} '{value}'", f"use one of {', '.join(ok)}"
                )

    @property
    def sglang_image(self) -> str:
        return self.image or SGLANG_IMAGE


def _moe_options(model: ModelProfile, gpu: GPUProfile, r: InstanceGroup) -> dict:
    """The expert-parallel settings the perf model assumed for this row (perf/comm.py): DeepEP
    all-to-all when EP spans ranks, two-batch overlap where the engine default turns it on,
    redundant expert slots (with EPLB) when the row has them."""

    if model.ffn.moe is None or r.ep <= 1:
        return {}
    red = r.redundant_experts or 0
    inst = Instance(
        model, gpu, r.gpus_per_instance, tp=r.tp, ep=r.ep, dp=r.dp, redundant_experts=red
    )
    return {"moe_a2a": True, "two_batch_overlap": inst.tbo, "redundant_experts": red}


def _router_facts(model: ModelProfile, gpu: GPUProfile, r: InstanceGroup, chunk: int) -> dict:
    """What a router can be told from the perf model: one instance's peak prefill rate (one
    full chunk at no cached context, perf/grid.py prefill_times) and its KV capacity."""
    from pdd_plan.perf.grid import prefill_times  # the grid's kernels only when emitting

    inst = Instance(
        model,
        gpu,
        r.gpus_per_instance,
        tp=r.tp,
        ep=r.ep,
        dp=r.dp,
        redundant_experts=r.redundant_experts or 0,
    )
    t = float(prefill_times(inst, [chunk], [0], chunk)[0])
    return {
        "peak_prefill_tps": chunk / t if t > 0 else 0.0,
        "kv_tokens": float(inst.kv_capacity_tokens),
    }


@dataclass(frozen=True)
class LineSettings:
    """What the line model assumed about connections (read from the line profile)."""

    lanes_per_peer: int | None  # connections one transfer stripes over
    window_bytes: int | None  # socket buffer / window cap
    slow_start: str | None  # first_use | every_transfer
    source: str


def _field(obj: object, *names: str):
    """The first of ``names`` present on a profile object or mapping (the line profile's field
    names change as the line model grows; read defensively)."""
    for n in names:
        v = obj.get(n) if isinstance(obj, dict) else getattr(obj, n, None)
        if v is not None:
            return v
    return None


def line_settings(line_profile: object | None) -> LineSettings | None:
    if line_profile is None:
        return None
    lanes = _field(line_profile, "lanes_per_peer", "streams_per_transfer")
    window = _field(line_profile, "max_window_bytes", "window_bytes", "socket_buffer_bytes")
    slow = _field(line_profile, "slow_start", "slow_start_after_idle")
    name = _field(line_profile, "name") or "line"
    return LineSettings(
        lanes_per_peer=int(lanes) if lanes is not None else None,
        window_bytes=int(window) if window is not None else None,
        slow_start=str(slow) if slow is not None else None,
        source=f"line profile {name}",
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
    resource: str  # nvidia.com/gpu | amd.com/gpu
    node_label: str
    node_label_value: str
    label_known: bool
    moe_a2a: bool = False  # expert all-to-all over DeepEP (an MoE model with ep > 1)
    two_batch_overlap: bool = False  # the perf model's engine default for this shape
    redundant_experts: int = 0
    peak_prefill_tps: float = 0.0  # prompt tokens/s of one instance on full chunks, no cache
    kv_tokens: float = 0.0  # KV capacity of one instance, tokens

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
    line_settings: LineSettings | None = None  # what the line model assumed (transfer.py)
    # the scenario's `engine:` limits that it sets (schema/engine.py): the decode batch the
    # planner sized with, passed to the engines as their own flags (sglang.limit_flags)
    engine_limits: dict[str, int] = field(default_factory=dict)

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
        return [g for g in self.groups if g.role in DECODE_ROLES]

    def prefills(self) -> list[Group]:
        return [g for g in self.groups if g.role == "prefill"]


def load_plan(path: str | Path) -> Plan:
    """A plan YAML/JSON file, typed; one-line InputError for anything else."""
    return schema_plan.load_plan(path)


def context(plan: Plan, file: str | None = None):
    """The resolved scenario (model and GPU profiles) a plan was made from."""

    return build_context(plan.inputs, file or "")


def arch_plan(plan: Plan, architecture: str, file: str | None = None) -> ArchitecturePlan:
    if architecture not in architectures.names():
        raise InputError(
            None,
            "--architecture",
            f"unknown architecture '{architecture}'",
            f"use one of {', '.join(architectures.names())}",
        )
    return plan.arch(architecture, file)


def distinct_labels(datacenters: list[str], file: str | None) -> None:
    """File, object and host names carry ``dns(datacenter)``: two datacenters that share it
    (``dc-a``, ``DC_A``) would write one set of files over the other."""
    seen: dict[str, str] = {}
    for dc in datacenters:
        other = seen.setdefault(dns(dc), dc)
        if other != dc:
            raise InputError(
                file,
                "inputs.datacenters",
                f"datacenters '{other}' and '{dc}' both become '{dns(dc)}' in file, object and "
                "host names",
                "rename one of them in the scenario (letters, digits and '-') and re-run optimize",
            )


def nodes_for(n_gpus: int, gpus_per_node: int) -> int:
    """Hosts per instance: the fewest that hold it with the same GPU count on each."""
    k = max(1, math.ceil(n_gpus / max(gpus_per_node, 1)))
    while n_gpus % k:
        k += 1
    return k


def _rows(p: ArchitecturePlan, architecture: str, file: str | None) -> list[InstanceGroup]:
    """The plan's non-empty instance groups in role order; a plan needs prefill and decode."""
    out = sorted(
        (g for g in p.instances if g.count > 0),
        key=lambda g: (ROLE_ORDER[g.role], g.datacenter, g.gpu),
    )
    where = f"plans.{architecture}.instances"
    if not any(g.role == "prefill" for g in out):
        raise InputError(file, where, "no prefill instances", "re-run optimize --out")
    decode_role = architectures.get(architecture).decode_role
    if not any(g.role == decode_role for g in out):
        raise InputError(file, where, "no decode instances", "re-run optimize --out")
    return out


def build(
    plan: Plan,
    architecture: str = architectures.RELAY_ARCH,
    options: EmitOptions | None = None,
    model: ModelProfile | None = None,
    gpus: dict[str, GPUProfile] | None = None,
    file: str | None = None,
    lines: list | None = None,
) -> Deployment:
    """The deployment of one architecture of ``plan``. ``model``/``gpus``: resolved profiles
    (default: bundled profiles named by the plan)."""
    o = options or EmitOptions()
    p = arch_plan(plan, architecture, file)
    inputs = plan.inputs
    if model is None:
        model = profiles.model(inputs.model, "inputs.model", file)
    rows = _rows(p, architecture, file)
    labels = node_labels()
    groups: list[Group] = []
    notes: list[str] = []
    for r in rows:
        g = (gpus or {}).get(r.gpu) or profiles.gpu(r.gpu, "instances.gpu", file)
        gpn = int(g.interconnect.gpus_per_node)
        nodes = nodes_for(r.gpus_per_instance, gpn)
        lab = labels.get(r.gpu)
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
                f"GPU '{r.gpu}' has no known node label; its nodeSelector "
                f"{lab['label']}={lab['value']} is a guess from the profile's display name"
            )
        same = [x for x in rows if x.role == r.role and x.datacenter == r.datacenter]
        base = dns(r.role)
        name = base if len(same) == 1 else f"{base}-{dns(r.gpu)}"
        taken = {x.name for x in groups if x.datacenter == r.datacenter}
        k, nm = 2, name
        while nm in taken:
            nm, k = f"{name}-{k}", k + 1
        groups.append(
            Group(
                role=r.role,
                gpu=r.gpu,
                datacenter=r.datacenter,
                count=r.count,
                gpus_per_instance=r.gpus_per_instance,
                tp=r.tp,
                dp=r.dp,
                ep=r.ep,
                nodes=nodes,
                gpus_per_node=r.gpus_per_instance // nodes,
                name=nm,
                mem_fraction=float(g.efficiency.mem_fraction),
                resource=lab["resource"],
                node_label=lab["label"],
                node_label_value=lab["value"],
                label_known=known,
                **_moe_options(model, g, r),
                **_router_facts(model, g, r, inputs.search.prefill_chunk_tokens),
            )
        )
    prefill_dc = next(g.datacenter for g in groups if g.role == "prefill")
    dcs = [prefill_dc] + sorted({g.datacenter for g in groups} - {prefill_dc})
    distinct_labels(dcs, file)
    tps = {g.tp for g in groups}
    return Deployment(
        scenario=plan.scenario or inputs.name,
        model=model,
        model_path=o.model_path or model.hf_id or model.name,
        architecture=architecture,
        groups=groups,
        datacenters=dcs,
        router_dc=prefill_dc,
        chunk_tokens=inputs.search.prefill_chunk_tokens,
        # the render model keeps plain mappings: the routing file and README print them as is
        policy=inputs.policy.model_dump(mode="json"),
        routing=p.routing.model_dump(mode="json"),
        route_share=p.route_share.model_dump(mode="json"),
        line=p.line.model_dump(mode="json") if p.line is not None else None,
        sla=plan.sla.model_dump(mode="json"),
        options=o,
        staging_buffer=model.attention.kind == "gqa" and len(tps) > 1,
        notes=notes,
        line_settings=line_settings(_line_profile(p, lines)),
        engine_limits=inputs.engine.model_dump(exclude_none=True) if inputs.engine else {},
    )


def _line_profile(p: ArchitecturePlan, lines: list | None):
    """The line profile the plan's line was priced and modelled with: from the scenario's
    resolved lines, else the bundled profile of that name; None if neither has it."""
    if p.line is None:
        return None
    sku = p.line.sku
    for x in lines or []:
        if getattr(x, "name", None) == sku:
            return x
    if sku in profiles.bundled_names("lines"):
        return profiles.line(sku)
    return None
