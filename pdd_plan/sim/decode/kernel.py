"""The decode replay's event loop, compiled (see :mod:`pdd_plan.sim.decode.decoder` for the model).

Decode is an inherently sequential event loop - every event acts on the state the previous one
left - over millions of events, which CPython runs at about a microsecond each. So the whole
loop runs here in numba-compiled code, entered once per chunk of a million events (between
progress callbacks), with the state in a few numpy arrays (:mod:`pdd_plan.sim.decode.state`):
``R`` a record per request (index ``r``), ``Q`` a record per instance (index ``k``, MD first
then RLD), ``T`` the tables and parameters, ``W`` the heaps' slots and the loop's counters.

One function per event, named as before, each mirroring the pure-Python engine it replaced
line for line: the same float operations in the same order and the same tie-breaks, so plans
and replays are byte-identical. The one change of mechanism: a request taken off relay decode
early is removed from its instance's finish-tag heap at once (the Python loop left a stale tag
and skipped it later); the live tags leave in the same (tag, request) order either way.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numba
import numpy as np
from numba.types import boolean, void

from pdd_plan.sim.decode import state as decode_state
from pdd_plan.sim.decode.heaps import (
    F1,
    I1,
    f8,
    fifo_pop,
    fifo_push,
    from_python,  # noqa: F401  (the decoder reaches the kernels through this module)
    heap_pop,
    heap_push,
    heap_remove,
    i8,
    jit,
    ready,  # noqa: F401
)
from pdd_plan.sim.decode.io import DecodeInputs, Engine

# State and Event values (states.py), spelled out: a compiled kernel freezes globals, and
# numba's cache only notices edits to this file (tests/unit/sim/test_sim_kernel.py checks they match).
NEW, QUEUED_RLD, ON_RLD, PAUSED, DONE_RLD, ON_MD = 0, 1, 2, 3, 4, 5
KV_AT_RLD, KV_AT_MD, HANDOFF, EXTENDED, CAUGHT_UP = 0, 1, 2, 11, 12
P_RLD_MD = 1  # queues.Route.P_RLD_MD
# W.counts fields: heap size, event sequence number, next static event, events so far
SIZE, SEQ, NEXT, EVENTS = 0, 1, 2, 3
INF = math.inf
NAN = math.nan


def _state_types() -> tuple:
    """The numba types of R, Q, T, W, from a one-request, one-instance state: every function
    below is compiled for exactly one signature (see ``kernel_heaps.jit``)."""
    one, i = np.zeros(1), np.zeros(1, dtype=np.int64)
    eng = Engine(SimpleNamespace(cols=[[1.0, 1.0]]), 1, 1.0)  # type: ignore[arg-type]
    inp = DecodeInputs(i, one, one, i, one, one, one, one, [eng])
    Q, T, slots = decode_state.instances(inp, 0.0)
    state = (decode_state.requests(inp), Q, T, decode_state.work(slots, 1, 1, 0.0))
    return tuple(numba.typeof(x) for x in state)


R_, Q_, T_, W_ = _state_types()


# ---------------------------------------------------------------------- tables
@jit(f8(T_, i8, i8, f8, f8), defer=True, python=False)
def step_time(T, j, b, sc, ctx0):
    """Seconds of one decode step of table j at batch b with contexts summing to sc
    (``StepTable.__call__``, same arithmetic)."""
    bb = b if b else 1
    tab = T.steps[j]
    off = tab.off
    if tab.ncol == 1:
        return T.s_vals[off + bb]
    m = sc / b if b else ctx0
    if bb > tab.bmax:
        bb = tab.bmax
    last = tab.ncol - 1
    x = (m - tab.c0) * tab.inv_dc
    c = int(x) if x > 0.0 else 0
    if x <= 0.0:
        return T.s_vals[off + bb]
    if c >= last:
        return T.s_vals[off + last * tab.len + bb]
    f = x - c
    lo = off + c * tab.len + bb
    return T.s_vals[lo] * (1.0 - f) + T.s_vals[lo + tab.len] * f


@jit(f8(T_, i8, f8), defer=True, python=False)
def extend_time(T, k, context):
    """Seconds MD needs to extend k relay tokens on context `context` (``ExtendTable.__call__``)."""
    if k > T.x_kmax:
        k = T.x_kmax
    cg = T.x_ctx
    n = cg.shape[0]
    if n == 1:
        return T.x_cols[0, k]
    j = 0  # bisect_right(cg, context) - 1, by a scan: a handful of context points
    while j < n and not context < cg[j]:
        j += 1
    j -= 1
    if j < 0:
        return T.x_cols[0, k]
    if j >= n - 1:
        return T.x_cols[n - 1, k]
    f = (context - cg[j]) / (cg[j + 1] - cg[j])
    return T.x_cols[j, k] * (1 - f) + T.x_cols[j + 1, k] * f


# ---------------------------------------------------------------------- instance mechanics
@jit(void(R_, Q_, T_, W_, i8, f8, i8), defer=True, python=False)
def settle(R, Q, T, W, k, t, n_joined):
    """After k's batch changed at t: new step time, first tokens of the ``n_joined`` requests
    in ``W.joined``, next departure."""
    q = Q[k]
    b = q.B
    if not b:
        q.kvu = 0.0
        q.sc = 0.0
    s = step_time(T, q.tab, b, q.sc, R[0].ctx)
    q.stp = s
    for i in range(n_joined):
        r = W.joined[i]
        if math.isnan(R[r].first):  # no token yet
            R[r].first = t + s
    if q.hsize:
        top = W.slots[q.hbase]
        q.nxt = t + (R[top].tag - q.G) * s
    else:
        q.nxt = INF
        if not b:
            q.G = 0.0  # idle: restart the step counter (precision on long runs)


@jit(void(Q_, i8, f8), defer=True, python=False)
def advance(Q, k, t):
    q = Q[k]
    b = q.B
    if b:
        dt = t - q.tl
        q.G += dt / q.stp
        q.area += b * dt
    q.tl = t


@jit(void(R_, Q_, W_, i8, i8, f8), defer=True, python=False)
def admit(R, Q, W, k, r, t):
    q, x = Q[k], R[r]
    g = q.G
    x.tag = g + x.need  # the step count at which r leaves
    heap_push(W.slots, R.hpos, R.tag, R.rid, q.hbase, q.hsize, r)
    q.hsize += 1
    q.B += 1
    q.kvu += x.held
    q.sc += x.ctx
    x.adm = g
    x.on = k
    if q.is_rld:
        x.status = ON_RLD
    else:
        x.md_adm = t
        x.md_of = k


@jit(i8(R_, Q_, W_, i8, f8), defer=True, python=False)
def pump(R, Q, W, k, t):
    """Admit waiters FIFO while they fit; returns how many joined (in ``W.joined``)."""
    q = Q[k]
    rl = q.is_rld
    link = R.q_rld if rl else R.q_md
    n = 0
    while q.qlen:
        r = q.qhead
        if rl and R[r].status != QUEUED_RLD:
            fifo_pop(Q.qhead, Q.qlen, link, k)  # handed to MD while waiting
            continue
        b = q.B
        if b and (b >= q.bm or q.kvu + R[r].held > q.kc):
            break
        fifo_pop(Q.qhead, Q.qlen, link, k)
        admit(R, Q, W, k, r, t)
        W.joined[n] = r
        n += 1
    return n


@jit(void(R_, Q_, T_, W_, i8, i8, i8, f8), defer=True, python=False)
def arrive(R, Q, T, W, lo, hi, r, t):
    """Join the least-loaded instance of lo..hi-1 (batch + queue over its cap), at once when
    it has room, else FIFO."""
    k = lo
    if hi - lo > 1:
        best = (Q[k].B + Q[k].qlen) / Q[k].bm
        for j in range(lo + 1, hi):
            ld = (Q[j].B + Q[j].qlen) / Q[j].bm
            if ld < best:
                best = ld
                k = j
    q = Q[k]
    b = q.B
    if q.qlen or (b and (b >= q.bm or q.kvu + R[r].held > q.kc)):
        fifo_push(Q.qhead, Q.qtail, Q.qlen, R.q_rld if q.is_rld else R.q_md, k, r)
        return
    advance(Q, k, t)
    admit(R, Q, W, k, r, t)
    W.joined[0] = r
    settle(R, Q, T, W, k, t, 1)


@jit(i8(R_, Q_, T_, W_, i8, f8), defer=True, python=False)
def leave_rld(R, Q, T, W, r, t):
    """Take a running request off RLD now; returns the tokens it made there."""
    x = R[r]
    k = x.on
    q = Q[k]
    advance(Q, k, t)
    tok = int(q.G - x.adm + 1e-9)
    if tok > x.need:
        tok = x.need
    heap_remove(W.slots, R.hpos, R.tag, R.rid, q.hbase, q.hsize, r)
    q.hsize -= 1
    x.on = -1
    q.B -= 1
    q.kvu -= x.held
    q.sc -= x.ctx
    x.rk = tok
    x.status = ON_MD
    if tok == 0:
        x.first = NAN  # MD makes the first token
    settle(R, Q, T, W, k, t, pump(R, Q, W, k, t))
    return tok


# ---------------------------------------------------------------------- events
@jit(void(R_, i8, f8), defer=True, python=False)
def finish_relay(R, r, t):
    """A request made its relay tokens: done (p_rld, or a short p_rld_md) or paused."""
    x = R[r]
    need = x.need
    x.rk = need
    if need >= x.out:
        x.end = t
        x.status = DONE_RLD
    else:
        x.status = PAUSED  # relay cap reached before the KV crossed the line


@jit(void(R_, Q_, T_, W_, i8, f8), defer=True, python=False)
def departures(R, Q, T, W, k, t):
    """Instance k's next finish tag is reached at t: everyone at that tag leaves."""
    q = Q[k]
    base = q.hbase
    g = R[W.slots[base]].tag
    q.area += q.B * (t - q.tl)
    q.G = g
    q.tl = t
    rl = q.is_rld
    lim = g + 1e-9
    while q.hsize and R[W.slots[base]].tag <= lim:
        r = heap_pop(W.slots, R.hpos, R.tag, R.rid, base, q.hsize)
        q.hsize -= 1
        x = R[r]
        x.on = -1
        q.B -= 1
        q.kvu -= x.held
        q.sc -= x.ctx
        if rl:
            finish_relay(R, r, t)
        else:
            x.end = t
    settle(R, Q, T, W, k, t, pump(R, Q, W, k, t) if q.qlen else 0)


