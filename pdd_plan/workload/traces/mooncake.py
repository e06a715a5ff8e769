"""Mooncake JSONL traces (the Mooncake FAST'25 release).

One request per line: ``{"timestamp": ms since trace start, "input_length": int,
"output_length": int, "hash_ids": [int, ...]}``; ``hash_ids`` are prefix-block ids of
512-token blocks. If the first record has no ``hash_ids``, none are read and hits are NaN.
"""

from __future__ import annotations

import json
import math
from itertools import chain

import numpy as np

from pdd_plan.common import numbers
from pdd_plan.workload.traces.rows import (
    BadRow,
    Row,
    TraceChunk,
    finite_number,
    json_object,
    required,
    whole_number,
)

MOONCAKE_FIX = (
    'each line must be {"timestamp": ms, "input_length": int, "output_length": int, '
    '"hash_ids": [int, ...]}'
)
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")
_MS = 1e-3  # timestamps are milliseconds


class MooncakeRows:
    """Parses Mooncake records; the first good-enough record decides whether hashes are read."""

    fix = MOONCAKE_FIX
    with_hit_rate = False
    start_wallclock_s: float | None = None

    def __init__(self) -> None:
        self.has_hashes: bool | None = None  # None until a record has been seen

    def parse(self, line: bytes) -> Row:
        fix = self.fix
        rec = json_object(line, fix)
        k_t, k_in, k_out = MOONCAKE_KEYS
        t, i, o = required(rec, MOONCAKE_KEYS, fix)
        t = finite_number(t, k_t, fix) * _MS
        if t < 0:
            raise BadRow(k_t, f"negative value {t / _MS}", fix)
        i = whole_number(i, k_in, 1, fix)
        o = whole_number(o, k_out, 0, fix)
        if self.has_hashes is None:
            self.has_hashes = "hash_ids" in rec
        return t, i, o, math.nan, self._hash_ids(rec) if self.has_hashes else None

    def _hash_ids(self, rec: dict) -> list[int]:
        h = rec.get("hash_ids")
        if h is None:
            raise BadRow("hash_ids", "missing", self.fix)
        if type(h) is not list or not all(type(x) is int for x in h):
            raise BadRow("hash_ids", "not a list of integers", self.fix)
        return h

    def parse_bytes(
        self, buf: bytes, pos: int, max_lines: int, eof: bool, first_line: int
    ) -> tuple[TraceChunk, int] | None:
        """Up to ``max_lines`` lines of ``buf`` from byte ``pos`` when all are in the layout
        Mooncake's files use, read by one compiled pass: (chunk, byte after it); else None."""
        if self.has_hashes is False:  # the first record had no hash_ids: they are not read
            return None
        from pdd_plan.workload.traces.scan import scan_lines  # numba: only for Mooncake files

        got = scan_lines(buf, pos, max_lines, eof)
        if got is None:
            return None
        t, i, o, flat, counts, end = got
        self.has_hashes = True
        chunk = TraceChunk(
            first_line=first_line,
            arrival_s=t * _MS,
            input_tokens=i,
            output_tokens=o,
            hit_rate=None,
            hash_lists=None,
            hash_flat=flat,
            hash_counts=counts,
        )
        return chunk, end

    def parse_batch(self, lines: list[bytes], first_line: int) -> TraceChunk | None:
        """Many lines at once, at library speed: one `json.loads` for the batch and numpy
        checks per column. None when anything is unusual (a boolean, a float length, a
        string, a missing key, an id beyond int64, ...): the caller then parses the batch
        line by line, which names the bad line or skips it exactly as before."""
        text = b"[" + b",".join(lines) + b"]"
        if b"true" in text or b"false" in text:  # numpy would read a boolean as 0/1
            return None
        try:
            recs = json.loads(text)
            if len(recs) != len(lines) or not all(type(r) is dict for r in recs):
                return None
            t = np.array([r["timestamp"] for r in recs])
            i = np.array([r["input_length"] for r in recs])
            o = np.array([r["output_length"] for r in recs])
        except (ValueError, KeyError, OverflowError):
            return None
        n = len(recs)
        if t.dtype.kind not in "if" or i.dtype.kind != "i" or o.dtype.kind != "i":
            return None
        t = t.astype(np.float64) * _MS
        big = numbers.bound() * _MS  # past it the row's own error names it
        if n and not (
            np.isfinite(t).all()
            and t.max() < big
            and t.min() >= 0
            and i.min() >= 1
            and o.min() >= 0
        ):
            return None
        if self.has_hashes is None and n:
            self.has_hashes = "hash_ids" in recs[0]
        hashes, flat, counts = None, None, None
        if self.has_hashes:
            hashes = [r.get("hash_ids") for r in recs]
            if not all(type(h) is list for h in hashes):
                return None
            counts = np.fromiter(map(len, hashes), np.int64, n)
            try:
                flat = np.array(list(chain.from_iterable(hashes)))
            except (ValueError, OverflowError):
                return None
            if flat.size == 0:
                flat = flat.astype(np.int64)
            elif flat.dtype != np.int64:  # floats, strings, nested lists, ids beyond int64
                return None
        return TraceChunk(
            first_line=first_line,
            arrival_s=t,
            input_tokens=i.astype(np.int64),
            output_tokens=o.astype(np.int64),
            hit_rate=None,
            hash_lists=hashes,
            hash_flat=flat,
            hash_counts=counts,
        )
