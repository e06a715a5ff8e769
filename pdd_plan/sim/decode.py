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
from collections import deque

import numpy as np

from .decode_io import DecodeInputs, DecodeResult, Engine
from .queues import Progress, Route
from .states import Event, State
from .tables import StepTable

_TICK = 1 << 16
INF = math.inf
NAN = math.nan
__all__ = ["DecodeInputs", "DecodeResult", "Decoder", "Engine", "run_decode", "static_events"]


# The states as plain ints: the hot loops compare them a few million times, and comparing two
# ints is cheaper than an IntEnum member lookup and comparison (same values, see states.py).
NEW, QUEUED_RLD, ON_RLD, PAUSED, DONE_RLD, ON_MD = (int(s) for s in State)
_P_RLD_MD = int(Route.P_RLD_MD)


def _steps(tab: object) -> tuple:
    """An instance's step lookup, unpacked for :meth:`Decoder.settle`: ``(column, None)`` for a
    single-context table, ``(None, grid)`` for a ``StepTable`` of several context columns
    (``StepTable.__call__``'s arithmetic inlined there), ``(None, None)`` to call the table."""
    cols = tab.cols  # type: ignore[attr-defined]
    if len(cols) == 1:
        return cols[0], None
    if isinstance(tab, StepTable):
        return None, (cols, tab.c0, tab.inv_dc, tab.bmax, len(cols) - 1)
    return None, None


