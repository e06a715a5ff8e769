"""SGLang server and router command lines (runtime.md §1), and per-datacenter launch scripts.

A flag list is ``[(flag, values), ...]``; ``values`` is a tuple (empty for a boolean flag).
Scripts write ``--flag value``; Kubernetes args write ``--flag=value`` for one-value flags and
separate items for multi-value ones (``--prefill URL PORT``), as runtime.md's examples do.
"""

from __future__ import annotations

import re
import shlex

from pdd_plan.emit import transfer
from pdd_plan.emit.plan import DOMAIN, Deployment, Group, dns

Flags = list[tuple[str, tuple[str, ...]]]

SERVER = ("python", "-m", "sglang.launch_server")
ROUTER = ("python", "-m", "sglang_router.launch_router")
STAGING_ENV = "SGLANG_DISAGG_STAGING_BUFFER"


def server_flags(dep: Deployment, g: Group) -> Flags:
    """Everything but host/port and the multi-node flags (they differ per target)."""
    o = dep.options
    f: Flags = [("--model-path", (dep.model_path,))]
    if o.trust_remote_code:
        f.append(("--trust-remote-code", ()))
    backend = transfer.sglang_backend(dep, g)
    f += [
        ("--disaggregation-mode", (g.mode,)),
        ("--disaggregation-transfer-backend", (backend,)),
        ("--disaggregation-bootstrap-port", (str(o.bootstrap_port),)),
    ]
    if backend == "mooncake":  # RDMA only: the instance's peers are all in its datacenter
        f.append(("--disaggregation-ib-device", (o.ib_device,)))
    if g.role == "main_decode" and dep.drc:
        f.append(("--disaggregation-decode-enable-radix-cache", ()))
    f.append(("--tp-size", (str(g.tp),)))
    if g.dp > 1:
        f += [("--dp-size", (str(g.dp),)), ("--enable-dp-attention", ())]
    if g.ep > 1:
        f.append(("--ep-size", (str(g.ep),)))
    f += moe_flags(g)
    f.append(("--mem-fraction-static", (f"{g.mem_fraction:g}",)))
    if g.role == "prefill":
        # the plan's chunk is one DP-attention group's (perf/roofline.py); SGLang divides the
        # flag by dp_size under DP attention (server_args.py), so it is written times dp
        f.append(("--chunked-prefill-size", (str(dep.chunk_tokens * g.dp),)))
    f += limit_flags(dep, g)
    if dep.model.page_size > 1:
        f.append(("--page-size", (str(dep.model.page_size),)))
    return f


def limit_flags(dep: Deployment, g: Group) -> Flags:
    """The scenario's engine limits on a decode instance, as SGLang's flags (runtime.md §1.1),
    so that the engine runs the batch the planner sized it with (perf/engine_limits.py).
    `--max-running-requests` is the whole instance's (SGLang divides it among the attention-DP
    ranks, as the planner does); `--cuda-graph-max-bs` is one rank's, as the scenario's is; the
    scenario's token budget is one scheduler's, and SGLang's `--chunked-prefill-size` is the
    instance's, divided by dp_size under DP attention (server_args.py: `chunked_prefill_size //
    dp_size`), so it is written times dp. Prefill instances keep the plan's prefill chunk
    (search.prefill_chunk_tokens); the limits bound the decode batch only. A limit the scenario
    leaves out is left to SGLang's default, which is what the planner assumed
    (data/profiles/runtime/engines.yaml)."""
    lim = dep.engine_limits
    if g.role == "prefill" or not lim:
        return []
    f: Flags = []
    if "max_running_requests" in lim:
        f.append(("--max-running-requests", (str(lim["max_running_requests"]),)))
    if "cuda_graph_max_batch" in lim:
        f.append(("--cuda-graph-max-bs", (str(lim["cuda_graph_max_batch"]),)))
    if "max_num_tokens" in lim:
        f.append(("--chunked-prefill-size", (str(lim["max_num_tokens"] * g.dp),)))
    return f


def moe_flags(g: Group) -> Flags:
    """DeepEP all-to-all (normal kernels for prefill, low-latency for decode, as perf/comm.py
    models them), two-batch overlap and redundant experts with EPLB, as the plan assumed."""
    if not g.moe_a2a:
        return []
    mode = "normal" if g.role == "prefill" else "low_latency"
    f: Flags = [("--moe-a2a-backend", ("deepep",)), ("--deepep-mode", (mode,))]
    if g.two_batch_overlap:
        f.append(("--enable-two-batch-overlap", ()))
    if g.redundant_experts:
        f += [("--ep-num-redundant-experts", (str(g.redundant_experts),)), ("--enable-eplb", ())]
    return f


def listen_flags(dep: Deployment) -> Flags:
    return [("--host", ("0.0.0.0",)), ("--port", (str(dep.options.port),))]


def multinode_flags(nnodes: str, rank: str, leader: str, port: int) -> Flags:
    return [
        ("--dist-init-addr", (f"{leader}:{port}",)),
        ("--nnodes", (nnodes,)),
        ("--node-rank", (rank,)),
    ]


def router_flags(dep: Deployment, prefill_urls: list[str], decode_urls: list[str]) -> Flags:
    o = dep.options
    f: Flags = [("--pd-disaggregation", ())]
    # the bootstrap port always explicit: with none, decode would use its own setting (runtime.md)
    f += [("--prefill", (u, str(o.bootstrap_port))) for u in prefill_urls]
    f += [("--decode", (u,)) for u in decode_urls]
    f += [
        ("--prefill-policy", (o.prefill_policy,)),
        ("--decode-policy", (o.decode_policy,)),
        ("--host", ("0.0.0.0",)),
        ("--port", (str(o.router_port),)),
    ]
    return f


