"""Continuous-batching decode on relay decode (RLD) and main decode (MD), with the handoff.

Each decode instance runs a batch of at most ``bmax`` requests (the batch that meets the TPOT
target) whose reserved KV (``kv_bytes(input + output)``, the final context) fits its pool;
arrivals that do not fit wait FIFO. The batch advances in *fluid steps*: with ``B`` requests
running, every one of them gains one token per ``step(B, mean context)`` seconds (the roofline
decode step, tabulated). A request admitted when the instance's step counter was ``G0`` and
needing ``k`` tokens leaves when the counter reaches ``G0 + k``; between arrivals and departures
the batch is constant, so the engine only has events at those instants (a heap of finish tags
per instance, one global heap of next departures). Approximations, by design: steps are
fractional (no step boundaries), a request's first token is at its admission plus one step at
the batch it joins, and prefill/extend passes do not slow the decode batch.

PDD relay (``p_rld_md``): RLD starts decoding when the KV arrives over RDMA, capped at
``relay_max_tokens``. When the KV has crossed the line (delivery at MD):

* ``one_shot`` - RLD stops at once and sends the ``k`` token ids (one-way line latency); MD
  recomputes their KV (extend) and joins the request to its batch (the user sees a stall);
* ``catch_up`` - RLD keeps decoding while its ``k0`` token ids travel and MD runs their extend;
  then RLD hands over (the few tokens made meanwhile are taken as caught up: their recompute
  is neglected).

A request that hit the relay cap before its KV arrived pauses on RLD (stall) until MD has
extended the whole relay. ``p_rld`` requests decode entirely on RLD.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from dataclasses import dataclass

import numpy as np

from .queues import P_MD, P_RLD, P_RLD_MD, Progress
from .tables import ExtendTable, StepTable

_TICK = 1 << 16


def _darr(x: np.ndarray) -> array:
    a = array("d")
    a.frombytes(np.ascontiguousarray(x, dtype=np.float64).tobytes())
    return a


def _qarr(x: np.ndarray) -> array:
    a = array("q")
    a.frombytes(np.ascontiguousarray(x, dtype=np.int64).tobytes())
    return a


@dataclass(frozen=True)
class Engine:
    """One decode instance: step table, batch cap and KV pool (bytes)."""

    steps: StepTable
    bmax: int
    kv_pool_bytes: float


@dataclass
class DecodeResult:
    first_s: np.ndarray  # first output token
    end_s: np.ndarray  # last output token
    rld_tokens: np.ndarray  # tokens decoded on relay decode
    md_arrive_s: np.ndarray  # request reached MD (KV delivered, or extend done)
    md_admit_s: np.ndarray  # joined an MD batch
    md_instance: np.ndarray  # -1: never on MD
    mean_batch: list[float]  # per instance (MD first, then RLD), time-average batch
    span_s: float


def run_decode(
    route: np.ndarray,
    t_md: np.ndarray,
    t_rld: np.ndarray,
    output_tokens: np.ndarray,
    step_ctx: np.ndarray,
    ext_ctx: np.ndarray,
    kv_md: np.ndarray,
    kv_rld: np.ndarray,
    md: list[Engine],
    rld: list[Engine],
    extend: ExtendTable | None,
    relay_cap: int,
    one_shot: bool,
    progress: Progress | None = None,
    ids_latency_s: float = 0.0,
) -> DecodeResult:
    """Replay decode. ``t_md``: KV at MD (routes p_md, p_rld_md); ``t_rld``: KV at RLD;
    ``ids_latency_s``: one-way line latency of the handoff's token-id message (RLD -> MD)."""
    n = int(len(route))
    nan = math.nan
    routes = bytes(np.asarray(route, dtype=np.int8).astype(np.uint8))
    out = _qarr(output_tokens)
    ctx = _darr(step_ctx)
    ectx = _darr(ext_ctx)
    kvm = _darr(kv_md)
    kvr = _darr(kv_rld)
    m = len(md)
    engines = md + rld
    K = len(engines)
    md_set = list(range(m))
    rld_set = list(range(m, K))
    # instance state
    tl = [0.0] * K
    G = [0.0] * K
    B = [0] * K
    kvu = [0.0] * K
    sc = [0.0] * K
    area = [0.0] * K
    fh: list[list[tuple[float, int]]] = [[] for _ in range(K)]
    wq: list[deque[int]] = [deque() for _ in range(K)]
    bm = [e.bmax for e in engines]
    kc = [e.kv_pool_bytes for e in engines]
    tabs = [e.steps for e in engines]
    col = [t.cols[0] if len(t.cols) == 1 else None for t in tabs]
    is_rld = [False] * m + [True] * len(rld)
    # request state
    status = bytearray(n)  # 0 new, 1 queued RLD, 2 on RLD, 3 paused at cap, 4 done on RLD, 5 MD
    adm = array("d", [0.0]) * n
    on = array("i", [-1]) * n
    need = array("q", [0]) * n
    held = array("d", [0.0]) * n
    first = array("d", [nan]) * n
    end = array("d", [nan]) * n
    rk = array("q", [0]) * n
    md_arr = array("d", [nan]) * n
    md_adm = array("d", [nan]) * n
    md_of = array("i", [-1]) * n
    heap: list[tuple] = []
    heappush, heappop = heapq.heappush, heapq.heappop
    seq = 0
    lat = float(ids_latency_s)

    stp = [0.0] * K  # step seconds at each instance's current batch (kept current)
    INF = math.inf
    nxt = [INF] * K  # each instance's next departure (few instances: min() beats a heap)

    def settle(k: int, t: float, joined: list[int]) -> None:
        """After k's batch changed at t: new step time, first tokens of those who joined,
        next departure."""
        b = B[k]
        if not b:
            kvu[k] = sc[k] = 0.0
        c = col[k]
        s = stp[k] = c[b or 1] if c is not None else tabs[k](b or 1, sc[k] / b if b else ctx[0])
        for r in joined:
            if first[r] != first[r]:  # NaN: no token yet
                first[r] = t + s
        h = fh[k]
        while h and on[h[0][1]] != k:
            heappop(h)  # left RLD early (handoff)
        if h:
            nxt[k] = t + (h[0][0] - G[k]) * s
        else:
            nxt[k] = INF
            if not b:
                G[k] = 0.0  # idle: restart the step counter (precision on long runs)

    def advance(k: int, t: float) -> None:
        b = B[k]
        if b:
            dt = t - tl[k]
            G[k] += dt / stp[k]
            area[k] += b * dt
        tl[k] = t

    def admit(k: int, r: int, t: float) -> None:
        g = G[k]
        heappush(fh[k], (g + need[r], r))
        B[k] += 1
        kvu[k] += held[r]
        sc[k] += ctx[r]
        adm[r] = g
        on[r] = k
        if is_rld[k]:
            status[r] = 2
        else:
            md_adm[r] = t
            md_of[r] = k

    def pump(k: int, t: float, joined: list[int]) -> None:
        """Admit waiters FIFO while they fit."""
        q = wq[k]
        rl = is_rld[k]
        while q:
            r = q[0]
            if rl and status[r] != 1:
                q.popleft()  # handed to MD while waiting
                continue
            b = B[k]
            if b and (b >= bm[k] or kvu[k] + held[r] > kc[k]):
                break
            q.popleft()
            admit(k, r, t)
            joined.append(r)

    def arrive(ks: list[int], r: int, t: float) -> None:
        k = ks[0]
        if len(ks) > 1:
            best = (B[k] + len(wq[k])) / bm[k]
            for j in ks[1:]:
                ld = (B[j] + len(wq[j])) / bm[j]
                if ld < best:
                    best, k = ld, j
        b = B[k]
        if not wq[k] and (not b or (b < bm[k] and kvu[k] + held[r] <= kc[k])):
            advance(k, t)
            admit(k, r, t)
            settle(k, t, [r])
        else:
            wq[k].append(r)

    def to_md(r: int, t: float) -> None:
        status[r] = 5
        left = out[r] - rk[r]
        md_arr[r] = t
        if left <= 0:
            end[r] = t
            return
        need[r] = left
        held[r] = kvm[r]
        arrive(md_set, r, t)

    def leave_rld(r: int, t: float) -> int:
        """Take a running request off RLD now; returns the tokens it made there."""
        k = on[r]
        advance(k, t)
        tok = int(G[k] - adm[r] + 1e-9)
        if tok > need[r]:
            tok = need[r]
        on[r] = -1
        B[k] -= 1
        kvu[k] -= held[r]
        sc[k] -= ctx[r]
        rk[r] = tok
        status[r] = 5
        if tok == 0:
            first[r] = nan  # MD makes the first token
        joined: list[int] = []
        pump(k, t, joined)
        settle(k, t, joined)
        return tok

    # static events: (time, kind, request); kind 0 KV at RLD, 1 KV at MD (p_md), 2 handoff
    rt = np.asarray(route)
    a_rld = np.flatnonzero((rt == P_RLD_MD) | (rt == P_RLD))
    a_md = np.flatnonzero(rt == P_MD)
    a_ho = np.flatnonzero(rt == P_RLD_MD)
    times = np.concatenate(
        [np.asarray(t_rld)[a_rld], np.asarray(t_md)[a_md], np.asarray(t_md)[a_ho]]
    )
    kinds = np.concatenate(
        [np.zeros(len(a_rld), np.int8), np.ones(len(a_md), np.int8), np.full(len(a_ho), 2, np.int8)]
    )
    rids = np.concatenate([a_rld, a_md, a_ho])
    order = np.lexsort((rids, kinds, times))
    s_t = _darr(times[order])
    s_k = bytes(kinds[order].astype(np.uint8))
    s_r = _qarr(rids[order])
    S = len(s_t)
    t0 = s_t[0] if S else 0.0
    for k in range(K):
        tl[k] = t0
    i = 0
    events = 0
    t = t0
    while True:
        ts = s_t[i] if i < S else INF
        th = heap[0][0] if heap else INF
        tn = min(nxt) if K > 1 else nxt[0]
        if tn < ts and tn <= th:
            # an instance's next departure(s)
            k = nxt.index(tn) if K > 1 else 0
            t = tn
            h = fh[k]
            g = h[0][0]
            area[k] += B[k] * (t - tl[k])
            G[k] = g
            tl[k] = t
            rl = is_rld[k]
            while h and h[0][0] <= g + 1e-9:
                _, r = heappop(h)
                if on[r] != k:
                    continue
                on[r] = -1
                B[k] -= 1
                kvu[k] -= held[r]
                sc[k] -= ctx[r]
                if rl:
                    rk[r] = need[r]
                    if need[r] >= out[r]:
                        end[r] = t
                        status[r] = 4
                    else:
                        status[r] = 3  # relay cap reached before the KV crossed the line
                else:
                    end[r] = t
            joined: list[int] = []
            if wq[k]:
                pump(k, t, joined)
            settle(k, t, joined)
            continue
        if ts == INF and th == INF:
            break
        events += 1
        if progress is not None and not events & (_TICK - 1):
            progress("decode", i, S)
        if ts <= th:
            t = ts
            kind = s_k[i]
            r = s_r[i]
            i += 1
            if kind == 1:
                to_md(r, t)
            elif kind == 0:
                if status[r] != 0:
                    continue  # the line beat RDMA: already on MD
                need[r] = min(out[r], relay_cap) if routes[r] == P_RLD_MD else out[r]
                held[r] = kvr[r]
                status[r] = 1
                arrive(rld_set, r, t)
            else:  # handoff: the KV has crossed the line
                st = status[r]
                if st <= 1:  # not (yet) decoding on RLD
                    to_md(r, t)
                elif st == 2:
                    k = on[r]
                    advance(k, t)
                    k0 = int(G[k] - adm[r] + 1e-9)
                    if one_shot or k0 == 0:
                        tok = leave_rld(r, t)
                        if tok == 0:
                            to_md(r, t)
                        else:
                            seq += 1
                            heappush(heap, (t + lat + extend(tok, ectx[r]), seq, 11, r, 0))
                    else:
                        seq += 1
                        heappush(heap, (t + lat + extend(k0, ectx[r]), seq, 12, r, 0))
                elif st == 3:  # paused at the cap: MD extends the whole relay
                    seq += 1
                    heappush(heap, (t + lat + extend(rk[r], ectx[r]), seq, 11, r, 0))
            continue
        t, _, kind, a, b = heappop(heap)
        if kind == 11:
            to_md(a, t)
        else:  # catch-up extend done: hand over now
            st = status[a]
            if st == 2:
                leave_rld(a, t)
                to_md(a, t)
            elif st == 3:
                to_md(a, t)
    span = t - t0
    return DecodeResult(
        np.frombuffer(first, dtype=float),
        np.frombuffer(end, dtype=float),
        np.frombuffer(rk, dtype=np.int64).copy(),
        np.frombuffer(md_arr, dtype=float),
        np.frombuffer(md_adm, dtype=float),
        np.frombuffer(md_of, dtype=np.int32).copy(),
        [a / span if span > 0 else 0.0 for a in area],
        span,
    )
