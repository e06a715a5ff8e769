"""Bytes that cross the line, and transfer times over the line and over RDMA.

The line model: each transfer holds ``k = streams_per_transfer`` connections of a
finite pool of ``c`` and stripes its slices over them (Mooncake's TCP lanes), so the pool serves
``floor(c / k)`` transfers at once; the active transfers share the line (processor sharing,
each capped at ``k`` x one TCP connection's rate from :mod:`tcp`), and a transfer that finds
the pool full waits for its connections: one limited-processor-sharing queue
(:func:`line_transfer_s`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.inputs.schema.gpu import DEFAULT_RDMA_LATENCY_MS, GPUProfile
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.latency.closed_forms import limited_ps_numbers
from pdd_plan.latency.line import tagged, tcp
from pdd_plan.latency.line.delay_shape import ps_sojourn_variance
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


def line_transfer_s(
    size_bytes: np.ndarray,
    line: LineConfig,
    rho: float,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Mean time from KV ready to KV delivered for a ``size``-byte transfer at utilization
    ``rho`` of the usable capacity (:attr:`LineConfig.usable_bytes_s`), the classes' request
    shares ``weight`` (equal shares when None) giving the mean size ``E[x]``.

    The pool and the line are one queue, as the simulator runs them: at most ``c`` =
    :attr:`LineConfig.pool` transfers share the line (processor sharing, each at most ``k``
    connections' rate), the rest wait FIFO for a slot. Its number in system is a birth-death
    chain (:func:`queueing.limited_ps_numbers`, exponential sizes): ``E[N_s]`` in service,
    ``E[N_q]`` waiting, ``lambda = rho x usable / E[x]``. By Little's law:

    * **hold** (its ``k`` connections are held) ``E[N_s] / lambda`` on average, in proportion to
      the size (``x E[N_s] / (rho x usable)``; exactly M/G/1-PS's ``x / (C (1 - rho))`` when one
      transfer can fill the line and the pool never binds), never under ``x`` over ``k``
      connections' rate; plus slow start where every transfer pays it;
    * **pool wait** ``E[N_q] / lambda``, the same for every size (FIFO), scaled by
      ``(1 + cs^2) / 2`` for the squared CV of the classes' sizes (exact for exponential sizes;
      heavier spreads hold the slots longer, as in M/G/c).

    Plus one RTT on delivery. Finite whenever ``rho < 1``: the pool's holders share a line
    whose total rate is constant once ``c`` of them are active, so the queue is stable exactly
    when the line is (an Erlang C wait with the PS-inflated hold as service time would call a
    95%-busy line with 16 slots unstable at 19 erlangs)."""
    x = np.asarray(size_bytes, dtype=float)
    per_byte, wait, _ = _limited_ps_parts(x, line, rho, weight)
    hold = x * per_byte + line.every_transfer_slow_start_s(x)
    return hold + wait + line.sku.rtt_ms / 1e3


def _limited_ps_parts(
    x: np.ndarray, line: LineConfig, rho: float, weight: np.ndarray | None
) -> tuple[float, float, float]:
    """(seconds per byte held, mean pool wait, P(pool wait)) of :func:`line_transfer_s`."""
    usable = line.usable_bytes_s
    w = np.ones_like(x) if weight is None else np.asarray(weight, dtype=float)
    w = w / float(np.sum(w))
    mean_x = float(np.dot(w, x))
    fastest = min(line.capacity_bytes_s, line.flow_cap_bytes_s)
    if rho <= 0 or mean_x <= 0:
        return 1.0 / fastest, 0.0, 0.0
    n_s, n_q = limited_ps_numbers(line.pool, rho, line.capacity_bytes_s, line.flow_cap_bytes_s)
    per_byte = max(n_s / (rho * usable), 1.0 / fastest)
    # the chain assumes exponential sizes (cs^2 = 1); the classes' own spread moves the wait
    # as it moves M/G/c's (Allen-Cunneen, (1 + cs^2) / 2); the hold is PS, insensitive
    cs2 = float(np.dot(w, x * x)) / mean_x**2 - 1.0
    wait = n_q * mean_x / (rho * usable) * (1.0 + cs2) / 2.0
    # P(N >= c) = pi(c) / (1 - rho) and E[N_q] = pi(c) rho / (1 - rho)^2 (the geometric tail)
    return per_byte, wait, min(n_q * (1.0 - rho) / rho, 1.0)


