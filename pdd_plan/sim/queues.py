"""Queueing engines the simulator is built from, each exact for its model.

* :func:`lindley_wait` - one FIFO server: waiting times by Lindley's recursion, vectorized
  (``W_k = U_k - min_{j<=k} U_j`` with ``U`` the running sum of service minus inter-arrival).
* :func:`fifo_least_loaded` - ``c`` FIFO servers, each arrival sent to the server that can
  finish it first (join the least-loaded instance). With identical servers that is exactly a
  central-queue M/G/c FCFS system; a heap over the servers' free times, one step per request.
* :func:`run_line` - the leased line: a pool of TCP connections sharing the line's bandwidth
  by processor sharing, each flow capped, FIFO wait for a connection when the pool is full,
  RTT added on delivery. Event-driven on transfers only (two events each), with the virtual
  attained-service trick: all active flows get the same rate ``r(n) = min(C / n, cap)``, so a
  flow that started at virtual time ``V0`` with ``x`` bytes finishes when ``V`` reaches
  ``V0 + x``; a heap of those tags gives the next completion in O(log n).

All functions are deterministic: ties break by index.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

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
    start = [0.0] * n
    server = [0] * n
    al = a.tolist()
    groups = [(g, c) for g, c in enumerate(counts) if c > 0]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
    heapreplace = heapq.heapreplace
    if len(groups) == 1:
        g, c = groups[0]
        sl = np.asarray(service_s[g], dtype=float).tolist()
        heap = [(0.0, first[g] + j) for j in range(c)]
        for k in range(n):
            f, j = heap[0]
            t = al[k]
            st = t if t > f else f
            start[k] = st
            server[k] = j
            heapreplace(heap, (st + sl[k], j))
            if progress is not None and not k & (_TICK - 1):
                progress("prefill", k, n)
    else:
        heaps = [[(0.0, first[g] + j) for j in range(c)] for g, c in groups]
        sls = [np.asarray(service_s[g], dtype=float).tolist() for g, _ in groups]
        for k in range(n):
            t = al[k]
            best = math.inf
            bi = 0
            for i, h in enumerate(heaps):
                f = h[0][0]
                fin = (t if t > f else f) + sls[i][k]
                if fin < best:
                    best, bi = fin, i
            h = heaps[bi]
            f, j = h[0]
            st = t if t > f else f
            start[k] = st
            server[k] = j
            heapreplace(h, (best, j))
            if progress is not None and not k & (_TICK - 1):
                progress("prefill", k, n)
    return np.asarray(start), np.asarray(server, dtype=np.int32)


@dataclass
class LineStats:
    """Time integrals of the line's state over [first arrival, last completion]."""

    span_s: float = 0.0
    busy_s: float = 0.0  # time with at least one active transfer
    conn_area: float = 0.0  # integral of active connections over time
    full_s: float = 0.0  # time with every connection of the pool in use
    bytes_sent: float = 0.0
    transfers: int = 0
    max_waiting: int = 0  # most transfers ever waiting for a connection


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


P_MD, P_RLD_MD, P_RLD = 0, 1, 2


def _arr(code: str, x: np.ndarray) -> array:
    """A compact typed copy (8 bytes an entry, not a Python object) for scalar loops."""
    a = array(code)
    a.frombytes(np.ascontiguousarray(x, dtype=np.float64 if code == "d" else np.int64).tobytes())
    return a


