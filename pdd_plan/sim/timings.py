"""Perf-model tables built once per plan, so a million requests cost array lookups, not model calls.

* :class:`PrefillTimes` - chunked prefill of ``new`` tokens after ``cached`` ones, as
  ``roofline.prefill_time`` composes it: full chunks at growing context plus one tail chunk.
  ``chunk_time`` is tabulated (full chunk: 1-D over context; tail chunk: 2-D over size and
  context) and each request's chunks are summed with numpy; agreement with the exact
  ``prefill_time`` is checked by a test (well under 1%).
* :class:`StepTable` - a decode step at batch ``B`` and mean context, from ``roofline.decode_step``
  on a batch grid and a few context points, interpolated to every integer batch.
* :class:`ExtendTable` - main decode's extend pass over ``k`` relay tokens (the handoff).
"""

from __future__ import annotations

import bisect
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from pdd_plan.perf import grid, roofline
from pdd_plan.perf.instance import Instance

T = TypeVar("T")


def _bilinear(
    xg: np.ndarray, yg: np.ndarray, z: np.ndarray, x: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """z[i, j] at (xg[i], yg[j]), linear in both, clamped to the grid. In compiled code
    (``queue_kernel.bilinear``, the same bits) where the kernels are loaded and it pays."""
    kernel = _compiled_bilinear(len(x))
    if kernel is not None:
        out = np.empty(len(x))
        f = np.ascontiguousarray
        kernel(
            np.array(xg, dtype=float),  # copies: the memoized tables are read-only
            np.array(yg, dtype=float),
            np.array(z, dtype=float),
            f(x, dtype=float),
            f(y, dtype=float),
            out,
        )
        return out
    x = np.clip(x, xg[0], xg[-1])
    y = np.clip(y, yg[0], yg[-1])
    i = np.clip(np.searchsorted(xg, x, side="right") - 1, 0, len(xg) - 2)
    j = np.clip(np.searchsorted(yg, y, side="right") - 1, 0, len(yg) - 2)
    fx = (x - xg[i]) / (xg[i + 1] - xg[i])
    fy = (y - yg[j]) / (yg[j + 1] - yg[j])
    gx, gy = 1 - fx, 1 - fy  # each used twice; the products keep their order (same bits)
    zf, m = z.ravel(), z.shape[1]
    ij = i * m + j  # one flat gather per corner instead of a 2-D fancy index
    return zf[ij] * gx * gy + zf[ij + m] * fx * gy + zf[ij + 1] * gx * fy + zf[ij + m + 1] * fx * fy


def _compiled_bilinear(n: int):
    """``queue_kernel.bilinear`` where a replay has loaded the kernels and ``n`` points pay for
    it (``queue_kernel.wanted``), else None (the vectorized loop: a process without numba)."""
    qk = sys.modules.get("pdd_plan.sim.queue_kernel")
    if qk is None or not qk.wanted(qk.bilinear, n):
        return None
    qk.ready(qk.bilinear)
    return qk.bilinear


# Tables already computed, by (what, instance, arguments). optimize replays every
# architecture's plan (and each verification round) on the same requests, usually with the same
# instance types: the tables are the same numbers, and tabulating them was most of a replay's
# time (the default scenario: 8 prefill slices computed 3 times per optimize). Keys hold the
# instance by value (Instance.value_key), so equal numbers are reused and nothing else; values
# are read-only; bounded, least recently used first out.
_CACHE: OrderedDict[tuple, object] = OrderedDict()
_CACHE_MAX = 1024
_CACHE_LOCK = threading.Lock()


def _memo(key: tuple, compute: Callable[[], T]) -> T:
    """compute(), or what it returned for the same key before."""
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]  # type: ignore[return-value]
    value = compute()  # outside the lock: threads of a sweep tabulate different keys at once
    with _CACHE_LOCK:
        _CACHE[key] = value
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return value


