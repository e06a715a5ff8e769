"""Every numba kernel the simulator and the trace readers run, compiled ahead of time into
numba's disk cache (`pdd-plan compile`, an install step), so that a first `optimize` loads them
instead of compiling: ~10 s of CPU for the replay's kernels and ~8 s for the trace readers' on
the 2-core development box (BENCHMARKS.md "Speed"), against a warm plan's ~3 s.

The replay's kernels have one explicit signature each (``sim.decode.heaps.jit``): they are
compiled for exactly those. The trace readers' are typed by their first call, so they are
compiled by calling them through the readers' own entry points on one small record, with the
argument types every real call has (a uint8 view of the file's bytes, int64 ids and counts).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from numba.core.caching import NullCache
from numba.core.registry import CPUDispatcher

from pdd_plan.sim import queue_kernel
from pdd_plan.sim.decode import heaps
from pdd_plan.sim.decode import kernel as decode_kernel
from pdd_plan.workload.traces import scan, seen

# one canonical Mooncake record (the layout `scan` reads): two block ids
_RECORD = {"timestamp": 0, "input_length": 64, "output_length": 2, "hash_ids": [7, 8]}


@dataclass(frozen=True)
class Compiled:
    """One group of kernels after :func:`compile_kernels`."""

    group: str  # what they are for
    folders: tuple[str, ...]  # numba's cache folders for them (none: no writable place)
    kernels: int  # signatures ready in this process
    compiled: int  # of them compiled now (and written to the cache)
    loaded: int  # of them loaded from the cache
    seconds: float  # wall time to make them ready


def _summary(group: str, modules: tuple, seconds: float) -> Compiled:
    ds = [  # the kernels each module defines (not those it imports)
        v
        for m in modules
        for v in vars(m).values()
        if isinstance(v, CPUDispatcher) and v.py_func.__module__ == m.__name__
    ]
    cached = [d for d in ds if not isinstance(d._cache, NullCache)]
    return Compiled(
        group=group,
        folders=tuple(dict.fromkeys(d._cache.cache_path for d in cached)),
        kernels=sum(len(d.overloads) for d in ds),
        compiled=sum(sum(d._cache_misses.values()) for d in cached),
        loaded=sum(sum(d._cache_hits.values()) for d in cached),
        seconds=seconds,
    )


def _trace_readers() -> None:
    """The byte scanner and the block set, through their entry points (their first call
    types and compiles them): a scan of one record, its hits, one growth of the set."""
    line = (json.dumps(_RECORD) + "\n").encode()
    got = scan.scan_lines(line, 0, 1, True)
    if got is None:  # the record above is in the canonical layout by construction
        raise RuntimeError("the trace scanner refused its canonical record")
    blocks = seen.BlockSet()
    blocks.leads(got[3], got[4])
    blocks._room_for(1 << (blocks.bits + 1))  # a rehash into a larger table


def compile_kernels() -> list[Compiled]:
    """Make every kernel ready, compiling what numba's cache does not hold (and caching it):
    the replay's (the decode loop, its handlers and heaps, the prefill and line loops), then
    the trace readers'."""
    t = time.perf_counter()
    heaps.ready()
    replay = _summary("replay", (heaps, decode_kernel, queue_kernel), time.perf_counter() - t)
    t = time.perf_counter()
    _trace_readers()
    return [replay, _summary("trace readers", (scan, seen), time.perf_counter() - t)]


__all__ = ["Compiled", "compile_kernels"]