def line_delay_shape(
    size_bytes: np.ndarray, line: LineConfig, rho: float, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(squared CV, P(no delay)) of a transfer's delay beyond its bare time
    (:func:`line_transfer_s` less :func:`bare_transfer_s`), per size: the PS share's, which the
    pool wait (``E[N_q] / lambda``, FIFO) stretches to the whole mean. The wait is a rare,
    long event where the pool seldom binds (narrow-line: P(wait) 0.2%, 5 ms of mean): a
    two-moment fit of its variance would spread that tail over the body of every small
    transfer's delay, so it keeps today's mean and takes the share's shape. A line with no
    PS share (every transfer at its cap) has the wait's own: ``P(wait)`` and an exponential.

    * **PS share**: Coffman-Muntz-Trotter's Var[T | x] of M/M/1-PS
      (:func:`line_delay.ps_sojourn_variance`) for the line's equivalent single PS server:
      service ``tau = x / r`` at the bare rate ``r`` (the line's, or ``k`` connections' when
      lower), load ``rho_e`` with ``1 / (1 - rho_e)`` = the limited-PS slowdown (``rho``
      itself when one transfer can fill the line and the pool never binds, 0 when every
      transfer runs at its cap), and the mean job ``1 / mu = E[tau^2] / (2 E[tau])``, the
      mean residual service. That choice keeps both exact limits of M/G/1-PS for any size
      law: ``rho x^2 / (1 - rho)^2`` for small ``x`` (the number found in system is
      geometric whatever the sizes) and ``lambda E[tau^2] x / (1 - rho)^3`` for large ``x``
      (the work arriving during a long stay); exponential sizes give CMT exactly.

    No delay at all when the transfer gets a slot at once, finds the line idle and sees no
    arrival while it runs: ``(1 - P(wait)) (1 - rho_e) e^(-lambda_e tau)``, ``lambda_e =
    rho_e / E[tau]`` (exact for M/G/1-PS: ``P(N = 0) = 1 - rho`` for any size law)."""
    x = np.asarray(size_bytes, dtype=float)
    per_byte, wait, p_wait = _limited_ps_parts(x, line, rho, weight)
    capped = _capped_shape(x, line, rho, weight, per_byte, p_wait)
    if capped is not None:
        return capped
    fastest = min(line.capacity_bytes_s, line.flow_cap_bytes_s)
    slowdown = per_byte * fastest
    extra = x * (per_byte - 1.0 / fastest)
    w = np.ones_like(x) if weight is None else np.asarray(weight, dtype=float)
    tau = x / fastest
    e1 = float(np.dot(w, tau)) / float(np.sum(w))
    residual = float(np.dot(w, tau * tau)) / float(np.sum(w)) / (2.0 * e1) if e1 > 0 else 0.0
    rho_e = 1.0 - 1.0 / slowdown
    var = ps_sojourn_variance(tau, residual, rho_e)
    atom = (1.0 - p_wait) * (1.0 - rho_e) * np.exp(-rho_e * tau / e1 if e1 > 0 else 0.0 * tau)
    # no PS share (every transfer at its cap): the wait alone, an atom and an exponential
    # (a vanishing P(wait) has no delay to shape: its SCV overflows, so it takes 1)
    alone = 2.0 / p_wait - 1.0 if p_wait > 0 and 2.0 / p_wait < np.inf else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        cv2 = np.where(extra > 0, var / np.where(extra > 0, extra * extra, 1.0), alone)
    return cv2, atom


def _capped_shape(
    x: np.ndarray,
    line: LineConfig,
    rho: float,
    weight: np.ndarray | None,
    per_byte: float,
    p_wait: float,
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`line_delay_shape` on a line one transfer cannot fill (cap ``f`` < line ``C``):
    the tagged transfer's exact law (:mod:`tagged_transfer`; Poisson arrivals, exponential
    sizes of the classes' mean). Its variance replaces CMT's at an equivalent load (which
    lets a transfer alone be slowed, where on a capped line it runs at its cap undisturbed),
    its ``P(stays at its cap)`` the no-delay atom. The mean stays :func:`line_transfer_s`'s:
    a PS line with a state-dependent total rate is a symmetric queue (insensitive), its
    ``E[T | x]`` linear in ``x`` and equal to the Little's-law per-byte figure (the tagged
    chain's mean matches it to rounding: tests/unit/latency/test_line_tagged.py). None where the
    line is not capped or never shares (today's law applies), idle or saturated."""
    f, cap = line.flow_cap_bytes_s, line.capacity_bytes_s
    # every transfer at its cap (pool x f <= C): no share to shape, the wait's own law applies
    # a cap within 0.1% of the line (rounding of the TCP efficiency) fills it: CMT's law
    if not (f < 0.999 * cap and cap < line.pool * f and 0.0 < rho < 1.0):
        return None
    w = np.ones_like(x) if weight is None else np.asarray(weight, dtype=float)
    mean_x = float(np.dot(w, x)) / float(np.sum(w))
    if mean_x <= 0:
        return None
    law = tagged.tagged_law(line.pool, float(rho), cap, f, mean_x)
    mean_t, second, stay = tagged.tagged_moments(law, x)
    var = np.maximum(second - mean_t * mean_t, 0.0)
    extra = x * (per_byte - 1.0 / f)
    with np.errstate(divide="ignore", invalid="ignore"):
        cv2 = np.where(extra > 0, var / np.where(extra > 0, extra * extra, 1.0), 1.0)
    return cv2, (1.0 - p_wait) * stay


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