@jit(void(R_, Q_, T_, W_, i8, f8), defer=True, python=False)
def kv_at_md(R, Q, T, W, r, t):
    """The request continues on MD (KV delivered, or extended there)."""
    x = R[r]
    x.status = ON_MD
    left = x.out - x.rk
    x.md_arr = t
    if left <= 0:
        x.end = t
        return
    x.need = left
    x.held = x.kvm
    arrive(R, Q, T, W, 0, T.n_md, r, t)


@jit(void(R_, Q_, T_, W_, i8, f8), defer=True, python=False)
def kv_at_rld(R, Q, T, W, r, t):
    x = R[r]
    if x.status != NEW:
        return  # the line beat RDMA: already on MD
    out = x.out
    x.need = (out if out <= T.relay_cap else T.relay_cap) if x.route == P_RLD_MD else out
    x.held = x.kvr
    x.status = QUEUED_RLD
    arrive(R, Q, T, W, T.n_md, Q.shape[0], r, t)


@jit(void(R_, W_, f8, i8, i8), defer=True, python=False)
def push_event(R, W, t, kind, r):
    """A dynamic event: r's ``kind`` at t (a request has at most one pending)."""
    W.counts[SEQ] += 1
    x = R[r]
    x.ev_t = t
    x.ev_seq = W.counts[SEQ]
    x.ev_kind = kind
    heap_push(W.heap, R.ev_pos, R.ev_t, R.ev_seq, 0, W.counts[SIZE], r)
    W.counts[SIZE] += 1


