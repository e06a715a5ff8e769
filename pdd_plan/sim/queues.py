"""Queueing engines the simulator is built from, each exact for its model.

* :func:`lindley_wait` - one FIFO server: waiting times by Lindley's recursion, vectorized
  (``W_k = U_k - min_{j<=k} U_j`` with ``U`` the running sum of service minus inter-arrival).
* :func:`fifo_least_loaded` - ``c`` FIFO servers, each arrival sent to the server that can
  finish it first (join the least-loaded instance). With identical servers that is exactly a
  central-queue M/G/c FCFS system; a heap over the servers' free times, one step per request.
* :func:`run_line` - the leased line: a pool of transfer slots sharing the line's bandwidth
  by processor sharing, each transfer capped, FIFO wait for a slot when the pool is full. A
  slot is the ``k`` TCP connections a striped transfer holds (``network.LineConfig.pool`` =
  connections // k, cap = k x one connection's rate): with equal ``k`` that is exactly ``k``
  connections taken and given back together,
  RTT added on delivery. Event-driven on transfers only (two events each), with the virtual
  attained-service trick: all active flows get the same rate ``r(n) = min(C / n, cap)``, so a
  flow that started at virtual time ``V0`` with ``x`` bytes finishes when ``V`` reaches
  ``V0 + x``; a heap of those tags gives the next completion in O(log n).

All functions are deterministic: ties break by index.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from pdd_plan.sim import kernels

Progress = Callable[[str, int, int], None]
_TICK = 1 << 16  # events between progress callbacks


def lindley_wait(arrival_s: np.ndarray, service_s: np.ndarray) -> np.ndarray:
    """Waiting times of a single FIFO server (arrivals sorted), exact, vectorized."""
    a = np.asarray(arrival_s, dtype=float)
    s = np.asarray(service_s, dtype=float)
    n = a.shape[0]
    if n == 0:
        return np.zeros(0)
    u = np.empty(n)
    u[0] = 0.0
    np.cumsum(s[:-1] - np.diff(a), out=u[1:])
    return u - np.minimum.accumulate(np.minimum(u, 0.0))


def fifo_least_loaded(
    arrival_s: np.ndarray,
    service_s: list[np.ndarray],
    counts: list[int],
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """FIFO servers in groups (group g: ``counts[g]`` identical servers, service ``service_s[g]``).

    Each arrival (sorted) goes to the server that would finish it earliest; returns
    ``(start_s, server)`` with servers numbered group by group. One server: Lindley, vectorized.
    """
    a = np.asarray(arrival_s, dtype=float)
    n = a.shape[0]
    total = int(sum(counts))
    if total < 1:
        raise ValueError("need at least one server")
    if total == 1:
        g = next(i for i, c in enumerate(counts) if c > 0)
        return a + lindley_wait(a, service_s[g]), np.zeros(n, dtype=np.int32)
    queue_kernel = kernels.load()

    if not queue_kernel.wanted(queue_kernel.least_loaded, n):
        return _least_loaded_python(a, service_s, counts, progress)
    return _least_loaded_compiled(a, service_s, counts, progress)


def _least_loaded_compiled(
    a: np.ndarray, service_s: list[np.ndarray], counts: list[int], progress: Progress | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fifo_least_loaded` (several servers) in compiled code (``queue_kernel``)."""
    queue_kernel = kernels.load()

    n, total = a.shape[0], int(sum(counts))
    queue_kernel.ready(queue_kernel.least_loaded)
    groups = [(g, c) for g, c in enumerate(counts) if c > 0]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    svc = np.ascontiguousarray([np.asarray(service_s[g], dtype=float) for g, _ in groups])
    firsts = np.array([first[g] for g, _ in groups], dtype=np.int64)
    cnt = np.array([c for _, c in groups], dtype=np.int64)
    ids = np.arange(total, dtype=np.int64)
    slots, pos = ids.copy(), np.zeros(total, dtype=np.int64)  # pos is unread until a pop
    for f, c in zip(firsts.tolist(), cnt.tolist()):
        pos[f : f + c] = np.arange(c)
    start = np.empty(n)
    server = np.empty(n, dtype=np.int64)
    if progress is not None:
        progress("prefill", 0, n)
    queue_kernel.least_loaded(
        np.ascontiguousarray(a), svc, firsts, cnt, start, server, slots, pos, np.zeros(total), ids
    )
    if progress is not None:
        progress("prefill", n, n)
    return start, server.astype(np.int32)


