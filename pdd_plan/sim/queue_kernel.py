"""The prefill pool's and the line's event loops, compiled (see :mod:`pdd_plan.sim.queues` for
the models): each mirrors the pure-Python loop it replaced line for line, with the same float
operations in the same order and the same tie-breaks, so replays are byte-identical. A
million requests pass through each; in CPython they took ~1 s (prefill) and ~2 s (line).

The heaps are :mod:`pdd_plan.sim.decode.heaps`' array heaps, ordered by (key, request or
server): the order of the ``(time, index)`` tuples ``heapq`` kept, so the same entry comes out
first (a heap's minimum does not depend on its layout). Compiled when a replay first needs
them and cached like the decode kernels (``heaps.jit``; the cache key covers this file).
"""

from __future__ import annotations

import math

import numpy as np
from numba.types import void

from pdd_plan.sim.decode.heaps import (
    F1,
    I1,
    cached,
    f8,
    heap_pop,
    heap_push,
    i8,
    jit,
    ready,
    ready_now,
)

INF = math.inf
# requests from which a replay compiles a loop it does not find in numba's cache: compiling one
# takes ~0.5-1 s of CPU, what the Python loop takes for ~300k requests (a verification replay
# is 20,000), so a small replay on a fresh install runs the Python loop, byte-identical
COMPILE_FROM = 300_000
# requests from which a replay loads a cached loop rather than run the Python one: loading one
# costs ~5-6 ms of CPU once a replay has numba up (the decode loop needs it anyway), what the
# Python loops take for ~5,000 requests (~1.1-1.3 us each; measured in fresh processes,
# BENCHMARKS.md "The verification replays"), and the compiled loop ~0.1 us each
LOAD_FROM = 5_000


def wanted(entry, n: int) -> bool:
    """Whether to run ``entry`` for ``n`` requests (else its Python loop): compiled (or loaded)
    in this process already, or a replay large enough to pay for loading it from the cache
    or, not there, for compiling it."""
    if ready_now(entry) or n >= COMPILE_FROM:
        return True
    return n >= LOAD_FROM and cached(entry)


F2 = f8[:, ::1]  # 2-D C-contiguous


@jit(void(F1, F2, I1, I1, F1, I1, I1, I1, F1, I1), defer=True)
def least_loaded(a, svc, first, cnt, start, server, slots, pos, key, tie):
    """FIFO servers in groups (row g of ``svc``: group g's service of every request; its
    ``cnt[g]`` servers numbered from ``first[g]``, their heap at ``slots[first[g]:]``): each
    arrival to the server that finishes it first, the first group on ties. Fills ``start``
    and ``server``."""
    G = cnt.shape[0]
    for k in range(a.shape[0]):
        t = a[k]
        best = INF
        bi = 0
        for i in range(G):
            f = key[slots[first[i]]]
            fin = (t if t > f else f) + svc[i, k]
            if fin < best:
                best = fin
                bi = i
        base = first[bi]
        j = heap_pop(slots, pos, key, tie, base, cnt[bi])  # heapq.heapreplace, in two
        f = key[j]
        start[k] = t if t > f else f
        server[k] = j
        key[j] = best
        heap_push(slots, pos, key, tie, base, cnt[bi] - 1, j)