@jit(void(R_, Q_, T_, W_, i8, f8), defer=True, python=False)
def handoff(R, Q, T, W, r, t):
    """The KV has crossed the line: move the request to MD as its state allows."""
    x = R[r]
    st = x.status
    if st <= QUEUED_RLD:  # not (yet) decoding on RLD
        kv_at_md(R, Q, T, W, r, t)
    elif st == ON_RLD:
        k = x.on
        advance(Q, k, t)
        k0 = int(Q[k].G - x.adm + 1e-9)
        if T.one_shot or k0 == 0:
            tok = leave_rld(R, Q, T, W, r, t)
            if tok == 0:
                kv_at_md(R, Q, T, W, r, t)
            else:
                push_event(R, W, t + T.lat + extend_time(T, tok, x.ectx), EXTENDED, r)
        else:
            push_event(R, W, t + T.lat + extend_time(T, k0, x.ectx), CAUGHT_UP, r)
    elif st == PAUSED:  # MD extends the whole relay
        push_event(R, W, t + T.lat + extend_time(T, x.rk, x.ectx), EXTENDED, r)


@jit(void(R_, Q_, T_, W_, i8, f8), defer=True, python=False)
def caught_up(R, Q, T, W, r, t):
    """catch_up: MD has extended the first tokens; RLD hands over now."""
    st = R[r].status
    if st == ON_RLD:
        leave_rld(R, Q, T, W, r, t)
        kv_at_md(R, Q, T, W, r, t)
    elif st == PAUSED:
        kv_at_md(R, Q, T, W, r, t)


