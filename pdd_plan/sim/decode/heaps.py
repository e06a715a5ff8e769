"""Binary heaps and FIFO queues on preallocated numpy arrays, for the compiled decode loop.

Both hold request ids. A heap is a slice ``slots[base : base + size]`` of request ids ordered
by ``(key[r], tie[r])`` - the same total order as the pure-Python ``(time, seq, ...)`` /
``(tag, request)`` tuples the event loop used with ``heapq``, so the pop sequence is identical
(the keys never tie on both fields). ``pos[r]`` is r's index in its heap, so a request can be
removed from the middle (a request sits in at most one heap of a kind at a time).

A FIFO queue is a linked list through ``link[r]``: ``head[k]``/``tail[k]``/``count[k]`` per
queue. A request waits in at most one queue per ``link`` array at a time, so a queue needs no
capacity of its own.

Compiled with numba (see :mod:`pdd_plan.sim.decode.kernel`).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numba
from numba import types
from numba.core.caching import FunctionCache

i8, f8 = types.int64, types.float64
I1, F1 = i8[::1], f8[::1]  # 1-D C-contiguous arrays
IA, FA = i8[:], f8[:]  # 1-D any layout: a field of a record array

# numba keys a cached function by its own bytecode and source file only, but the compiled
# kernels inline each other across these modules (and the jit options live here): key every
# one of them by all of their sources (the decode kernels and sim/queue_kernel.py, the prefill
# and line loops on these heaps), so an edit to any recompiles them all
_HERE = Path(__file__).resolve().parent
_SOURCES = hashlib.sha256(
    b"".join((_HERE / f).read_bytes() for f in ("heaps.py", "kernel.py", "../queue_kernel.py"))
).hexdigest()


class _KernelCache(FunctionCache):
    def _index_key(self, sig, codegen):
        return (*super()._index_key(sig, codegen), _SOURCES)

    def load_overload(self, sig, target_context):
        """numba's, without its ``target_context.refresh()`` first: that imports and registers
        every lowering numba has (and scipy.linalg, unless loaded already), ~0.25 s of CPU in
        `optimize` and ~0.7 s in a process without scipy, and only compiling needs it (numba's
        compiler refreshes on its own). Loading needs the context's codegen and numba's C
        helpers, set up when the context is made; the kernels run without numba's runtime
        (``_nrt=False``), so none needs its symbols (tests/integration/test_kernel_loading.py)."""
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


# the kernels' dispatchers and signatures (these heaps', kernel.py's, sim/queue_kernel.py's), in
# definition order (callees before callers): compiled or loaded from the cache by `ready`, when
# a replay runs, not at import (a cached top-level kernel carries its callees: the heap
# helpers load only to be compiled into a kernel, or called from Python)
_DEFERRED: list = []
_READY = threading.Lock()  # a sweep's threads replay at once: one of them compiles


def jit(sig, defer: bool = False, python: bool = True):
    """``numba.njit(sig, cache=True)``: compiled for exactly this signature (callers' literal
    arguments convert to it instead of compiling one more specialization each), cached on
    disk by :class:`_KernelCache`. Without the runtime's reference counting (``_nrt=False``):
    the kernels allocate nothing, and counting every array view made the loop 4x slower.
    Without any writable cache location (a read-only install and home) numba refuses to
    cache: compile on each run instead. ``defer``: compile in :func:`ready`, not now.
    ``python`` False: called only from compiled code, so numba builds no CPython (or C)
    wrapper for it (of the first compile's ~11 s, ~1.5 s were such wrappers)."""

    def wrap(fn):
        bare = {} if python else {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
        d = numba.njit(_nrt=False, **bare)(fn)
        try:
            d._cache = _KernelCache(fn)  # what Dispatcher.enable_caching does, keyed wider
        except RuntimeError:
            pass
        if defer:
            _DEFERRED.append((d, sig))
            return d
        d.compile(sig)
        d.disable_compile()
        return d

    return wrap


def _in_cache(d, sig) -> bool:
    """Whether numba's disk cache holds `d`'s code for `sig` (its index has the key)."""
    try:
        key = d._cache._index_key(sig, d.targetctx.codegen())
        return key in d._cache._cache_file._load_index()
    except Exception:  # no cache (read-only install) or numba internals moved: compile all
        return False


def ready_now(entry) -> bool:
    """Whether a deferred kernel is callable now (compiled or loaded in this process)."""
    return not _open(entry)


def cached(entry) -> bool:
    """Whether a deferred kernel is callable now or loads from numba's disk cache (no compile)."""
    if not _open(entry):
        return True
    sig = next(s for d, s in _DEFERRED if d is entry)
    return _in_cache(entry, sig)


def _open(d) -> bool:
    """Whether `d` still compiles (numba's flag; a numba without it: compile, which returns
    what is already compiled)."""
    return getattr(d, "_can_compile", True)


def _needs(entry) -> list:
    """`entry` and the deferred kernels it calls, through any depth, in definition order: the
    names its code reads that are deferred kernels in its module (a kernel calls its callees
    by their global names)."""
    deferred = {id(d) for d, _ in _DEFERRED}
    seen, todo = set(), [entry]
    while todo:
        d = todo.pop()
        if id(d) not in seen:
            seen.add(id(d))
            g = d.py_func.__globals__
            todo += [g[n] for n in d.py_func.__code__.co_names if id(g.get(n)) in deferred]
    return [(d, sig) for d, sig in _DEFERRED if id(d) in seen]


def ready(entry=None) -> None:
    """Make the deferred kernels callable. With `entry` (a top-level kernel) whose code is in
    the cache, load only it: a cached function carries the code of everything it calls, so
    loading its 16 callees in kernel.py too (~0.2 s) is needed only to call them from Python
    or to compile `entry` afresh. Otherwise compile (or load) `entry` and what it calls,
    callees first: not the other top-level kernels (a first replay of 20,000 requests runs
    the prefill and line loops in Python and compiled both for nothing, ~1.3 s). Without
    `entry`, every kernel (tests, `pdd-plan compile`)."""
    with _READY:
        if entry is not None and not _open(entry):
            return  # ready already (loading the rest would cost ~0.25 s for nothing)
        todo = _DEFERRED if entry is None else _needs(entry)
        if entry is not None:
            sig = next(s for d, s in _DEFERRED if d is entry)
            if _in_cache(entry, sig):
                todo = [(entry, sig)]
        _close(todo)


def _close(todo: list) -> None:
    for d, sig in todo:  # each closed at once, as `jit` does: callers convert to its sig
        if _open(d):
            d.compile(sig)
            d.disable_compile()


class _TwinCache(_KernelCache):
    """A twin's entries (:func:`from_python`): the kernel's function and signature, built with
    a CPython wrapper, so keyed apart from the kernel's own."""

    def _index_key(self, sig, codegen):
        return (*super()._index_key(sig, codegen), "from_python")


_TWINS: dict = {}


def from_python(entry):
    """A deferred kernel that only kernels call, built to be called from Python too (tests
    drive the heaps and the event handlers one call at a time): its twin, compiled (or
    loaded from the cache) on first use. The kernels themselves have no CPython wrapper
    (``python=False``): no replay calls them from Python, and building the wrappers of the
    heaps and the 5 handlers was ~1 s of a first replay's ~8 s compile."""
    with _READY:
        twin = _TWINS.get(id(entry))
        if twin is None:
            _close(_needs(entry))  # its callees with their own signatures, as a replay has them
            sig = next(s for d, s in _DEFERRED if d is entry)
            twin = numba.njit(_nrt=False)(entry.py_func)
            try:
                twin._cache = _TwinCache(entry.py_func)
            except RuntimeError:  # no writable cache location: compiled on each run
                pass
            _close([(twin, sig)])
            _TWINS[id(entry)] = twin
    return twin


@jit(types.boolean(FA, IA, i8, i8), defer=True, python=False)
def _before(key, tie, a, b):
    """Request a sorts before request b."""
    return key[a] < key[b] or (key[a] == key[b] and tie[a] < tie[b])


@jit(types.void(I1, IA, FA, IA, i8, i8), defer=True, python=False)
def _sift_up(slots, pos, key, tie, base, i):
    r = slots[base + i]
    while i > 0:
        p = (i - 1) >> 1
        q = slots[base + p]
        if not _before(key, tie, r, q):
            break
        slots[base + i] = q
        pos[q] = i
        i = p
    slots[base + i] = r
    pos[r] = i


@jit(types.void(I1, IA, FA, IA, i8, i8, i8), defer=True, python=False)
def _sift_down(slots, pos, key, tie, base, size, i):
    r = slots[base + i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _before(key, tie, slots[base + c + 1], slots[base + c]):
            c += 1
        q = slots[base + c]
        if not _before(key, tie, q, r):
            break
        slots[base + i] = q
        pos[q] = i
        i = c
    slots[base + i] = r
    pos[r] = i


@jit(types.void(I1, IA, FA, IA, i8, i8, i8), defer=True, python=False)
def heap_push(slots, pos, key, tie, base, size, r):
    """Push r onto the heap of ``size`` entries at ``base``; the caller counts it."""
    slots[base + size] = r
    _sift_up(slots, pos, key, tie, base, size)


@jit(i8(I1, IA, FA, IA, i8, i8), defer=True, python=False)
def heap_pop(slots, pos, key, tie, base, size):
    """Pop the first request of a non-empty heap; the caller counts it."""
    r = slots[base]
    last = size - 1
    if last > 0:
        slots[base] = slots[base + last]
        _sift_down(slots, pos, key, tie, base, last, 0)
    return r


@jit(types.void(I1, IA, FA, IA, i8, i8, i8), defer=True, python=False)
def heap_remove(slots, pos, key, tie, base, size, r):
    """Take r out of its heap wherever it is; the caller counts it."""
    i = pos[r]
    last = size - 1
    if i == last:
        return
    slots[base + i] = slots[base + last]
    _sift_down(slots, pos, key, tie, base, last, i)
    _sift_up(slots, pos, key, tie, base, i)


@jit(types.void(IA, IA, IA, IA, i8, i8), defer=True, python=False)
def fifo_push(head, tail, count, link, k, r):
    if count[k]:
        link[tail[k]] = r
    else:
        head[k] = r
    tail[k] = r
    link[r] = -1
    count[k] += 1


@jit(i8(IA, IA, IA, i8), defer=True, python=False)
def fifo_pop(head, count, link, k):
    r = head[k]
    head[k] = link[r]
    count[k] -= 1
    return r
