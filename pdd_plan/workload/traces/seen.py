"""The set of prefix blocks seen so far, for infinite-cache hits: an open-addressing hash set
of int64 block ids, probed by one compiled pass per chunk of requests.

With no capacity there is no eviction, so a block is cached at request r exactly when an
earlier request had it, and r's hit is the leading run of such blocks. :meth:`BlockSet.leads`
finds each request's run by lookups, then adds the request's blocks (a block that repeats
within one request is not a hit for it). One pass, O(1) per id: sorting the chunk's ids (what
this replaced) cost ~3 s of the 1M-line benchmark's 11.

Slots are chosen by ``(id ^ (id >> bits) * C) mod capacity``: consecutive ids (Mooncake's are
block counters) land in consecutive slots, so probes walk memory in order, while ids that
differ only above the table's width are still spread by the multiply.

Compiled with numba, cached on disk; imported only when hits are computed.
"""

from __future__ import annotations

import numba
import numpy as np

from pdd_plan.common.scipy_direct import blas_for_numba

# numba imports scipy.linalg (~0.3 s) to find BLAS when it first loads a kernel; not for ours
blas_for_numba()

_SPREAD = 0x5851F42D4C957F2D  # an odd 63-bit multiplier (PCG's), spreads the high bits
_MIN_BITS = 16
_MAX_LOAD = 0.6  # linear probing stays short below ~0.7


def _jit(fn):
    """``numba.njit(cache=True)``; compile on each run where no cache location is writable."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        return numba.njit(nogil=True)(fn)


@_jit
def _slot(keys, used, x, bits):
    """The slot holding ``x``, or the empty slot where it goes."""
    mask = (1 << bits) - 1
    h = (x ^ ((x >> bits) * _SPREAD)) & mask
    while used[h] and keys[h] != x:
        h = (h + 1) & mask
    return h


@_jit
def _leads(flat, counts, keys, used, bits):
    """Each request's leading run of blocks seen before it; adds its blocks. (runs, added)"""
    lead = np.empty(counts.shape[0], dtype=np.int64)
    added = 0
    p = 0
    for r in range(counts.shape[0]):
        c = counts[r]
        k = 0
        while k < c and used[_slot(keys, used, flat[p + k], bits)]:
            k += 1
        lead[r] = k
        for j in range(p + k, p + c):  # the run is in the set already
            h = _slot(keys, used, flat[j], bits)
            if not used[h]:
                used[h] = True
                keys[h] = flat[j]
                added += 1
        p += c
    return lead, added


@_jit
def _rehash(keys, used, new_keys, new_used, bits):
    for h in range(keys.shape[0]):
        if used[h]:
            s = _slot(new_keys, new_used, keys[h], bits)
            new_used[s] = True
            new_keys[s] = keys[h]


class BlockSet:
    """Block ids seen so far (int64)."""

    def __init__(self) -> None:
        self.bits = _MIN_BITS
        self.keys = np.zeros(1 << self.bits, dtype=np.int64)
        self.used = np.zeros(1 << self.bits, dtype=np.bool_)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def leads(self, flat: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Blocks per request (``counts`` of ``flat``, back to back) in its leading run of
        blocks that an earlier request had; then every block is added."""
        self._room_for(self.size + flat.shape[0])
        lead, added = _leads(flat, counts, self.keys, self.used, self.bits)
        self.size += int(added)
        return lead

    def sorted_ids(self) -> np.ndarray:
        return np.sort(self.keys[self.used])

    def _room_for(self, n: int) -> None:
        bits = self.bits
        while n > _MAX_LOAD * (1 << bits):
            bits += 1
        if bits == self.bits:
            return
        keys = np.zeros(1 << bits, dtype=np.int64)
        used = np.zeros(1 << bits, dtype=np.bool_)
        _rehash(self.keys, self.used, keys, used, bits)
        self.keys, self.used, self.bits = keys, used, bits