@jit(void(R_, Q_, T_, W_, i8, i8, f8), defer=True, python=False)
def on_event(R, Q, T, W, kind, r, t):
    if kind == KV_AT_RLD:
        kv_at_rld(R, Q, T, W, r, t)
    elif kind == KV_AT_MD or kind == EXTENDED:
        kv_at_md(R, Q, T, W, r, t)
    elif kind == HANDOFF:
        handoff(R, Q, T, W, r, t)
    elif kind == CAUGHT_UP:
        caught_up(R, Q, T, W, r, t)


# ---------------------------------------------------------------------- the loop
@jit(boolean(R_, Q_, T_, W_, F1, I1, I1, i8), defer=True)
def run_events(R, Q, T, W, s_t, s_k, s_r, budget):
    """Merge the static events (sorted), the dynamic heap and the instances' departures in
    time order (departures first on ties, then static events, then the heap), for at most
    ``budget`` more events; returns True when every event is done (time of the last in
    ``W.now[0]``). Resumes where the previous call stopped."""
    S = s_t.shape[0]
    K = Q.shape[0]
    i = W.counts[NEXT]
    events = W.counts[EVENTS]
    stop = events + budget
    t = W.now[0]
    done = False
    while True:
        ts = s_t[i] if i < S else INF
        th = R[W.heap[0]].ev_t if W.counts[SIZE] else INF
        tn = INF
        kn = 0
        for k in range(K):  # few instances: a scan beats a heap
            if Q[k].nxt < tn:
                tn = Q[k].nxt
                kn = k
        if tn < ts and tn <= th:
            t = tn
            departures(R, Q, T, W, kn, t)
            continue
        if ts == INF and th == INF:
            done = True
            break
        if events == stop:
            break
        events += 1
        if ts <= th or not W.counts[SIZE]:
            t = ts
            on_event(R, Q, T, W, s_k[i], s_r[i], t)
            i += 1
        else:
            r = heap_pop(W.heap, R.ev_pos, R.ev_t, R.ev_seq, 0, W.counts[SIZE])
            W.counts[SIZE] -= 1
            t = R[r].ev_t
            on_event(R, Q, T, W, R[r].ev_kind, r, t)
    W.counts[NEXT] = i
    W.counts[EVENTS] = events
    W.now[0] = t
    return done
