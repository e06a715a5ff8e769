"""Bytes that cross the line, the line as configured (SKU x count, its pool of connections),
a transfer alone on it, and transfer times over RDMA inside a datacenter.

Each transfer holds ``k = streams_per_transfer`` connections of a finite pool and is capped at
``k`` x one TCP connection's rate (:mod:`tcp`); the queue the transfers form is
:mod:`limited_ps`, and their delay is put together in one place,
:func:`pdd_plan.latency.line.law.transfer_law`."""

from __future__ import annotations

import math
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

    def slow_start_s(
        self, size_bytes: np.ndarray, start_window_bytes: np.ndarray | None = None
    ) -> np.ndarray:
        """Slow-start penalty of a transfer whose ``k`` connections start at
        ``start_window_bytes`` (default: the initial window): they ramp up side by side, each
        carrying ``size / k`` toward one connection's rate."""
        x = np.asarray(size_bytes, dtype=float) / self.streams
        return tcp.slow_start_s(x, self.connection_bytes_s, self.sku, start_window_bytes)

    def idle_slow_start_s(self, size_bytes: np.ndarray, idle_s: np.ndarray) -> np.ndarray:
        """``slow_start: after_idle``: the penalty of transfers whose connections sat idle
        ``idle_s`` (``inf``: never used), restarted as Linux restarts them
        (:func:`tcp.restart_halvings`, :func:`tcp.restart_window_bytes`)."""
        m = tcp.restart_halvings(idle_s, self.sku)
        w0 = tcp.restart_window_bytes(m, self.connection_bytes_s, self.sku)
        return self.slow_start_s(size_bytes, w0)

    def expected_idle_slow_start_s(
        self, size_bytes: np.ndarray, sender_rate: float, busy_s: float
    ) -> np.ndarray:
        """The mean ``after_idle`` penalty when a sender's transfers come as a Poisson stream
        of ``sender_rate`` a second, each keeping the sender's lanes busy ``busy_s`` on average:
        its lanes are idle at an arrival with chance ``exp(-rate busy)`` (M/G/inf, whatever
        the holding times' law) and then idle for an exponential time, so idle past ``j``
        RTOs with chance ``exp(-rate (busy + j RTO))``; ``j`` halvings restart the window at
        :func:`tcp.restart_window_bytes`. A sender's transfers are spaced by at least their
        own prefill, so they overlap less than Poisson ones: the replay finds its lanes idle
        more often (47% against this law's 38% on 6 senders at 0.67 transfers/s each), and
        this errs toward fewer restarts (13 ms of mean transfer time against the replay's 17)."""
        x = np.asarray(size_bytes, dtype=float)
        sku, rto = self.sku, self.sku.rto_s
        if sender_rate <= 0:  # a sender that never sends again: every transfer starts cold
            return self.slow_start_s(x)
        iw = float(sku.initial_window_segments * sku.mss_bytes)
        w = self.connection_bytes_s * sku.rtt_ms / 1e3
        top = max(int(math.ceil(math.log2(w / iw))), 1) if w > iw else 1
        out = np.zeros_like(x)
        for j in range(1, top + 1):  # P(exactly j halvings); the last, j or more (at IW)
            p_ge = math.exp(-sender_rate * (j * rto + busy_s))
            p = p_ge if j == top else p_ge - math.exp(-sender_rate * ((j + 1) * rto + busy_s))
            if p > 0:
                w0 = tcp.restart_window_bytes(np.full_like(x, j), self.connection_bytes_s, sku)
                out += p * self.slow_start_s(x, w0)
        return out

    def every_transfer_slow_start_s(self, size_bytes: np.ndarray) -> np.ndarray:
        """The penalty every transfer pays (``slow_start: every_transfer``), else zeros: with
        persistent connections only each connection's first transfer ramps up, which steady
        state never sees (``after_idle``: :meth:`expected_idle_slow_start_s`)."""
        x = np.asarray(size_bytes, dtype=float)
        if self.sku.slow_start == "every_transfer":
            return self.slow_start_s(x)
        return np.zeros_like(x)

    def pre_line_s(self, size_bytes: np.ndarray) -> np.ndarray:
        """Before a transfer reaches the line: its setup and the sender's copy out of GPU
        memory (fixed, plus ``size / sender_copy_gbps`` when given)."""
        x = np.asarray(size_bytes, dtype=float)
        sku = self.sku
        t = np.full_like(x, (sku.setup_ms + sku.sender_copy_ms) / 1e3)
        if sku.sender_copy_gbps is not None:
            t = t + x / (sku.sender_copy_gbps * 1e9 / 8.0)
        return t

    def utilization(self, rho: float) -> float:
        """The line's total utilization (other tenants' and ours) when our transfers use
        ``rho`` of :attr:`usable_bytes_s`."""
        bg = self.sku.background_load
        raw = self.capacity_bytes_s / (1.0 - bg)
        return bg + rho * self.usable_bytes_s / raw if math.isfinite(raw) else bg

    def loaded(self, rho: float) -> tuple[LineConfig, float]:
        """This line at our utilization ``rho`` of :attr:`usable_bytes_s`: its loss at the
        line's total utilization (``congestive_loss_rate``), so one connection's rate, and
        ``rho`` of the loaded line's usable capacity (more when the pool binds). Itself
        without congestive loss (at ``rho`` 0: other tenants' load alone). Memoized, the SKU kept alive (the law's memos key on it)."""
        sku = self.sku
        if sku.congestive_loss_rate <= 0:
            return self, rho
        u = self.utilization(max(rho, 0.0))
        key = (id(sku), self.count, float(u))
        hit = _LOADED.get(key)
        if hit is None or hit[0] is not sku:
            if len(_LOADED) > 4096:
                _LOADED.clear()
            upd = {"loss_rate": sku.loss_at(u), "congestive_loss_rate": 0.0}
            hit = (sku, LineConfig(sku.model_copy(update=upd), self.count))
            _LOADED[key] = hit
        cfg = hit[1]
        return cfg, rho * self.usable_bytes_s / cfg.usable_bytes_s if rho > 0 else rho


_LOADED: dict[tuple, tuple[LineSKU, LineConfig]] = {}


def bare_transfer_s(
    size_bytes: np.ndarray, line: LineConfig, ramp_s: np.ndarray | None = None
) -> np.ndarray:
    """A transfer alone on the line: its setup and the sender's copy, at ``k`` connections'
    rate (or the line's), plus slow start (``ramp_s``; default: where every transfer pays it),
    plus one RTT for delivery."""
    x = np.asarray(size_bytes, dtype=float)
    rate = min(line.capacity_bytes_s, line.flow_cap_bytes_s)
    ramp = line.every_transfer_slow_start_s(x) if ramp_s is None else ramp_s
    return line.pre_line_s(x) + x / rate + ramp + line.sku.rtt_ms / 1e3


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