class Decoder:
    """The decode state (instances MD first, then RLD; requests by index) and one method per
    event. Every hot field is a plain Python list (of floats or ints): a million requests pass
    through here, and list indexing is the cheapest subscript CPython has (typed arrays and
    numpy box a new object on every read)."""

    def __init__(self, inp: DecodeInputs):
        n = int(len(inp.route))
        self.routes = np.asarray(inp.route, dtype=np.int64).tolist()
        self.out = np.asarray(inp.output_tokens, dtype=np.int64).tolist()
        self.ctx = np.asarray(inp.step_ctx, dtype=float).tolist()
        self.ectx = np.asarray(inp.ext_ctx, dtype=float).tolist()
        self.kvm = np.asarray(inp.kv_md, dtype=float).tolist()
        self.kvr = np.asarray(inp.kv_rld, dtype=float).tolist()
        m = len(inp.md)
        engines = inp.md + inp.rld
        K = self.K = len(engines)
        self.md_set = list(range(m))
        self.rld_set = list(range(m, K))
        # instance state: last update, step counter, batch, KV used, sum of contexts, batch area
        self.tl = [0.0] * K
        self.G = [0.0] * K
        self.B = [0] * K
        self.kvu = [0.0] * K
        self.sc = [0.0] * K
        self.area = [0.0] * K
        self.fh: list[list[tuple[float, int]]] = [[] for _ in range(K)]  # finish tags
        self.wq: list[deque[int]] = [deque() for _ in range(K)]
        self.bm = [e.bmax for e in engines]
        self.kc = [e.kv_pool_bytes for e in engines]
        self.tabs = [e.steps for e in engines]
        self.col, self.grid = (list(x) for x in zip(*map(_steps, self.tabs))) if K else ([], [])
        self.is_rld = [False] * m + [True] * len(inp.rld)
        self.stp = [0.0] * K  # step seconds at each instance's current batch (kept current)
        self.nxt = [INF] * K  # each instance's next departure (few instances: min() beats a heap)
        # request state
        self.status = [NEW] * n  # State
        self.adm = [0.0] * n  # step counter at admission
        self.on = [-1] * n  # instance it runs on
        self.need = [0] * n  # tokens to make there
        self.held = [0.0] * n  # KV it reserves there
        self.first = [NAN] * n
        self.end = [NAN] * n
        self.rk = [0] * n  # tokens made on RLD
        self.md_arr = [NAN] * n
        self.md_adm = [NAN] * n
        self.md_of = [-1] * n
        self.heap: list[tuple] = []  # dynamic events: (time, seq, Event, request, 0)
        self.seq = 0
        self.lat = float(inp.ids_latency_s)
        self.extend = inp.extend
        self.relay_cap = int(inp.relay_cap)
        self.one_shot = bool(inp.one_shot)

    # ------------------------------------------------------------------ instance mechanics
    def settle(self, k: int, t: float, joined: list[int]) -> None:
        """After k's batch changed at t: new step time, first tokens of those who joined,
        next departure."""
        b = self.B[k]
        if not b:
            self.kvu[k] = self.sc[k] = 0.0
        # the step at the new batch (StepTable.__call__ inlined, same arithmetic): two
        # lookups a request, the hottest lines of the replay
        c = self.col[k]
        bb = b or 1
        if c is not None:
            s = c[bb]
        else:
            m = self.sc[k] / b if b else self.ctx[0]
            grid = self.grid[k]
            if grid is None:
                s = self.tabs[k](bb, m)
            else:
                cols, c0, inv_dc, bmax, last = grid
                if bb > bmax:
                    bb = bmax
                x = (m - c0) * inv_dc
                j = int(x) if x > 0.0 else 0
                if x <= 0.0 or j >= last:
                    s = cols[0 if x <= 0.0 else -1][bb]
                else:
                    f = x - j
                    s = cols[j][bb] * (1.0 - f) + cols[j + 1][bb] * f
        self.stp[k] = s
        first = self.first
        for r in joined:
            if first[r] != first[r]:  # NaN: no token yet
                first[r] = t + s
        h = self.fh[k]
        on = self.on
        while h and on[h[0][1]] != k:
            heapq.heappop(h)  # left RLD early (handoff)
        if h:
            self.nxt[k] = t + (h[0][0] - self.G[k]) * s
        else:
            self.nxt[k] = INF
            if not b:
                self.G[k] = 0.0  # idle: restart the step counter (precision on long runs)

    def advance(self, k: int, t: float) -> None:
        b = self.B[k]
        if b:
            dt = t - self.tl[k]
            self.G[k] += dt / self.stp[k]
            self.area[k] += b * dt
        self.tl[k] = t

    def admit(self, k: int, r: int, t: float) -> None:
        g = self.G[k]
        heapq.heappush(self.fh[k], (g + self.need[r], r))
        self.B[k] += 1
        self.kvu[k] += self.held[r]
        self.sc[k] += self.ctx[r]
        self.adm[r] = g
        self.on[r] = k
        if self.is_rld[k]:
            self.status[r] = ON_RLD
        else:
            self.md_adm[r] = t
            self.md_of[r] = k

    def pump(self, k: int, t: float, joined: list[int]) -> None:
        """Admit waiters FIFO while they fit."""
        q = self.wq[k]
        rl = self.is_rld[k]
        status, B, bm, kvu, kc, held = self.status, self.B, self.bm, self.kvu, self.kc, self.held
        while q:
            r = q[0]
            if rl and status[r] != QUEUED_RLD:
                q.popleft()  # handed to MD while waiting
                continue
            b = B[k]
            if b and (b >= bm[k] or kvu[k] + held[r] > kc[k]):
                break
            q.popleft()
            self.admit(k, r, t)
            joined.append(r)

    def arrive(self, ks: list[int], r: int, t: float) -> None:
        """Join the least-loaded instance of `ks` (batch + queue over its cap), at once when
        it has room (the hot path: advance, admit and settle inlined), else FIFO."""
        B, wq, bm = self.B, self.wq, self.bm
        k = ks[0]
        if len(ks) > 1:
            best = (B[k] + len(wq[k])) / bm[k]
            for j in ks[1:]:
                ld = (B[j] + len(wq[j])) / bm[j]
                if ld < best:
                    best, k = ld, j
        b = B[k]
        if wq[k] or (b and (b >= bm[k] or self.kvu[k] + self.held[r] > self.kc[k])):
            wq[k].append(r)
            return
        if b:  # advance(k, t)
            dt = t - self.tl[k]
            self.G[k] += dt / self.stp[k]
            self.area[k] += b * dt
        self.tl[k] = t
        g = self.G[k]  # admit(k, r, t), inlined
        heapq.heappush(self.fh[k], (g + self.need[r], r))
        B[k] = b + 1
        self.kvu[k] += self.held[r]
        self.sc[k] += self.ctx[r]
        self.adm[r] = g
        self.on[r] = k
        if self.is_rld[k]:
            self.status[r] = ON_RLD
        else:
            self.md_adm[r] = t
            self.md_of[r] = k
        self.settle(k, t, [r])

    def leave_rld(self, r: int, t: float) -> int:
        """Take a running request off RLD now; returns the tokens it made there."""
        k = self.on[r]
        self.advance(k, t)
        tok = int(self.G[k] - self.adm[r] + 1e-9)
        if tok > self.need[r]:
            tok = self.need[r]
        self.on[r] = -1
        self.B[k] -= 1
        self.kvu[k] -= self.held[r]
        self.sc[k] -= self.ctx[r]
        self.rk[r] = tok
        self.status[r] = ON_MD
        if tok == 0:
            self.first[r] = NAN  # MD makes the first token
        joined: list[int] = []
        self.pump(k, t, joined)
        self.settle(k, t, joined)
        return tok

    def push(self, t: float, kind: Event, r: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, r, 0))

    # ------------------------------------------------------------------ events
    def departures(self, k: int, t: float) -> None:
        """Instance k's next finish tag is reached at t: everyone at that tag leaves."""
        h = self.fh[k]
        g = h[0][0]
        B, on = self.B, self.on
        self.area[k] += B[k] * (t - self.tl[k])
        self.G[k] = g
        self.tl[k] = t
        rl = self.is_rld[k]
        kvu, sc, held, ctx, end = self.kvu, self.sc, self.held, self.ctx, self.end
        heappop = heapq.heappop
        lim = g + 1e-9
        while h and h[0][0] <= lim:
            r = heappop(h)[1]
            if on[r] != k:
                continue
            on[r] = -1
            B[k] -= 1
            kvu[k] -= held[r]
            sc[k] -= ctx[r]
            if rl:
                self.finish_relay(r, t)
            else:
                end[r] = t
        joined: list[int] = []
        if self.wq[k]:
            self.pump(k, t, joined)
        self.settle(k, t, joined)

    def finish_relay(self, r: int, t: float) -> None:
        """A request made its relay tokens: done (p_rld, or a short p_rld_md) or paused."""
        need = self.need[r]
        self.rk[r] = need
        if need >= self.out[r]:
            self.end[r] = t
            self.status[r] = DONE_RLD
        else:
            self.status[r] = PAUSED  # relay cap reached before the KV crossed the line

    def kv_at_md(self, r: int, t: float) -> None:
        """The request continues on MD (KV delivered, or extended there)."""
        self.status[r] = ON_MD
        left = self.out[r] - self.rk[r]
        self.md_arr[r] = t
        if left <= 0:
            self.end[r] = t
            return
        self.need[r] = left
        self.held[r] = self.kvm[r]
        self.arrive(self.md_set, r, t)

    def kv_at_rld(self, r: int, t: float) -> None:
        if self.status[r] != NEW:
            return  # the line beat RDMA: already on MD
        out = self.out[r]
        self.need[r] = min(out, self.relay_cap) if self.routes[r] == _P_RLD_MD else out
        self.held[r] = self.kvr[r]
        self.status[r] = QUEUED_RLD
        self.arrive(self.rld_set, r, t)

    def handoff(self, r: int, t: float) -> None:
        """The KV has crossed the line: move the request to MD as its state allows."""
        st = self.status[r]
        if st <= QUEUED_RLD:  # not (yet) decoding on RLD
            self.kv_at_md(r, t)
        elif st == ON_RLD:
            k = self.on[r]
            self.advance(k, t)
            k0 = int(self.G[k] - self.adm[r] + 1e-9)
            if self.one_shot or k0 == 0:
                tok = self.leave_rld(r, t)
                if tok == 0:
                    self.kv_at_md(r, t)
                else:
                    self.push(t + self.lat + self.extend(tok, self.ectx[r]), Event.EXTENDED, r)
            else:
                self.push(t + self.lat + self.extend(k0, self.ectx[r]), Event.CAUGHT_UP, r)
        elif st == PAUSED:  # MD extends the whole relay
            self.push(t + self.lat + self.extend(self.rk[r], self.ectx[r]), Event.EXTENDED, r)

    def caught_up(self, r: int, t: float) -> None:
        """catch_up: MD has extended the first tokens; RLD hands over now."""
        st = self.status[r]
        if st == ON_RLD:
            self.leave_rld(r, t)
            self.kv_at_md(r, t)
        elif st == PAUSED:
            self.kv_at_md(r, t)

    def handlers(self) -> list:
        """Event -> method, indexable by the event's value."""
        by = {
            Event.KV_AT_RLD: self.kv_at_rld,
            Event.KV_AT_MD: self.kv_at_md,
            Event.HANDOFF: self.handoff,
            Event.EXTENDED: self.kv_at_md,
            Event.CAUGHT_UP: self.caught_up,
        }
        return [by.get(e) for e in range(max(Event) + 1)]  # type: ignore[call-overload]

    def result(self, span: float) -> DecodeResult:
        return DecodeResult(
            np.array(self.first, dtype=float),
            np.array(self.end, dtype=float),
            np.array(self.rk, dtype=np.int64),
            np.array(self.md_arr, dtype=float),
            np.array(self.md_adm, dtype=float),
            np.array(self.md_of, dtype=np.int32),
            [a / span if span > 0 else 0.0 for a in self.area],
            span,
        )


