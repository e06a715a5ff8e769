"""Mooncake JSONL traces (the Mooncake FAST'25 release).

One request per line: ``{"timestamp": ms since trace start, "input_length": int,
"output_length": int, "hash_ids": [int, ...]}``; ``hash_ids`` are prefix-block ids of
512-token blocks. If the first record has no ``hash_ids``, none are read and hits are NaN.
"""

from __future__ import annotations

import math

from pdd_plan.workload.trace_rows import (
    BadRow,
    Row,
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