def _least_loaded_python(
    a: np.ndarray, service_s: list[np.ndarray], counts: list[int], progress: Progress | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fifo_least_loaded`'s loop in Python (a heapq of (free time, server) per group):
    what ``queue_kernel.least_loaded`` compiles, for replays too small to pay for compiling."""
    n = a.shape[0]
    start, server = [0.0] * n, [0] * n
    groups = [(g, c) for g, c in enumerate(counts) if c > 0]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
    heaps = [[(0.0, first[g] + j) for j in range(c)] for g, c in groups]
    sls = [np.asarray(service_s[g], dtype=float).tolist() for g, _ in groups]
    heapreplace = heapq.heapreplace
    for k, t in enumerate(a.tolist()):
        best, bi = math.inf, 0
        for i, h in enumerate(heaps):
            f = h[0][0]
            fin = (t if t > f else f) + sls[i][k]
            if fin < best:
                best, bi = fin, i
        f, j = heaps[bi][0]
        start[k], server[k] = (t if t > f else f), j
        heapreplace(heaps[bi], (best, j))
        if progress is not None and not k & (_TICK - 1):
            progress("prefill", k, n)
    return np.asarray(start), np.asarray(server, dtype=np.int32)


@dataclass
class LineStats:
    """Time integrals of the line's state over [first arrival, last completion]."""

    span_s: float = 0.0
    busy_s: float = 0.0  # time with at least one active transfer
    conn_area: float = 0.0  # integral of active transfers (slots in use) over time
    full_s: float = 0.0  # time with every slot of the pool in use
    bytes_sent: float = 0.0
    transfers: int = 0
    max_waiting: int = 0  # most transfers ever waiting for a slot
    fresh: list[int] = field(default_factory=list)  # requests that opened new connections
    ready_span_s: float = 0.0  # first to last KV ready among the transfers (the offered window)


@dataclass
class Router:
    """The PDD routing rule applied when a request's KV is ready (see :func:`run_line`).

    A request relays (``p_rld_md``) when its predicted line delay,
    ``max((backlog + x) / C, x / cap) + rtt``, exceeds its remaining TTFT budget
    ``budget_s - (ready - arrival)``; a relayed request whose output is at most
    ``singular_max`` tokens finishes on relay decode (``p_rld``) and sends nothing.
    """

    arrival_s: list[float]
    output_tokens: list[int]
    budget_s: float
    singular_max: int  # -1: no p_rld


@dataclass
class DRCHook:
    """The decode-side radix cache, looked up when the KV is ready: bytes = full - per_tok*held.

    Requests that end on relay decode neither look it up nor populate it.
    """

    cache: object  # workload.cache.PrefixCache
    flat: np.ndarray  # all hash ids, request after request
    offsets: np.ndarray  # request r's ids: flat[offsets[r]:offsets[r+1]]
    input_tokens: list[int]
    full_bytes: list[float]  # bytes with nothing held
    per_token: float
    held_tokens: list[float]  # out: tokens MD held (NaN: not looked up)


class Route(IntEnum):
    """A request's path (``architectures.PATHS`` in order)."""

    P_MD = 0  # prefill -> line -> main decode
    P_RLD_MD = 1  # relay decode first, then main decode
    P_RLD = 2  # finishes on relay decode; sends nothing over the line


P_MD, P_RLD_MD, P_RLD = Route.P_MD, Route.P_RLD_MD, Route.P_RLD


@dataclass(frozen=True)
class LineInputs:
    """Transfers to replay on the line. ``ready_s`` (sorted): when the KV of requests ``rid``
    is ready; ``size_bytes[r]`` the bytes of request ``r`` (ignored when ``drc`` sizes them);
    ``pool`` transfer slots (each the ``k`` connections one transfer stripes over), each transfer
    capped at ``flow_cap_bytes_s`` (``k`` x one connection's rate), sharing ``capacity_bytes_s``."""

    ready_s: np.ndarray
    rid: np.ndarray
    size_bytes: np.ndarray | None
    capacity_bytes_s: float
    flow_cap_bytes_s: float
    pool: int
    rtt_s: float
    router: Router | None = None
    drc: DRCHook | None = None
    route: np.ndarray | None = None  # each request's path fixed up front (the plan's routing)


class _Admission:
    """What a transfer does when its KV is ready: the DRC sizes it (and learns its blocks),
    the router may send it to relay decode. Returns its bytes, or -1 when it sends nothing."""

    def __init__(self, inp: LineInputs, route: bytearray):
        self.router, self.drc, self.route = inp.router, inp.drc, route
        sz = inp.size_bytes
        self.size = np.asarray(sz, dtype=float).tolist() if sz is not None else None
        self.off = inp.drc.offsets.tolist() if inp.drc is not None else None
        C, cap = float(inp.capacity_bytes_s), float(inp.flow_cap_bytes_s)
        self.inv_c = 1.0 / C
        self.inv_cap = 1.0 / cap if math.isfinite(cap) else 0.0
        self.rtt = inp.rtt_s

    def __call__(self, k: int, ta: float, backlog: float) -> float:
        if self.route[k] == Route.P_RLD:  # routed up front to finish on relay decode
            return -1.0
        drc: Any = self.drc
        if drc is not None:
            h = drc.flat[self.off[k] : self.off[k + 1]].tolist()  # type: ignore[index]
            ht = min(drc.cache.lookup(h) * drc.cache.block_tokens, drc.input_tokens[k])
            x = drc.full_bytes[k] - drc.per_token * ht
        else:
            x = self.size[k]  # type: ignore[index]
        if self.router is not None and self._relays(k, ta, backlog, x):
            if self.router.output_tokens[k] <= self.router.singular_max:
                self.route[k] = Route.P_RLD
                return -1.0
            self.route[k] = Route.P_RLD_MD
        if drc is not None:
            drc.held_tokens[k] = ht
            drc.cache.insert(h)
        return x

    def _relays(self, k: int, ta: float, backlog: float, x: float) -> bool:
        """The rule: the predicted line delay breaks the remaining TTFT budget."""
        rt = self.router
        pred = (backlog + x) * self.inv_c
        own = x * self.inv_cap
        if own > pred:
            pred = own
        return pred + self.rtt > rt.budget_s - (ta - rt.arrival_s[k])  # type: ignore[union-attr]


def _noop(stage: str, done: int, total: int) -> None:
    pass


def _replay(
    inp: LineInputs, admit: _Admission | None, out: tuple, progress: Progress
) -> tuple[float, int, int]:
    """The event loop: arrivals and completions in time order. Fills ``out`` = (start, end,
    sent, fresh) (lists); returns (last event time, transfers, most ever waiting).

    Every per-event value is a Python float or int from a plain list (no numpy scalars, no
    typed-array boxing), and ``min(C / n, cap)`` is spelled out: a million transfers pass."""
    start, end, sent, fresh = out
    ready, rids = inp.ready_s.tolist(), inp.rid.tolist()
    size = np.asarray(inp.size_bytes, dtype=float).tolist() if admit is None else []
    N, C, cap, pool = (
        len(ready),
        float(inp.capacity_bytes_s),
        float(inp.flow_cap_bytes_s),
        int(inp.pool),
    )
    ready.append(math.inf)  # a sentinel: no bounds check per event
    heap: list[tuple[float, int]] = []
    heappush, heappop = heapq.heappush, heapq.heappop
    wq: deque[int] = deque()
    t_now = ready[0] if N else 0.0
    V = sumtag = qbytes = r = 0.0  # attained service since the line last emptied; flow rate
    n = i = events = transfers = most = opened = 0
    INF = math.inf
    while True:
        ta = ready[i]
        tc = t_now + (heap[0][0] - V) / r if n else INF
        if ta < tc:  # a KV is ready
            if n:
                V += (ta - t_now) * r
            t_now = ta
            k = rids[i]
            i += 1
            x = size[k] if admit is None else admit(k, ta, sumtag - n * V + qbytes)
            if x < 0.0:
                continue  # relay decode finishes it: nothing crosses the line
            sent[k] = x
            transfers += 1
            if n < pool:
                if n == opened:  # every slot opened so far is busy: open one (k connections)
                    opened += 1
                    fresh.append(k)
                start[k] = ta
                heappush(heap, (V + x, k))
                sumtag += V + x
                n += 1
                r = C / n if C / n < cap else cap
            else:
                wq.append(k)
                qbytes += x
                if len(wq) > most:
                    most = len(wq)
        elif tc == INF:
            break
        else:  # a transfer's last byte leaves
            t_now = tc
            V, k = heappop(heap)
            sumtag -= V
            end[k] = tc
            n -= 1
            if wq:  # the freed slot goes to the first waiter
                k2 = wq.popleft()
                x2 = sent[k2]
                qbytes -= x2
                start[k2] = tc
                heappush(heap, (V + x2, k2))
                sumtag += V + x2
                n += 1
            if n == 0:  # the line emptied (so did the queue): restart the virtual clock
                V = sumtag = qbytes = 0.0
            else:
                r = C / n if C / n < cap else cap
        events += 1
        if not events & (_TICK - 1):
            progress("line", i, N)
    return t_now, transfers, most


def _compiled_wanted(n: int) -> bool:
    queue_kernel = kernels.load()

    return queue_kernel.wanted(queue_kernel.line_events, n)


def _compiled(inp: LineInputs, n_out: int, progress: Progress) -> tuple:
    """:func:`_replay` without a router or DRC, in compiled code (``queue_kernel``): (start,
    end, sent, fresh, (last event time, transfers, most ever waiting))."""
    queue_kernel = kernels.load()

    queue_kernel.ready(queue_kernel.line_events)
    N = len(inp.ready_s)
    start, end = np.full(n_out, math.nan), np.full(n_out, math.nan)
    sent = np.zeros(n_out)
    slots = min(int(inp.pool), n_out) + 1  # transfers at once: at most the pool, or all
    fresh = np.zeros(slots, dtype=np.int64)
    ids = np.arange(n_out, dtype=np.int64)
    out_t, out_n = np.zeros(1), np.zeros(3, dtype=np.int64)
    progress("line", 0, N)
    queue_kernel.line_events(
        np.ascontiguousarray(inp.ready_s, dtype=float),
        np.ascontiguousarray(inp.rid, dtype=np.int64),
        np.ascontiguousarray(inp.size_bytes, dtype=float),
        float(inp.capacity_bytes_s),
        float(inp.flow_cap_bytes_s),
        int(inp.pool),
        start,
        end,
        sent,
        fresh,
        np.zeros(n_out),
        np.zeros(slots, dtype=np.int64),
        np.zeros(n_out, dtype=np.int64),
        ids,
        np.zeros(max(N, 1), dtype=np.int64),
        out_t,
        out_n,
    )
    progress("line", N, N)
    stats = (float(out_t[0]), int(out_n[0]), int(out_n[1]))
    return start, end, sent, fresh[: int(out_n[2])].tolist(), stats


def _occupancy(start: np.ndarray, end: np.ndarray, pool: int) -> tuple[float, float, float]:
    """(busy, connection-seconds, full) time integrals from the transfers' connection
    intervals, after the run (cheaper than integrating at every event)."""
    ok = ~np.isnan(end)
    s, e = start[ok], end[ok]
    if s.size == 0:
        return 0.0, 0.0, 0.0
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate([[s[0]], reach[:-1]])
    busy = float(np.clip(e - np.maximum(s, prev), 0.0, None).sum())
    times = np.concatenate([s, e])
    step = np.concatenate([np.ones(s.size), -np.ones(e.size)])
    o = np.argsort(times, kind="stable")
    n_after = np.cumsum(step[o])[:-1]
    dt = np.diff(times[o])
    full = float(dt[n_after >= pool].sum())
    return busy, float((e - s).sum()), full


def run_line(
    inp: LineInputs, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, LineStats]:
    """Replay transfers on the line.

    The connection-pool wait (FIFO, ``start - ready``) and the processor-sharing transfer
    (``end - start``, every active transfer at ``min(C / n, cap)``) are apart: the caller adds
    the RTT and any slow start on delivery. A transfer that starts when every slot opened
    so far is busy opens a fresh one (Mooncake's pool grows on demand and reuses a free
    connection first); their request ids are ``LineStats.fresh``.

    Returns per request ``r`` (arrays indexed by ``r``, length ``max(rid) + 1``): ``start``
    (got a connection), ``end`` (last byte sent; delivery is ``end + rtt``), ``sent`` (bytes),
    ``route`` (a :class:`Route`: ``inp.route``, or what the router chose; p_rld requests have
    NaN times and, without ``drc``, a negative ``size_bytes``), and the
    :class:`LineStats`.
    """
    rid = inp.rid
    n_out = int(rid.max()) + 1 if len(rid) else 0
    route = bytearray(n_out)  # Route.P_MD
    if inp.route is not None:
        route[:] = np.asarray(inp.route, dtype=np.uint8).tobytes()
    plain = inp.router is None and inp.drc is None
    if plain and _compiled_wanted(len(inp.ready_s)):
        s, e, x, fresh, (t_end, transfers, most) = _compiled(inp, n_out, progress or _noop)
    else:
        start, end, sent = [math.nan] * n_out, [math.nan] * n_out, [0.0] * n_out
        fresh = []
        admit = None if plain else _Admission(inp, route)
        t_end, transfers, most = _replay(inp, admit, (start, end, sent, fresh), progress or _noop)
        s = np.array(start, dtype=float)
        e = np.array(end, dtype=float)
        x = np.array(sent, dtype=float)
    busy, area, full = _occupancy(s, e, int(inp.pool))
    t0 = float(inp.ready_s[0]) if len(inp.ready_s) else 0.0
    moved = ~np.isnan(s)
    ready = np.full(n_out, np.nan)
    ready[rid] = inp.ready_s
    rs = ready[moved]
    span = float(rs.max() - rs.min()) if rs.size else 0.0
    st = LineStats(t_end - t0, busy, area, full, float(x.sum()), transfers, most, fresh, span)
    return s, e, x, np.frombuffer(route, dtype=np.uint8).astype(np.int8), st