def static_events(inp: DecodeInputs) -> tuple[list[float], list[int], list[int]]:
    """(times, kinds, requests) of the events known up front, sorted by (time, kind, request):
    KV at RLD (routes through RLD), KV at MD (p_md), handoff (p_rld_md)."""
    rt = np.asarray(inp.route)
    a_rld = np.flatnonzero((rt == Route.P_RLD_MD) | (rt == Route.P_RLD))
    a_md = np.flatnonzero(rt == Route.P_MD)
    a_ho = np.flatnonzero(rt == Route.P_RLD_MD)
    t_md, t_rld = np.asarray(inp.t_md, dtype=float), np.asarray(inp.t_rld, dtype=float)
    times = np.concatenate([t_rld[a_rld], t_md[a_md], t_md[a_ho]])
    kinds = np.concatenate(
        [
            np.full(len(a_rld), Event.KV_AT_RLD, np.int8),
            np.full(len(a_md), Event.KV_AT_MD, np.int8),
            np.full(len(a_ho), Event.HANDOFF, np.int8),
        ]
    )
    rids = np.concatenate([a_rld, a_md, a_ho])
    order = np.lexsort((rids, kinds, times))
    return times[order].tolist(), kinds[order].tolist(), rids[order].tolist()


def run_decode(inp: DecodeInputs, progress: Progress | None = None) -> DecodeResult:
    """Replay decode: merge the static events, the dynamic heap and the instances' departures
    in time order (departures first on ties, then static events, then the heap)."""
    d = Decoder(inp)
    on_event = d.handlers()
    s_t, s_k, s_r = static_events(inp)
    S = len(s_t)
    s_t.append(INF)  # a sentinel: no bounds check per event
    heap, nxt, K = d.heap, d.nxt, d.K
    heappop = heapq.heappop
    departures = d.departures
    t0 = s_t[0] if S else 0.0
    d.tl = [t0] * K
    i = events = 0
    t = t0
    while True:
        ts = s_t[i]
        th = heap[0][0] if heap else INF
        tn = min(nxt) if K > 1 else nxt[0]
        if tn < ts and tn <= th:
            t = tn
            departures(nxt.index(tn) if K > 1 else 0, t)
            continue
        if ts == INF and th == INF:
            break
        events += 1
        if progress is not None and not events & (_TICK - 1):
            progress("decode", i, S)
        if ts <= th:
            t = ts
            on_event[s_k[i]](s_r[i], t)
            i += 1
        else:
            t, _, kind, r, _ = heappop(heap)
            on_event[kind](r, t)
    return d.result(t - t0)
