"""Bytes that cross the line, and transfer times over the line and over RDMA (DESIGN §4.3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .perf import arch
from .queueing import ps_response_time
from .schema.gpu import DEFAULT_RDMA_LATENCY_MS, GPUProfile
from .schema.line import LineSKU
from .schema.model import ModelProfile


def line_bytes(
    model: ModelProfile, input_tokens: np.ndarray, hit_d: np.ndarray, drc: bool
) -> np.ndarray:
    """KV bytes P sends to MD: the tokens MD lacks (all of them without DRC) plus fixed state."""
    t = np.asarray(input_tokens, dtype=float)
    held = np.asarray(hit_d, dtype=float) * t if drc else np.zeros_like(t)
    per_tok = arch.kv_bytes_per_token(model)
    fixed = np.asarray(arch.kv_bytes(model, t)) - per_tok * t  # window state always travels
    return per_tok * (t - held) + fixed


@dataclass(frozen=True)
class LineConfig:
    sku: LineSKU
    count: int

    @property
    def capacity_bytes_s(self) -> float:
        return self.sku.bytes_per_s * self.count

    @property
    def flow_cap_bytes_s(self) -> float:
        """One transfer's ceiling: a TCP flow cap, else one line's rate."""
        g = self.sku.per_connection_gbps or self.sku.gbps
        return min(g, self.sku.gbps) * 1e9 / 8 * self.sku.tcp_efficiency

    @property
    def cost_per_hour(self) -> float:
        return self.sku.cost_per_hour * self.count

    @property
    def gbps(self) -> float:
        return self.sku.gbps * self.count


def line_transfer_s(size_bytes: np.ndarray, line: LineConfig, rho: float) -> np.ndarray:
    """Mean transfer time of a `size`-byte KV over the shared line at utilization rho.

    Processor sharing over the pooled capacity (M/G/1-PS), never faster than one flow's cap,
    plus one RTT for the request/ack handshake.
    """
    x = np.asarray(size_bytes, dtype=float)
    ps = ps_response_time(x, line.capacity_bytes_s, rho)
    return np.maximum(ps, x / line.flow_cap_bytes_s) + line.sku.rtt_ms / 1e3


def rdma_transfer_s(
    size_bytes: np.ndarray,
    gpus: int,
    nic_gbps: float,
    efficiency: float,
    latency_s: float = DEFAULT_RDMA_LATENCY_MS / 1e3,
) -> np.ndarray:
    """KV copy inside a datacenter: every sending GPU pushes its shard through its own NIC,
    plus a fixed per-transfer latency (the GPU profile's ``interconnect.rdma_latency_ms``)."""
    bw = gpus * nic_gbps * 1e9 / 8 * efficiency
    return np.asarray(size_bytes, dtype=float) / bw + latency_s


def gpu_rdma_transfer_s(size_bytes: np.ndarray, gpu: GPUProfile, gpus: int) -> np.ndarray:
    """:func:`rdma_transfer_s` from ``gpus`` GPUs of ``gpu``, with its profile's NIC rate,
    communication efficiency and RDMA latency."""
    ic = gpu.interconnect
    return rdma_transfer_s(
        size_bytes, gpus, ic.rdma_gbps_per_gpu, gpu.efficiency.comm_efficiency, ic.rdma_latency_s
    )
