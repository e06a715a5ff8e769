"""Generic traces, JSONL or CSV: the format ``pdd-plan`` writes and any tool can produce.

One request per line/row with ``arrival_s`` (seconds from trace start, finite, >= 0),
``input_tokens`` (int >= 1), ``output_tokens`` (int >= 0) and optional ``hit_rate``
(prefill-side cached fraction of the input, in [0, 1]; missing, ``null`` or an empty cell
means unknown). Other keys/columns are ignored. ``hit_rate`` becomes ``hit_p``; ``hit_d``
is NaN (unknown).
"""

from __future__ import annotations

import math

from pdd_plan.workload.traces.rows import (
    BadRow,
    Row,
    check_width,
    column_positions,
    finite_number,
    hit_rate,
    json_object,
    required,
    whole_number,
)

GENERIC_FIX = (
    "each request needs arrival_s (s >= 0), input_tokens (int >= 1), "
    "output_tokens (int >= 0), optional hit_rate in [0, 1]"
)
GENERIC_KEYS = ("arrival_s", "input_tokens", "output_tokens")


def _request(t: object, i: object, o: object) -> tuple[float, int, int]:
    """Arrival, input and output tokens of one request (JSONL values or CSV cells alike)."""
    k_t, k_in, k_out = GENERIC_KEYS
    arrival = finite_number(t, k_t, GENERIC_FIX)
    if arrival < 0:
        raise BadRow(k_t, f"negative value {arrival}", GENERIC_FIX)
    return arrival, whole_number(i, k_in, 1, GENERIC_FIX), whole_number(o, k_out, 0, GENERIC_FIX)


class GenericJsonlRows:
    """Parses generic JSONL records."""

    fix = GENERIC_FIX
    with_hit_rate = True
    has_hashes = False
    start_wallclock_s: float | None = None

    def parse(self, line: bytes) -> Row:
        rec = json_object(line, GENERIC_FIX)
        arrival, inputs, outputs = _request(*required(rec, GENERIC_KEYS, GENERIC_FIX))
        return arrival, inputs, outputs, hit_rate(rec.get("hit_rate"), GENERIC_FIX), None


class GenericCsvRows:
    """Parses the rows under a generic CSV header (``hit_rate`` column optional)."""

    fix = GENERIC_FIX
    with_hit_rate = True
    has_hashes = False
    start_wallclock_s: float | None = None

    def __init__(self, header: list[str]):
        self.header = header
        self.columns = column_positions(header, GENERIC_KEYS, GENERIC_FIX)
        self.hit_column = header.index("hit_rate") if "hit_rate" in header else None
        used = self.columns + ([self.hit_column] if self.hit_column is not None else [])
        self.width = max(used) + 1

    def parse(self, row: list[str]) -> Row:
        check_width(row, self.width, self.header, GENERIC_FIX)
        arrival, inputs, outputs = _request(*(row[c] for c in self.columns))
        c_hit = self.hit_column
        hit = math.nan if c_hit is None else hit_rate(row[c_hit], GENERIC_FIX)
        return arrival, inputs, outputs, hit, None