APPEND_FLAGS = ("--prefill", "--decode")  # repeated URL flags: separate items, as upstream


def tokens(flags: Flags, eq: bool = False) -> list[str]:
    out: list[str] = []
    for flag, vals in flags:
        if eq and len(vals) == 1 and flag not in APPEND_FLAGS:
            out.append(f"{flag}={vals[0]}")
        else:
            out.append(flag)
            out.extend(vals)
    return out


# ------------------------------------------------------------------ hosts (sglang target)
def host(g: Group, i: int, node: int = 0) -> str:
    """Placeholder FQDN of node `node` of instance `i` (node 0 serves HTTP and bootstrap)."""
    suffix = "" if node == 0 else f"-node{node}"
    return f"{g.name}-{i}{suffix}.{g.dc}.{DOMAIN}"


def router_host(dep: Deployment) -> str:

    return f"router.{dns(dep.router_dc)}.{DOMAIN}"


def url(dep: Deployment, g: Group, i: int) -> str:
    return f"http://{host(g, i)}:{dep.options.port}"


def script_router_flags(dep: Deployment) -> Flags:
    pre = [url(dep, g, i) for g in dep.prefills() for i in range(g.count)]
    dec = [url(dep, g, i) for g in dep.router_decodes() for i in range(g.count)]
    return router_flags(dep, pre, dec)


def instance_commands(dep: Deployment, g: Group) -> list[tuple[str, int, int, list[str]]]:
    """(host, instance, node, argv) for every node of every instance of the group."""
    out = []
    for i in range(g.count):
        for node in range(g.nodes):
            f = server_flags(dep, g) + listen_flags(dep)
            if g.nodes > 1:
                f += multinode_flags(str(g.nodes), str(node), host(g, i), dep.options.dist_port)
            out.append((host(g, i, node), i, node, [*SERVER, *tokens(f)]))
    return out


def script(dep: Deployment, dc: str) -> str:
    """Launch script of one datacenter: `launch-<dc>.sh HOST` runs that host's command."""

    groups = dep.groups_in(dc)
    branches: list[tuple[str, list[str], list[str]]] = []  # (host, comments, argv)
    for g in groups:
        for h, i, node, argv in instance_commands(dep, g):
            c = [
                f"pdd.role={g.role} pdd.datacenter={g.datacenter} instance {i} of {g.count}, "
                f"{g.gpus_per_instance} x {g.gpu}"
                + (f", node {node} of {g.nodes} ({g.gpus_per_node} GPUs)" if g.nodes > 1 else "")
            ]
            if g.role == "relay_decode":
                c.append(
                    "relay decode: a plain SGLang decode instance; upstream has no relay role "
                    "(see README.md, pdd-routing.yaml)"
                )
            branches.append((h, c, argv))
    if dc == dep.router_dc:
        branches.append(
            (
                router_host(dep),
                ["pdd.role=router: sglang_router in PD mode (prefill + main decode)"],
                [*ROUTER, *tokens(script_router_flags(dep))],
            )
        )
    hosts = [b[0] for b in branches]
    lines = [
        "#!/usr/bin/env bash",
        f"# Generated by `pdd-plan emit --target sglang`: scenario {dep.scenario}, "
        f"architecture {dep.architecture}, datacenter {dc}.",
        f"# Run on each host below as `./launch-{dns(dc)}.sh HOST` (default HOST: this host's FQDN).",
        f"# Host names are placeholders (*.{dns(dc)}.{DOMAIN}); README.md says how to map them.",
        "set -euo pipefail",
        "",
    ]
    if dep.staging_buffer:
        lines += [
            "# prefill and decode TP differ on a non-MLA model: SGLang needs the staging buffer",
            f"export {STAGING_ENV}=1",
            "",
        ]
    lanes = {e["value"] for g in groups for e in transfer.env(dep, g)}
    if lanes:
        lines += [
            "# Mooncake TCP lanes per peer, as the line model assumed (README.md, KV transfer)",
            f"export {transfer.LANES_ENV}={min(lanes)}",
            "",
        ]
    lines += ['host="${1:-$(hostname -f)}"', 'case "$host" in']
    for h, comments, argv in branches:
        lines.append(f"  {h})")
        lines += [f"    # {c}" for c in comments]
        lines.append(f"    exec {shlex.join(argv)}")
        lines.append("    ;;")
    lines += [
        "  *)",
        f"    echo \"unknown host '$host'; hosts: {' '.join(hosts)}\" >&2",
        "    exit 2",
        "    ;;",
        "esac",
        "",
    ]
    return "\n".join(lines)


def commands_in_script(text: str) -> list[list[str]]:
    """The argv of every `exec ...` line of an emitted launch script (shlex-split)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("exec "):
            out.append(shlex.split(s)[1:])
    return out


# the comment above each server command of a launch script: "... instance 0 of 5, 16 x h100"
_INSTANCE_GPUS = re.compile(r"# pdd\.role=\S+ .*instance \d+ of \d+, (\d+) x ")


def commands_with_gpus(text: str) -> list[tuple[list[str], int | None]]:
    """(argv, GPUs of the instance) of every `exec ...` line of an emitted launch script; the
    GPUs come from the comment of its `case` branch (None when it has none, e.g. the router)."""
    out: list[tuple[list[str], int | None]] = []
    gpus: int | None = None
    for line in text.splitlines():
        s = line.strip()
        if s.endswith(")") and not s.startswith("#"):  # a new case branch
            gpus = None
        m = _INSTANCE_GPUS.match(s)
        if m:
            gpus = int(m.group(1))
        if s.startswith("exec "):
            out.append((shlex.split(s)[1:], gpus))
    return out