@jit(void(F1, I1, F1, f8, f8, i8, F1, F1, F1, I1, F1, I1, I1, I1, I1, F1, I1), defer=True)
def line_events(
    ready_s,
    rids,
    size,
    C,
    cap,
    pool,
    start,
    end,
    sent,
    fresh,
    tag,
    slots,
    pos,
    tie,
    wq,
    out_t,
    out_n,
):
    """The line's event loop (``queues._replay`` without a router or DRC): KV-ready arrivals
    (``ready_s`` sorted, request ``rids``, ``size`` bytes by request; negative: sends nothing)
    and completions in time order. Fills ``start``, ``end``, ``sent``, ``fresh`` (the first
    ``out_n[3]`` entries); ``out_t[0]`` the last event's time, ``out_n[:3]`` transfers, most
    ever waiting, slots opened. ``slots``: the heap of active transfers (``pool`` + 1 long),
    ``pos``, ``tag`` and ``tie`` (= r) by request; ``wq`` the FIFO of waiters (N long)."""
    N = ready_s.shape[0]
    t_now = ready_s[0] if N else 0.0
    V = 0.0
    sumtag = 0.0
    qbytes = 0.0
    r = 0.0
    n = 0
    i = 0
    transfers = 0
    most = 0
    opened = 0
    qh = 0  # the wait queue: wq[qh:qt]
    qt = 0
    while True:
        ta = ready_s[i] if i < N else INF
        tc = t_now + (tag[slots[0]] - V) / r if n else INF
        if ta < tc:  # a KV is ready
            if n:
                V += (ta - t_now) * r
            t_now = ta
            k = rids[i]
            i += 1
            x = size[k]
            if x < 0.0:
                continue  # relay decode finishes it: nothing crosses the line
            sent[k] = x
            transfers += 1
            if n < pool:
                if n == opened:  # every slot opened so far is busy: open one
                    fresh[opened] = k
                    opened += 1
                start[k] = ta
                tag[k] = V + x
                heap_push(slots, pos, tag, tie, 0, n, k)
                sumtag += V + x
                n += 1
                r = C / n if C / n < cap else cap
            else:
                wq[qt] = k
                qt += 1
                qbytes += x
                if qt - qh > most:
                    most = qt - qh
        elif tc == INF:
            break
        else:  # a transfer's last byte leaves
            t_now = tc
            k = heap_pop(slots, pos, tag, tie, 0, n)
            V = tag[k]
            sumtag -= V
            end[k] = tc
            n -= 1
            if qt > qh:  # the freed slot goes to the first waiter
                k2 = wq[qh]
                qh += 1
                x2 = sent[k2]
                qbytes -= x2
                start[k2] = tc
                tag[k2] = V + x2
                heap_push(slots, pos, tag, tie, 0, n, k2)
                sumtag += V + x2
                n += 1
            if n == 0:  # the line emptied (so did the queue): restart the virtual clock
                V = 0.0
                sumtag = 0.0
                qbytes = 0.0
            else:
                r = C / n if C / n < cap else cap
    out_t[0] = t_now
    out_n[0] = transfers
    out_n[1] = most
    out_n[2] = opened


@jit(i8(F1, f8), defer=True, python=False)
def _cell(g, v):
    """The cell of ``v`` in the sorted grid ``g`` as ``sim.timings._bilinear`` finds it:
    ``searchsorted(g, v, side="right") - 1``, clipped to ``0 .. len(g) - 2``."""
    n = g.shape[0]
    lo, hi = 0, n
    while lo < hi:  # elements <= v
        mid = (lo + hi) >> 1
        if g[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    i = lo - 1
    return 0 if i < 0 else (n - 2 if i > n - 2 else i)


@jit(void(F1, F1, F2, F1, F1, F1), defer=True)
def bilinear(xg, yg, z, x, y, out):
    """``sim.timings._bilinear`` into ``out``, element by element with its float operations
    in its order (the clamp, the cell by ``searchsorted(side="right") - 1``, the four corners
    summed left to right), so the bits are the same: a 1M-request prefill stage spent ~0.25 s
    in the vectorized one's temporaries."""
    nx = xg.shape[0]
    ny = yg.shape[0]
    for k in range(x.shape[0]):
        xv = x[k]
        xv = xv if xv > xg[0] else xg[0]  # np.clip: max with the low end, then min with the high
        xv = xv if xv < xg[nx - 1] else xg[nx - 1]
        yv = y[k]
        yv = yv if yv > yg[0] else yg[0]
        yv = yv if yv < yg[ny - 1] else yg[ny - 1]
        i = _cell(xg, xv)
        j = _cell(yg, yv)
        fx = (xv - xg[i]) / (xg[i + 1] - xg[i])
        fy = (yv - yg[j]) / (yg[j + 1] - yg[j])
        gx = 1.0 - fx
        gy = 1.0 - fy
        a = z[i, j] * gx * gy
        b = z[i + 1, j] * fx * gy
        c = z[i, j + 1] * gx * fy
        d = z[i + 1, j + 1] * fx * fy
        out[k] = a + b + c + d


__all__ = ["bilinear", "least_loaded", "line_events", "ready", "wanted", "np"]
