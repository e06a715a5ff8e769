"""Prefix-cache hits of the requests of a trace, from what a reader read.

Traces with prefix-block ``hash_ids`` (Mooncake) get their hits simulated: the prefill
cache and the MD-side DRC, see :mod:`pdd_plan.workload.cache`. This runs chunk by chunk
while the file streams in, so hash ids never pile up; if the file turns out not to be in
arrival order, the file is read a second time and its hash ids (compact int64 arrays) are
replayed in stable arrival order, because a cache's hits depend on the order it sees.
Traces without hashes give a NaN ``hit_d``, and their stated ``hit_rate`` (generic
formats) or NaN as ``hit_p``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from pdd_plan.common.errors import InputError
from pdd_plan.workload.cache import CacheSimulator, CacheSpec, EndsOnMd
from pdd_plan.workload.traces.rows import TraceChunk

if TYPE_CHECKING:
    from pdd_plan.workload.traces.seen import BlockSet


class InfiniteHits:
    """Hits with infinite caches (`trace stats`' default), one compiled pass per chunk.

    With no capacity there is no eviction, so LRU order does not matter: a block is cached
    at request r exactly when an earlier request had it. A request's hit is its leading run
    of such blocks (:class:`~pdd_plan.workload.traces.seen.BlockSet`); the same for the DRC
    when every request ends on MD, so hit_d = hit_p. Equal to `CacheSimulator` with an
    infinite `CacheSpec` (tested), chunk by chunk.
    """

    def __init__(self, spec: CacheSpec):
        self.block_tokens = spec.block_tokens
        self.drc = spec.drc
        self.blocks: BlockSet | None = None  # made by the first chunk: numba loads then

    def __len__(self) -> int:
        return 0 if self.blocks is None else len(self.blocks)

    @property
    def seen(self) -> np.ndarray:
        """Sorted ids of every block so far."""
        if self.blocks is None:
            return np.empty(0, dtype=np.int64)
        return self.blocks.sorted_ids()

    def process(
        self, flat: np.ndarray, counts: np.ndarray, inp: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.blocks is None:
            from pdd_plan.workload.traces.seen import BlockSet  # numba: only with block hashes

            self.blocks = BlockSet()
        lead = self.blocks.leads(flat, counts)
        hit_tok = np.minimum(lead * self.block_tokens, inp).astype(np.float64)
        hit_p = hit_tok / np.maximum(inp, 1)
        return hit_p, hit_p.copy() if self.drc else np.zeros(counts.shape[0])


class TraceHits:
    """Collects the hits of a trace's chunks as they are read, in file order."""

    def __init__(self, spec: CacheSpec, ends_on_md: EndsOnMd):
        self.spec = spec
        self.ends_on_md = ends_on_md
        self.sim = CacheSimulator(spec, ends_on_md)
        infinite = spec.prefill_blocks is None and spec.drc_blocks is None
        self.fast = InfiniteHits(spec) if infinite and ends_on_md is None else None
        self._hit_p: list[np.ndarray] = []
        self._hit_d: list[np.ndarray] = []
        self._stated: list[np.ndarray] = []  # hit_rate columns of the generic formats

    def add(self, chunk: TraceChunk, in_order: bool) -> None:
        """The next chunk of the file; ``in_order``: the file is sorted up to this chunk."""
        if chunk.hit_rate is not None:
            self._stated.append(chunk.hit_rate)
        if chunk.has_hashes and in_order:  # past a disorder the file is replayed
            hp, hd = self._process(chunk)
            self._hit_p.append(hp)
            self._hit_d.append(hd)

    def _process(self, chunk: TraceChunk) -> tuple[np.ndarray, np.ndarray]:
        if self.fast is not None and chunk.hash_flat is None:
            flat, counts = _flat_ids(chunk.hash_ids or [])
            if flat is None:  # an id beyond int64: carry on with the exact simulator
                self._to_simulator()
            else:
                chunk = replace(chunk, hash_flat=flat, hash_counts=counts)
        if self.fast is not None:
            return self.fast.process(chunk.hash_flat, chunk.hash_counts, chunk.input_tokens)  # type: ignore[arg-type]
        return self.sim.process(chunk.hash_ids, chunk.input_tokens, chunk.output_tokens)  # type: ignore[arg-type]

    def _to_simulator(self) -> None:
        """Hand the blocks seen so far to the simulator (order is moot without eviction)."""
        assert self.fast is not None
        seen = self.fast.seen.tolist()
        self.sim.prefill.insert(seen)
        if self.spec.drc:
            self.sim.drc.insert(seen)
        self.fast = None

    def hits(
        self,
        order: np.ndarray,
        in_order: bool,
        hashed: bool,
        reread: Iterable[TraceChunk],
        step: int,
        path: str,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(hit_p, hit_d) in arrival ``order`` (the stable argsort of the file's arrivals).

        ``hashed``: the rows carried hash ids; ``reread``: the file's chunks again, for
        an unsorted hashed file, replayed ``step`` requests at a time.
        """
        n = order.shape[0]
        if not hashed:
            hit_p = np.concatenate(self._stated)[order] if self._stated else np.full(n, np.nan)
            return hit_p, np.full(n, np.nan)
        if in_order:
            return np.concatenate(self._hit_p), np.concatenate(self._hit_d)
        self.sim = CacheSimulator(self.spec, self.ends_on_md)  # start again, in arrival order
        self.fast = None
        return replay_in_arrival_order(reread, order, self.sim, step, path)

    @property
    def prefill_blocks_held(self) -> int:
        """Blocks in the prefill cache at the end of the trace."""
        return len(self.fast) if self.fast is not None else len(self.sim.prefill)


def _flat_ids(hash_ids: list[list[int]]) -> tuple[np.ndarray | None, np.ndarray]:
    counts = np.fromiter(map(len, hash_ids), np.int64, len(hash_ids))
    try:
        return np.array(list(chain.from_iterable(hash_ids)), dtype=np.int64), counts
    except OverflowError:
        return None, counts


def _hash_columns(
    chunks: Iterable[TraceChunk],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(hash ids of each row back to back, ids per row, inputs, outputs), in file order."""
    counts: list[np.ndarray] = []
    flats: list[np.ndarray] = []
    inp_all: list[np.ndarray] = []
    out_all: list[np.ndarray] = []
    for ch in chunks:
        assert ch.has_hashes
        if ch.hash_flat is not None and ch.hash_counts is not None:
            counts.append(ch.hash_counts)
            flats.append(ch.hash_flat)
            inp_all.append(ch.input_tokens)
            out_all.append(ch.output_tokens)
            continue
        assert ch.hash_ids is not None
        counts.append(np.fromiter((len(h) for h in ch.hash_ids), np.int64, len(ch)))
        flat = list(chain.from_iterable(ch.hash_ids))
        try:
            flats.append(np.array(flat, dtype=np.int64))
        except OverflowError:  # ids beyond int64 stay Python ints
            flats.append(np.array(flat, dtype=object))
        inp_all.append(ch.input_tokens)
        out_all.append(ch.output_tokens)
    dtype = object if any(f.dtype == object for f in flats) else np.int64
    flat_ids = np.concatenate([f.astype(dtype) for f in flats])
    return flat_ids, np.concatenate(counts), np.concatenate(inp_all), np.concatenate(out_all)


def replay_in_arrival_order(
    chunks: Iterable[TraceChunk], order: np.ndarray, sim: CacheSimulator, step: int, path: str
) -> tuple[np.ndarray, np.ndarray]:
    """Hits of an unsorted hashed trace: its chunks read again, fed to ``sim`` in ``order``."""
    n = order.shape[0]
    flat, cnt, inp, out = _hash_columns(chunks)
    if cnt.shape[0] != n:  # the file changed between the two passes
        raise InputError(path, None, "trace changed while being read", "read it again")
    off = np.concatenate(([0], np.cumsum(cnt)))
    inp, out = inp[order], out[order]
    hit_p = np.empty(n)
    hit_d = np.empty(n)
    for s in range(0, n, step):
        idx = order[s : s + step]
        ids = [flat[off[j] : off[j + 1]].tolist() for j in idx]
        hit_p[s : s + step], hit_d[s : s + step] = sim.process(
            ids, inp[s : s + step], out[s : s + step]
        )
    return hit_p, hit_d
