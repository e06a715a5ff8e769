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
        self,
        size_bytes: np.ndarray,
        sender_rate: float,
        busy_s: float,
        senders: int = 1,
        holds_s: np.ndarray | None = None,
        hold_weight: np.ndarray | None = None,
    ) -> np.ndarray:
        """The mean ``after_idle`` penalty of a sender's transfers, ``sender_rate`` a second,
        each keeping the sender's lanes busy ``busy_s`` on average (``holds_s`` at
        ``hold_weight``: their law): the chance its lanes have been idle past ``j`` RTOs at
        an arrival, ``j`` halvings restarting the window at :func:`tcp.restart_window_bytes`.

        One sender (``senders`` 1) sends as a Poisson stream: its lanes are idle at an arrival
        with chance ``exp(-rate busy)`` (M/G/inf, whatever the holding times' law), idle past
        ``t`` with ``exp(-rate (busy + t))``. A pool of ``c`` instances gives each request to
        the one idle longest (the earliest free: ``sim.queues.fifo_least_loaded``), so below
        saturation each takes every ``c``-th: its gaps are Erlang-``c``, far more regular
        (squared CV ``1 / c``) and its transfers overlap less. The ``k``-th transfer back
        started a Gamma(``k c``, ``c rate``) time ago; the lanes are idle past ``t`` when
        every earlier transfer's hold ended ``t`` before, ``prod_k P(H + t < Gamma(k c))``
        (the ``k`` terms taken independent). At 4 req/s on 6 senders (after_idle_4 of the
        law-vs-replay tests) that reads 49 / 45 / 40 % idle past 0 / 1 / 2 RTOs where the
        replay finds 47 / 43 / 37 % (Poisson: 38 / 33 / 28 %)."""
        x = np.asarray(size_bytes, dtype=float)
        sku, rto = self.sku, self.sku.rto_s
        if sender_rate <= 0:  # a sender that never sends again: every transfer starts cold
            return self.slow_start_s(x)
        iw = float(sku.initial_window_segments * sku.mss_bytes)
        w = self.connection_bytes_s * sku.rtt_ms / 1e3
        top = max(int(math.ceil(math.log2(w / iw))), 1) if w > iw else 1
        # P(idle past j RTOs), j = 1 .. top + 1 (the last: the next term's upper bound)
        p_ge = np.exp(-sender_rate * (rto * np.arange(1, top + 2) + busy_s))
        # where Poisson gaps idle past an RTO under 1 in 1,000 (a busy sender: the default's
        # at 40 req/s) the restarts add under 0.05 ms a transfer and Erlang gaps, more
        # regular, idle less still: Poisson's figure stands, and the law costs nothing more
        if senders > 1 and holds_s is not None and hold_weight is not None and p_ge[0] > 1e-3:
            p_ge = _erlang_idle(
                rto * np.arange(1, top + 2), sender_rate, senders, holds_s, hold_weight
            )
        # P(exactly j halvings); the last, j or more (at IW)
        p_j = [p_ge[j - 1] if j == top else p_ge[j - 1] - p_ge[j] for j in range(1, top + 1)]
        js = [j for j, p in zip(range(1, top + 1), p_j) if p > 0]
        out = np.zeros_like(x)
        if not js:
            return out
        # every restart window's penalty in one element-wise pass (a row per j), summed in
        # j's order: each row the numbers of its own call
        rows = np.broadcast_to(np.asarray(js, dtype=float)[:, None], (len(js), *x.shape))
        w0 = tcp.restart_window_bytes(rows, self.connection_bytes_s, sku)
        pen = self.slow_start_s(np.broadcast_to(x, rows.shape), w0)
        for i, j in enumerate(js):
            out += p_j[j - 1] * pen[i]
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

_ERLANG_TERMS = 400  # transfers back at most (each term is P(the k-th back has ended))
_HOLD_POINTS = 16  # the holds' law as this many equal-weight bins' means


def _hold_points(holds_s: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The holds' law on at most :data:`_HOLD_POINTS` points: each of as many equal-weight
    bins (sorted by hold) at its weighted mean (the idle chance is smooth in the holds)."""
    h = np.asarray(holds_s, dtype=float)
    wt = np.asarray(weight, dtype=float) / float(np.sum(weight))
    if len(h) <= _HOLD_POINTS:
        return h, wt
    o = np.argsort(h, kind="stable")
    h, wt = h[o], wt[o]
    b = np.minimum((np.cumsum(wt) - 0.5 * wt) * _HOLD_POINTS, _HOLD_POINTS - 1).astype(int)
    mass = np.bincount(b, wt, _HOLD_POINTS)
    keep = mass > 0
    return (np.bincount(b, wt * h, _HOLD_POINTS)[keep] / mass[keep]), mass[keep]


def _erlang_idle(
    t: np.ndarray, rate: float, c: int, holds_s: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """``prod_k P(H + t < Gamma(k c, c rate))`` per ``t``: the chance a sender whose gaps are
    Erlang-``c`` of mean ``1 / rate`` finds every earlier transfer ended ``t`` before (holds
    ``H`` of law ``holds_s`` at ``weight``). An Erlang-``n`` time exceeds ``x`` when fewer than
    ``n`` Poisson events of rate ``c rate`` fall in ``x``, ``sum_{i < n} pmf(i; c rate x)``
    (numpy alone: scipy.special costs the process more to import than the whole law). Terms
    in blocks of 8 until the product is below 1e-6 (a restart that rare adds under 0.1 us)
    or the last factor is 1 to 1e-12."""
    h, wt = _hold_points(holds_s, weight)
    nt = len(t)
    y = (c * rate * (h[None, :] + np.asarray(t, dtype=float)[:, None])).ravel()  # (t x point)
    ly = np.log(np.maximum(y, 1e-300))[:, None]
    log_p = np.zeros(nt)
    acc = np.zeros((len(y), 1))  # P(Poisson(y) < i0): the pmf summed so far
    log_fact = 0.0
    i0, block = 0, 8 * c
    while i0 < _ERLANG_TERMS * c:
        i = np.arange(i0, i0 + block, dtype=float)
        lf = log_fact + np.cumsum(np.log(np.maximum(i, 1.0)))  # log(i!)
        cdf = acc + np.cumsum(np.exp(i * ly - y[:, None] - lf), axis=1)  # P(Poisson <= i)
        # k = i0 / c + 1 ..: P(Gamma(k c) > H + t), averaged over the holds
        q = (cdf[:, c - 1 :: c].reshape(nt, len(h), -1) * wt[None, :, None]).sum(axis=1)
        log_p += np.log(np.maximum(q, 1e-300)).sum(axis=1)
        acc, log_fact, i0 = cdf[:, -1:], float(lf[-1]), i0 + block
        if np.all((log_p < -13.8) | (q[:, -1] > 1.0 - 1e-12)):
            break
    return np.exp(log_p)


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