def _readonly(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _instance_key(inst: Instance) -> tuple:
    """Everything the perf model reads from an instance, hashable (Instance.value_key)."""
    return inst.value_key


def _context_grid(cmax: float, n: int) -> np.ndarray:
    return np.unique(np.linspace(0.0, max(float(cmax), 1.0), n))


class PrefillTimes:
    """Seconds one prefill instance spends on a request, vectorized over requests.

    ``roofline.prefill_time(new, cached)`` runs ``q`` full chunks then a tail chunk of ``r``
    tokens (``new = q * chunk + r``, ``0 < r <= chunk``). For every ``q`` that occurs, the exact
    ``(full chunks + tail).total_s`` - summed with ``PassTime`` arithmetic, so however the perf
    model aggregates passes - is tabulated over a grid of (r, cached) and interpolated
    bilinearly; the tail-chunk dips stay because ``q`` is never interpolated.
    """

    def __init__(self, inst: Instance, chunk: int):
        self.inst, self.chunk = inst, int(chunk)
        self._key = (_instance_key(inst), self.chunk)
        m = np.geomspace(1, self.chunk, 40)
        self.rg = np.unique(np.concatenate([m, np.linspace(1, self.chunk, 9)]).round())

    def _slice(self, q: int, c_lo: float, c_hi: float) -> tuple[np.ndarray, np.ndarray]:
        key = ("prefill", self._key, q, c_lo, c_hi)
        cg, z = _memo(key, lambda: _readonly(*self._tabulate(q, c_lo, c_hi)))
        return cg, z

    def _tabulate(self, q: int, c_lo: float, c_hi: float) -> tuple[np.ndarray, np.ndarray]:
        if c_hi - c_lo < 1.0:
            cg = np.array([c_lo, c_lo + 1.0])
        else:
            # context effects are smooth: about one point per 4K tokens of range, 3 to 17
            k = int(np.clip(2 + (c_hi - c_lo) / 4096, 3, 17))
            lin = np.linspace(c_lo, c_hi, k)
            geo = c_lo + np.geomspace(64, c_hi - c_lo, 4) if c_hi - c_lo > 64 else lin[:0]
            cg = np.unique(np.concatenate([lin, geo]))
        ck = float(self.chunk)
        # one vectorized evaluation per token count (perf.grid, equal to roofline.chunk_time),
        # summed as PassTime sums passes: the full chunks left to right, then the tail
        tail = grid.chunk_times(self.inst, self.rg, cg + q * ck)
        if q:
            at = cg[None, :] + np.arange(q)[:, None] * ck  # chunk i starts at c0 + i * chunk
            fulls = [a.reshape(q, len(cg)) for a in grid.chunk_times(self.inst, [ck], at)]
            full = grid.PassArrays(*(a[0] for a in fulls))
            for i in range(1, q):
                full = full + grid.PassArrays(*(a[i] for a in fulls))
            tail = full + tail
        z = np.ascontiguousarray(tail.total_s)
        return cg, z

    def __call__(self, new_tokens: np.ndarray, cached_tokens: np.ndarray) -> np.ndarray:
        new = np.maximum(np.asarray(new_tokens, dtype=float), 1.0)
        c0 = np.asarray(cached_tokens, dtype=float)
        q = np.maximum(np.ceil(new / self.chunk - 1e-12).astype(np.int64) - 1, 0)
        r = new - q * self.chunk
        out = np.empty(len(new))
        order = np.argsort(q, kind="stable")
        qs, starts = np.unique(q[order], return_index=True)
        bounds = list(starts[1:]) + [len(order)]
        for qv, lo, hi in zip(qs.tolist(), starts.tolist(), bounds):
            idx = order[lo:hi]
            c = c0[idx]
            cg, z = self._slice(int(qv), float(c.min()), float(c.max()))
            out[idx] = _bilinear(self.rg, cg, z, r[idx], c)
        return out


def max_batch(inst: Instance, context: float, tpot_s: float) -> int:
    """``roofline.max_batch_for_tpot``'s batch (a bisection of scalar decode steps), memoized
    like the tables: every architecture's replay and every re-solve round sizes the same
    decode instances at the same context and TPOT."""
    key = ("bmax", _instance_key(inst), float(context), float(tpot_s))
    return _memo(key, lambda: int(roofline.max_batch_for_tpot(inst, context, tpot_s)[0]))


def _batch_grid(bmax: int) -> np.ndarray:
    g = np.unique(np.round(np.geomspace(1, max(bmax, 1), 48)).astype(int))
    return np.unique(np.concatenate([g, np.arange(1, min(bmax, 16) + 1)]))


class StepTable:
    """Decode step seconds at every integer batch 0..bmax, at mean contexts on a uniform grid
    (one column when every request has about the same context)."""

    def __init__(self, inst: Instance, ctx_min: float, ctx_max: float, bmax: int, points: int = 5):
        self.bmax = max(int(bmax), 1)
        lo, hi = float(ctx_min), float(ctx_max)
        cg = [lo] if hi - lo < 1.0 else np.linspace(lo, hi, points).tolist()
        self.ctx = cg
        self.c0 = cg[0]
        self.inv_dc = (len(cg) - 1) / (hi - lo) if len(cg) > 1 else 0.0
        key = ("step", _instance_key(inst), tuple(cg), self.bmax)
        self.cols = _memo(key, lambda: self._columns(inst, cg))

    def _columns(self, inst: Instance, cg: list[float]) -> tuple[tuple[float, ...], ...]:
        batches = _batch_grid(self.bmax)
        every = np.arange(self.bmax + 1)
        cols = []
        for c in cg:
            s = grid.decode_steps(inst, batches, c)  # = roofline.decode_step per batch
            col = np.interp(every, batches, s)
            col[0] = s[0]
            cols.append(tuple(col.tolist()))
        return tuple(cols)

    def __call__(self, batch: int, mean_ctx: float) -> float:
        cols = self.cols
        b = batch if batch <= self.bmax else self.bmax
        if len(cols) == 1:
            return cols[0][b]
        x = (mean_ctx - self.c0) * self.inv_dc
        if x <= 0.0:
            return cols[0][b]
        j = int(x)
        if j >= len(cols) - 1:
            return cols[-1][b]
        f = x - j
        return cols[j][b] * (1.0 - f) + cols[j + 1][b] * f


class ExtendTable:
    """Seconds main decode needs to hold the KV of k relay tokens on a context: by default a
    lone extend pass recomputing them; `price(k grid, contexts) -> seconds [k, context]` (keyed
    in the memo by `tag`) prices another handoff payload (:mod:`pdd_plan.latency.handoff`)."""

    def __init__(
        self,
        inst: Instance,
        kmax: int,
        contexts: np.ndarray,
        price: Callable[[np.ndarray, list[float]], np.ndarray] | None = None,
        tag: tuple = (),
    ):
        self.kmax = max(int(kmax), 1)
        cg = np.unique(np.round(np.asarray(contexts, dtype=float)))
        self.ctx = cg.tolist()
        key = ("extend", _instance_key(inst), tuple(self.ctx), self.kmax, tag)
        self.cols = _memo(key, lambda: self._columns(inst, price))

    def _columns(self, inst: Instance, price) -> tuple[tuple[float, ...], ...]:
        kg = np.unique(np.round(np.geomspace(1, self.kmax, 24)).astype(int))
        every = np.arange(self.kmax + 1)
        cols = []
        if price is None:  # = roofline.extend_time per k, c
            table = grid.chunk_times(inst, kg, self.ctx).total_s
        else:
            table = np.asarray(price(kg, self.ctx), dtype=float)
        for j in range(len(self.ctx)):
            col = np.interp(every, kg, table[:, j])
            col[0] = 0.0
            cols.append(tuple(col.tolist()))
        return tuple(cols)

    def __call__(self, k: int, context: float) -> float:
        k = k if k <= self.kmax else self.kmax
        cg, cols = self.ctx, self.cols
        if len(cols) == 1:
            return cols[0][k]
        j = bisect.bisect_right(cg, context) - 1
        if j < 0:
            return cols[0][k]
        if j >= len(cg) - 1:
            return cols[-1][k]
        f = (context - cg[j]) / (cg[j + 1] - cg[j])
        return cols[j][k] * (1 - f) + cols[j + 1][k] * f
