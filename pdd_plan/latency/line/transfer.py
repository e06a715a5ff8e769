"""Bytes that cross the line, the line as configured (SKU x count, its pool of connections),
a transfer alone on it, and transfer times over RDMA inside a datacenter.

Each transfer holds ``k = streams_per_transfer`` connections of a finite pool and is capped at
``k`` x one TCP connection's rate (:mod:`tcp`); the queue the transfers form is
:mod:`limited_ps`, and their delay is put together in one place,
:func:`pdd_plan.latency.line.law.transfer_law`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.inputs.schema.gpu import DEFAULT_RDMA_LATENCY_MS, GPUProfile
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.latency.line import tcp
from pdd_plan.perf import layers


def line_bytes(
    model: ModelProfile, input_tokens: np.ndarray, hit_d: np.ndarray, drc: bool
) -> np.ndarray:
    """KV bytes P sends to MD: the tokens MD lacks (all of them without DRC) plus fixed state."""
    t = np.asarray(input_tokens, dtype=float)
    held = np.asarray(hit_d, dtype=float) * t if drc else np.zeros_like(t)
    per_tok = layers.kv_bytes_per_token(model)
    fixed = np.asarray(layers.kv_bytes(model, t)) - per_tok * t  # window state always travels
    return per_tok * (t - held) + fixed


@dataclass(frozen=True)
class LineConfig:
    sku: LineSKU
    count: int

    @property
    def capacity_bytes_s(self) -> float:
        """The lines' goodput (what the line itself can carry)."""
        return self.sku.bytes_per_s * self.count

    @property
    def connections(self) -> int:
        """TCP connections of the transfer pool, all lines together."""
        return self.sku.connections * self.count

    @property
    def streams(self) -> int:
        """Connections one transfer holds (``streams_per_transfer``)."""
        return self.sku.streams_per_transfer

    @property
    def pool(self) -> int:
        """Transfers in flight at once: ``floor(connections / streams)`` per line (a transfer
        needs all its ``k`` connections), the M/G/c pool's servers."""
        return self.sku.connections // self.streams * self.count

    @property
    def connection_bytes_s(self) -> float:
        """One TCP connection's payload rate over this path (:func:`tcp.flow_rate_bytes_s`;
        ``per_connection_gbps`` overrides the path model)."""
        return tcp.flow_rate_bytes_s(self.sku)

    @property
    def flow_cap_bytes_s(self) -> float:
        """One transfer's ceiling: ``k`` connections at :attr:`connection_bytes_s` each (its share
        of the line caps it further, in the PS law and in the simulator)."""
        return self.streams * self.connection_bytes_s

    @property
    def usable_bytes_s(self) -> float:
        """What the line and its pool can carry: ``min(capacity, pool x k x connection rate)``."""
        return min(self.capacity_bytes_s, self.pool * self.flow_cap_bytes_s)

    @property
    def cost_per_hour(self) -> float:
        return self.sku.cost_per_hour * self.count

    @property
    def gbps(self) -> float:
        return self.sku.gbps * self.count

    def slow_start_s(self, size_bytes: np.ndarray) -> np.ndarray:
        """Slow-start penalty of a transfer on fresh connections: its ``k`` connections ramp up
        side by side, each carrying ``size / k`` toward one connection's rate."""
        x = np.asarray(size_bytes, dtype=float) / self.streams
        return tcp.slow_start_s(x, self.connection_bytes_s, self.sku)

    def every_transfer_slow_start_s(self, size_bytes: np.ndarray) -> np.ndarray:
        """The penalty every transfer pays (``slow_start: every_transfer``), else zeros: with
        persistent connections only each connection's first transfer ramps up, which steady
        state never sees."""
        x = np.asarray(size_bytes, dtype=float)
        if self.sku.slow_start == "every_transfer":
            return self.slow_start_s(x)
        return np.zeros_like(x)


def bare_transfer_s(size_bytes: np.ndarray, line: LineConfig) -> np.ndarray:
    """A transfer alone on the line: at ``k`` connections' rate (or the line's), plus slow start
    where every transfer pays it, plus one RTT for delivery."""
    x = np.asarray(size_bytes, dtype=float)
    rate = min(line.capacity_bytes_s, line.flow_cap_bytes_s)
    return x / rate + line.every_transfer_slow_start_s(x) + line.sku.rtt_ms / 1e3


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
