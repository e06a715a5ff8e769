"""Which KV transfer backend each instance gets, so that nothing that sends across the line is
left on an RDMA-only transport, and the connection and kernel settings the line model assumed.

The leased line between the datacenters is Ethernet without RDMA (pdd-facts.md). Two kinds of
choice exist:

* per peer: NIXL over UCX. UCX picks a transport per endpoint pair (RDMA verbs where both ends
  share a fabric, TCP where they do not), so one setting serves the RDMA hop inside a datacenter
  and the TCP hop across the line. This is the default for every engine.
* per instance: SGLang's Mooncake backend binds one protocol per transfer engine. ``mooncake``
  is RDMA only; ``mooncake_tcp`` (runtime.md §1.1: rewritten to ``mooncake`` with
  ``MC_FORCE_TCP=1``, ib device cleared) is TCP for everything the instance sends or receives.
  When the user asks for ``mooncake``, every instance with a KV peer in another datacenter gets
  ``mooncake_tcp`` (both ends of a hop must speak the same protocol), and the README says that
  its hops inside the datacenter (prefill to relay decode) then run over TCP too.
"""

from __future__ import annotations

from pdd_plan.emit.plan import Deployment, Group, LineSettings

PER_PEER = "nixl"
RDMA_ONLY = ("mooncake",)  # a backend that cannot reach a peer without RDMA
SLOW_START = {  # the line profile's slow_start, and the kernel setting it corresponds to
    "first_use": ", and no slow start on a connection reused after idle",
    "after_idle": ", and slow start after idle as Linux does by default",
    "every_transfer": ", and slow start on every transfer (the closest setting: after idle)",
}
LANES_ENV = "MC_TCP_LANES_PER_PEER"  # Mooncake TCP transport, 1-16 (line profile source)

# KV flows between roles (prefill sends to decode pools; the relay hands off to main decode)
KV_PEERS = {
    "prefill": ("relay_decode", "main_decode", "decode"),
    "relay_decode": ("prefill", "main_decode"),
    "main_decode": ("prefill", "relay_decode"),
    "decode": ("prefill",),
}


def crosses_line(dep: Deployment, g: Group) -> bool:
    """Whether the group sends or receives KV from a peer in another datacenter."""
    peers = KV_PEERS.get(g.role, ())
    return any(x.role in peers and x.datacenter != g.datacenter for x in dep.groups)


def sglang_backend(dep: Deployment, g: Group) -> str:
    """``--disaggregation-transfer-backend`` of one SGLang instance."""
    b = dep.options.transfer_backend
    if b in RDMA_ONLY and crosses_line(dep, g):
        return "mooncake_tcp"
    return b


def rdma_only(backend: str) -> bool:
    return backend in RDMA_ONLY


def tcp_forced(dep: Deployment) -> list[Group]:
    """Groups whose every hop runs over TCP because their per-instance backend was forced to
    mooncake_tcp by a peer across the line."""
    return [g for g in dep.groups if sglang_backend(dep, g) != dep.options.transfer_backend]


def env(dep: Deployment, g: Group) -> list[dict]:
    """Container environment for the transfer settings of one instance (Mooncake TCP lanes
    where the instance runs mooncake_tcp)."""
    s = dep.line_settings
    if s is None or s.lanes_per_peer is None or sglang_backend(dep, g) != "mooncake_tcp":
        return []
    return [{"name": LANES_ENV, "value": str(max(1, min(16, s.lanes_per_peer)))}]


def kernel_lines(s: LineSettings) -> list[str]:
    """sysctl settings the line model assumed on hosts that send across the line."""
    out = []
    if s.window_bytes is not None:
        w = s.window_bytes
        out += [
            f"net.ipv4.tcp_wmem = 4096 16384 {w}",
            f"net.ipv4.tcp_rmem = 4096 131072 {w}",
        ]
    if s.slow_start is not None:
        idle = 0 if s.slow_start == "first_use" else 1
        out.append(f"net.ipv4.tcp_slow_start_after_idle = {idle}")
    return out


def readme_section(dep: Deployment, engine: str = "sglang") -> list[str]:
    """The README's KV transfer section: backend per instance, connection and kernel settings."""
    o = dep.options
    crossing = sorted({g.role for g in dep.groups if crosses_line(dep, g)})
    L = ["## KV transfer", ""]
    if engine != "sglang" or o.transfer_backend == PER_PEER:
        L.append(
            "Transfer backend: NIXL over UCX on every instance. UCX picks a transport per peer: "
            "RDMA inside a datacenter, TCP across the line (which has no RDMA)."
        )
    else:
        L.append(f"Transfer backend asked for: `{o.transfer_backend}`.")
    forced = tcp_forced(dep) if engine == "sglang" else []
    if forced:
        L.append(
            "Mooncake binds one protocol per instance and RDMA cannot cross the line, so every "
            "instance with a KV peer in another datacenter runs `mooncake_tcp`: "
            + ", ".join(f"{g.role} in {g.datacenter}" for g in forced)
            + "."
        )
        if any(g.role == "relay_decode" for g in forced):
            L.append(
                "Their hops inside a datacenter (prefill to relay decode) run over TCP too; "
                "choose `--transfer-backend nixl` to keep those on RDMA."
            )
    if o.transfer_backend == "mooncake" and engine == "sglang":
        rdma = sorted({g.role for g in dep.groups if sglang_backend(dep, g) == "mooncake"})
        if rdma:
            L.append(
                f"`--disaggregation-ib-device {o.ib_device}` (a placeholder: your HCAs, see "
                "`ibv_devices`) is set on the instances that stay on RDMA: " + ", ".join(rdma) + "."
            )
    if not crossing:
        L += ["", "All KV moves within one datacenter."]
        return L
    s = dep.line_settings
    L += ["", "### Across the line", ""]
    L.append(f"Instances with a KV peer across the line: {', '.join(crossing)}.")
    if s is None:
        L.append("The plan names no line profile: no connection settings to carry over.")
        return L
    if s.lanes_per_peer is not None:
        L.append(
            f"The line model ({s.source}) striped one KV transfer over {s.lanes_per_peer} "
            "TCP connections per peer (Mooncake's lanes per peer). "
            + (
                f"`{LANES_ENV}={s.lanes_per_peer}` is set on the instances running `mooncake_tcp`."
                if forced
                else "NIXL over UCX has no lanes-per-peer setting: one transfer's rate across "
                "the line may differ from what the plan assumed (measure it with "
                "`pdd-plan line calibrate`)."
            )
        )
    k = kernel_lines(s)
    if k:
        L += [
            "",
            "Kernel settings the line model assumed on every host that sends across the line "
            "(`sysctl -w`, or a file under /etc/sysctl.d): socket buffer maxima at the "
            "window it used (larger ones give more per connection than planned)"
            + SLOW_START.get(s.slow_start or "", "")
            + ":",
            "",
            "```",
            *k,
            "```",
        ]
    return L