def run_line(
    ready_s: np.ndarray,
    rid: np.ndarray,
    size_bytes: np.ndarray | None,
    capacity_bytes_s: float,
    flow_cap_bytes_s: float,
    pool: int,
    rtt_s: float,
    router: Router | None = None,
    drc: DRCHook | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, LineStats]:
    """Replay transfers on the line.

    ``ready_s`` (sorted) are the times the KV of requests ``rid`` is ready; ``size_bytes[r]`` the
    bytes of request ``r`` (ignored for requests the DRC hook sizes). Returns per request ``r``
    (arrays indexed by ``r``, length ``max(rid) + 1``): ``start`` (got a connection), ``end``
    (last byte sent; delivery is ``end + rtt``), ``sent`` (bytes), ``route`` (0 p_md, 1 p_rld_md,
    2 p_rld - only with a router; p_rld requests have NaN times), and the :class:`LineStats`.
    """
    n_out = int(rid.max()) + 1 if len(rid) else 0
    start = array("d", [math.nan]) * n_out
    end = array("d", [math.nan]) * n_out
    sent = array("d", [0.0]) * n_out
    route = bytearray(n_out)  # P_MD = 0
    ready = _arr("d", ready_s)
    rids = _arr("q", rid)
    size = _arr("d", size_bytes) if size_bytes is not None else None
    N = len(ready)
    C = float(capacity_bytes_s)
    cap = float(flow_cap_bytes_s)
    inv_c = 1.0 / C
    inv_cap = 1.0 / cap if math.isfinite(cap) else 0.0
    pool = int(pool)
    INF = math.inf
    heap: list[tuple[float, int]] = []
    heappush, heappop = heapq.heappush, heapq.heappop
    wq: deque[int] = deque()
    st = LineStats()
    t_now = ready[0] if N else 0.0
    t0 = t_now
    V = 0.0  # attained service of every active flow since the line last emptied
    sumtag = 0.0
    qbytes = 0.0
    n = 0
    r = 0.0  # rate of each active flow
    i = 0
    events = 0
    if router is not None:
        arr, outl = router.arrival_s, router.output_tokens
        budget, singular = router.budget_s, router.singular_max
    if drc is not None:
        cache, flat, off = drc.cache, drc.flat, drc.offsets
        inp, full, ptok, held = drc.input_tokens, drc.full_bytes, drc.per_token, drc.held_tokens
        bt = cache.block_tokens
    while True:
        ta = ready[i] if i < N else INF
        if n:
            tag0 = heap[0][0]
            tc = t_now + (tag0 - V) / r
        else:
            tc = INF
        if ta < tc:
            dt = ta - t_now
            if n:
                V += dt * r
                st.busy_s += dt
                st.conn_area += n * dt
                if n >= pool:
                    st.full_s += dt
            t_now = ta
            k = rids[i]
            i += 1
            if drc is not None:
                h = flat[off[k] : off[k + 1]].tolist()
                hk = cache.lookup(h)
                ht = min(hk * bt, inp[k])
                x = full[k] - ptok * ht
            else:
                x = size[k]
            if router is not None:
                backlog = sumtag - n * V + qbytes
                pred = (backlog + x) * inv_c
                own = x * inv_cap
                if own > pred:
                    pred = own
                if pred + rtt_s > budget - (ta - arr[k]):
                    if outl[k] <= singular:
                        route[k] = P_RLD
                        continue
                    route[k] = P_RLD_MD
            if drc is not None:
                held[k] = ht
                cache.insert(h)
            sent[k] = x
            st.transfers += 1
            if n < pool:
                start[k] = ta
                tag = V + x
                heappush(heap, (tag, k))
                sumtag += tag
                n += 1
                r = C / n
                if r > cap:
                    r = cap
            else:
                wq.append(k)
                qbytes += x
                if len(wq) > st.max_waiting:
                    st.max_waiting = len(wq)
        else:
            if tc == INF:
                break
            dt = tc - t_now
            st.busy_s += dt
            st.conn_area += n * dt
            if n >= pool:
                st.full_s += dt
            t_now = tc
            V = tag0
            tag, k = heappop(heap)
            sumtag -= tag
            end[k] = tc
            n -= 1
            if wq:
                k2 = wq.popleft()
                x2 = sent[k2]
                qbytes -= x2
                start[k2] = tc
                tag = V + x2
                heappush(heap, (tag, k2))
                sumtag += tag
                n += 1
            if n == 0:  # the line emptied (so did the queue): restart the virtual clock
                V = 0.0
                sumtag = 0.0
                qbytes = 0.0
            else:
                r = C / n
                if r > cap:
                    r = cap
        events += 1
        if progress is not None and not events & (_TICK - 1):
            progress("line", i, N)
    st.span_s = t_now - t0
    st.bytes_sent = float(np.frombuffer(sent, dtype=float).sum())
    return (
        np.frombuffer(start, dtype=float),
        np.frombuffer(end, dtype=float),
        np.frombuffer(sent, dtype=float),
        np.frombuffer(route, dtype=np.uint8).astype(np.int8),
        st,
    )
