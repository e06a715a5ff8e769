"""Block-level prefix caches with LRU eviction (the method of traces/SOURCES.md).

A request carries ``hash_ids``: one id per ``block_tokens``-token block of its input
(512 in the Mooncake traces); equal ids mean reusable prefix KV. For each request,
in arrival order:

1. lookup: ``k`` = length of the longest prefix of ``hash_ids`` whose blocks are all
   in the cache; hit tokens = ``min(block_tokens * k, input_tokens)``;
2. insert: the request's blocks are inserted or touched **tail-first**, so that its
   prefix ends up most recent, and then least-recently-used blocks are evicted until
   the cache is within capacity.

Two caches model a PDD deployment:

* the prefill-side cache sees every request and gives ``hit_p``;
* the MD-side decode radix cache (DRC) gives ``hit_d`` and only sees requests that
  end on MD. Requests that end on relay decode (RLD) are neither looked up in nor
  inserted into the DRC; their ``hit_d`` is NaN.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

DEFAULT_BLOCK_TOKENS = 512

# Which requests end on MD (and so use the DRC): None = all of them; a boolean
# array/sequence indexed by the request's position in arrival order; or a callable
# ``f(index, input_tokens, output_tokens) -> bool``.
EndsOnMd = np.ndarray | Sequence[bool] | Callable[[int, int, int], bool] | None


class PrefixCache:
    """A prefix cache of blocks with LRU eviction; ``capacity_blocks=None`` is infinite."""

    __slots__ = ("_blocks", "capacity_blocks", "block_tokens", "evictions")

    def __init__(
        self, capacity_blocks: int | None = None, block_tokens: int = DEFAULT_BLOCK_TOKENS
    ):
        if capacity_blocks is not None and int(capacity_blocks) < 0:
            raise ValueError(f"capacity_blocks must be >= 0 or None, got {capacity_blocks}")
        if int(block_tokens) < 1:
            raise ValueError(f"block_tokens must be >= 1, got {block_tokens}")
        self.capacity_blocks = None if capacity_blocks is None else int(capacity_blocks)
        self.block_tokens = int(block_tokens)
        self.evictions = 0
        self._blocks: OrderedDict[int, None] = OrderedDict()  # LRU first, MRU last

    @classmethod
    def from_tokens(
        cls, capacity_tokens: int | None, block_tokens: int = DEFAULT_BLOCK_TOKENS
    ) -> PrefixCache:
        """A cache holding ``capacity_tokens`` tokens (rounded down to whole blocks)."""
        if capacity_tokens is None:
            return cls(None, block_tokens)
        return cls(int(capacity_tokens) // int(block_tokens), block_tokens)

    @property
    def capacity_tokens(self) -> int | None:
        return None if self.capacity_blocks is None else self.capacity_blocks * self.block_tokens

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block: object) -> bool:
        return block in self._blocks

    def lookup(self, hash_ids: Sequence[int]) -> int:
        """Number of leading blocks of ``hash_ids`` all present (no LRU update)."""
        blocks = self._blocks
        k = 0
        for b in hash_ids:
            if b not in blocks:
                break
            k += 1
        return k

    def insert(self, hash_ids: Sequence[int]) -> None:
        """Insert/touch the blocks tail-first (prefix most recent), then evict LRU blocks."""
        blocks = self._blocks
        move = blocks.move_to_end
        for b in reversed(hash_ids):
            if b in blocks:
                move(b)
            else:
                blocks[b] = None
        cap = self.capacity_blocks
        if cap is not None:
            over = len(blocks) - cap
            if over > 0:
                pop = blocks.popitem
                for _ in range(over):
                    pop(last=False)
                self.evictions += over

    def access(self, hash_ids: Sequence[int], input_tokens: int) -> int:
        """Look a request up and insert it; returns its hit tokens."""
        k = self.lookup(hash_ids)
        self.insert(hash_ids)
        return min(self.block_tokens * k, int(input_tokens))


@dataclass(frozen=True)
class CacheSpec:
    """Capacities of the prefill-side cache and the MD-side DRC, in blocks (None = infinite).

    ``drc=False`` means MD has no decode radix cache: every ``hit_d`` is 0.
    """

    prefill_blocks: int | None = None
    drc_blocks: int | None = None
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    drc: bool = True

    @classmethod
    def from_tokens(
        cls,
        prefill_tokens: int | None = None,
        drc_tokens: int | None = None,
        block_tokens: int = DEFAULT_BLOCK_TOKENS,
        drc: bool = True,
    ) -> CacheSpec:
        """Capacities given in tokens, rounded down to whole blocks."""

        def blocks(tokens: int | None) -> int | None:
            return None if tokens is None else int(tokens) // int(block_tokens)

        return cls(blocks(prefill_tokens), blocks(drc_tokens), int(block_tokens), drc)


class CacheSimulator:
    """Feeds requests, in arrival order, through the prefill cache and the DRC.

    Call :meth:`process` once per chunk; the request index keeps counting across
    chunks, so a mask ``ends_on_md`` is indexed by arrival position in the whole trace.
    """

    def __init__(self, spec: CacheSpec | None = None, ends_on_md: EndsOnMd = None):
        self.spec = spec or CacheSpec()
        self.prefill = PrefixCache(self.spec.prefill_blocks, self.spec.block_tokens)
        self.drc = PrefixCache(self.spec.drc_blocks, self.spec.block_tokens)
        self._ends_on_md = ends_on_md
        if ends_on_md is not None and not callable(ends_on_md):
            self._ends_on_md = np.asarray(ends_on_md, dtype=bool)
        self.index = 0  # requests processed so far

    def _md_flags(self, n: int, input_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
        e = self._ends_on_md
        if e is None:
            return np.ones(n, dtype=bool)
        if callable(e):
            i0 = self.index
            return np.fromiter(
                (bool(e(i0 + j, int(input_tokens[j]), int(output_tokens[j]))) for j in range(n)),
                dtype=bool,
                count=n,
            )
        e = cast(np.ndarray, e)  # a sequence was made an array in __init__
        if e.shape[0] < self.index + n:
            raise ValueError(
                f"ends_on_md has {e.shape[0]} entries but the trace has more requests "
                f"(at least {self.index + n})"
            )
        return e[self.index : self.index + n]

    def process(
        self,
        hash_ids: Sequence[Sequence[int]],
        input_tokens: np.ndarray,
        output_tokens: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Hit fractions ``(hit_p, hit_d)`` for a chunk of requests in arrival order."""
        n = len(hash_ids)
        inp = np.asarray(input_tokens, dtype=np.int64)
        out = np.asarray(output_tokens, dtype=np.int64)
        md = self._md_flags(n, inp, out)
        hit_p_tok = np.empty(n, dtype=np.float64)
        hit_d_tok = np.full(n, np.nan if self.spec.drc else 0.0, dtype=np.float64)
        pre, drc, use_drc = self.prefill, self.drc, self.spec.drc
        inp_list = inp.tolist()
        md_list = md.tolist()
        for j in range(n):
            h = hash_ids[j]
            L = inp_list[j]
            hit_p_tok[j] = pre.access(h, L)
            if use_drc and md_list[j]:
                hit_d_tok[j] = drc.access(h, L)
        self.index += n
        denom = np.maximum(inp, 1).astype(np.float64)
        return hit_p_tok / denom, hit_d_tok / denom

    def reset(self) -> None:
        self.prefill = PrefixCache(self.spec.prefill_blocks, self.spec.block_tokens)
        self.drc = PrefixCache(self.spec.drc_blocks, self.spec.block_tokens)
        self.index = 0


def simulate_hits(
    hash_ids: Iterable[Sequence[int]],
    input_tokens: Sequence[int] | np.ndarray,
    output_tokens: Sequence[int] | np.ndarray | None = None,
    spec: CacheSpec | None = None,
    ends_on_md: EndsOnMd = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(hit_p, hit_d)`` for in-memory requests given in arrival order."""
    ids = list(hash_ids)
    inp = np.asarray(input_tokens, dtype=np.int64)
    out = np.zeros_like(inp) if output_tokens is None else np.asarray(output_tokens, np.int64)
    if not (len(ids) == inp.shape[0] == out.shape[0]):
        raise ValueError("hash_ids, input_tokens and output_tokens must have equal length")
    return CacheSimulator(spec, ends_on_md).process(ids, inp, out)
