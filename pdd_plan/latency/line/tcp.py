"""One TCP connection over a leased line: its steady rate and its slow start.

A KV transfer stripes its slices over ``streams_per_transfer`` persistent connections of the
transfer engine's pool (Mooncake's TCP transport keeps a group of lanes per peer, default 4, and
each free lane takes the next slice; SGLang submits a request's KV as one batch of per-layer
slices), so it runs at up to ``k`` x one connection's rate (:mod:`network`). One connection's
steady rate is the least of:

* the line's goodput (``gbps x tcp_efficiency``), before the fair share among flows;
* the window limit ``W / RTT``: at most ``max_window_bytes`` (socket buffer, rwnd, cwnd cap)
  in flight per round trip;
* loss-based congestion control (``congestion: loss``): the Mathis et al. relation (CCR 1997)
  ``MSS / RTT x C / sqrt(p)``, ``C = sqrt(3/2) ~ 1.22``, for random non-congestive loss ``p``;
  BBR (``congestion: bbr``) paces at the bottleneck rate and ignores such loss, so it keeps
  ``min(line, W / RTT)`` (BBR's in-flight cap of ~2 BDP is above one BDP at that rate).

``per_connection_gbps`` overrides the path-derived rate (a measured figure). Per-message
overhead then scales it: each ``message_bytes`` slice carries ``message_header_bytes`` and,
when ``message_round_trip``, waits one RTT for an ack (Mooncake's TCP transport writes the header
and body back to back with no per-slice ack, so the bundled profiles say false).

Slow start: a fresh connection starts at ``initial_window_segments x MSS`` and doubles per
round trip until its window ``rate x RTT`` sustains the steady rate (the ramp model of Cardwell,
Savage and Anderson, INFOCOM 2000, without delayed acks). :func:`slow_start_s` is the extra
time that costs one connection sending ``x`` bytes over sending them at the steady rate (a
striped transfer's ``k`` connections ramp side by side, ``x / k`` bytes each).
"""

from __future__ import annotations

import math

import numpy as np

from pdd_plan.inputs.schema.line import LineSKU

MATHIS_C = math.sqrt(1.5)  # ~1.22: periodic-loss Reno, Mathis, Semke, Mahdavi, Ott (1997)


def window_limit_bytes_s(sku: LineSKU) -> float:
    """``max_window_bytes / RTT``: the most a window-capped flow moves per second (inf at RTT 0)."""
    rtt = sku.rtt_ms / 1e3
    return sku.max_window_bytes / rtt if rtt > 0 else math.inf


def mathis_bytes_s(sku: LineSKU) -> float:
    """``MSS / RTT x C / sqrt(p)`` (inf without loss or without RTT)."""
    rtt = sku.rtt_ms / 1e3
    if sku.loss_rate <= 0 or rtt <= 0:
        return math.inf
    return sku.mss_bytes / rtt * MATHIS_C / math.sqrt(sku.loss_rate)


def path_rate_bytes_s(sku: LineSKU) -> float:
    """One connection's steady goodput before per-message overhead and the line's fair share."""
    line = sku.bytes_per_s
    if sku.per_connection_gbps is not None:  # a measured / stated flow ceiling wins
        return min(sku.per_connection_gbps * 1e9 / 8 * sku.tcp_efficiency, line)
    r = min(line, window_limit_bytes_s(sku))
    if sku.congestion == "loss":
        r = min(r, mathis_bytes_s(sku))
    return r


def flow_rate_bytes_s(sku: LineSKU) -> float:
    """One connection's payload rate: the path rate, less message headers and per-message acks.

    One message of ``m`` payload bytes takes ``(m + h) / r`` (+ one RTT with a per-message ack).
    """
    r = path_rate_bytes_s(sku)
    m, h = sku.message_bytes, sku.message_header_bytes
    t = (m + h) / r + (sku.rtt_ms / 1e3 if sku.message_round_trip else 0.0)
    return m / t


def slow_start_s(
    size_bytes: np.ndarray | float,
    rate_bytes_s: float,
    sku: LineSKU,
    start_window_bytes: np.ndarray | float | None = None,
) -> np.ndarray:
    """Extra seconds a connection starting at ``start_window_bytes`` (default: the initial
    window) takes to send ``size`` bytes, over ``size / rate``.

    Round ``i`` sends ``w0 x 2^i`` bytes and takes one RTT, until the window reaches
    ``W* = rate x RTT`` after ``k = ceil(log2(W* / w0))`` rounds that carried
    ``B = w0 (2^k - 1)`` bytes. So ``T(x) = ceil(log2(x / w0 + 1)) RTT`` for ``x <= B``, else
    ``k RTT + (x - B) / rate``; the penalty is ``T(x) - x / rate`` (never negative).
    """
    x = np.asarray(size_bytes, dtype=float)
    rtt = sku.rtt_ms / 1e3
    iw = float(sku.initial_window_segments * sku.mss_bytes)
    w0 = np.full_like(x, iw) if start_window_bytes is None else np.asarray(start_window_bytes)
    w0 = np.maximum(np.broadcast_to(w0, x.shape).astype(float), iw)
    target = rate_bytes_s * rtt
    if rtt <= 0 or not math.isfinite(rate_bytes_s):
        return np.zeros_like(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.ceil(np.log2(np.maximum(target / w0, 1.0)))
        ramp = w0 * (2.0**k - 1.0)
        small = np.ceil(np.log2(np.maximum(x, 0.0) / w0 + 1.0)) * rtt
    big = k * rtt + (x - ramp) / rate_bytes_s
    t = np.where(x <= ramp, small, big)
    return np.where(target > w0, np.maximum(t - x / rate_bytes_s, 0.0), 0.0)


def restart_halvings(idle_s: np.ndarray, sku: LineSKU) -> np.ndarray:
    """Window halvings after ``idle_s`` of silence, as Linux's tcp_cwnd_restart counts them
    (net/ipv4/tcp_output.c): none unless idle longer than the RTO, then one per RTO elapsed
    beyond the first (``delta -= rto`` while positive). Never-used connections: ``inf``."""
    g = np.asarray(idle_s, dtype=float)
    rto = sku.rto_s
    if rto <= 0:
        return np.where(g > 0, np.inf, 0.0)
    with np.errstate(invalid="ignore"):
        return np.where(g > rto, np.ceil(g / rto) - 1.0, 0.0)


def restart_window_bytes(halvings: np.ndarray, rate_bytes_s: float, sku: LineSKU) -> np.ndarray:
    """The window a connection restarts at: its steady window ``rate x RTT`` halved
    ``halvings`` times, never below the initial window (Linux's restart_cwnd)."""
    w = rate_bytes_s * sku.rtt_ms / 1e3
    iw = float(sku.initial_window_segments * sku.mss_bytes)
    return np.maximum(w / np.power(2.0, np.asarray(halvings, dtype=float)), iw)
