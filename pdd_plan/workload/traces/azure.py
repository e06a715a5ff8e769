"""Azure CSV traces (the Azure LLM inference trace 2023).

Header ``TIMESTAMP,ContextTokens,GeneratedTokens``; ``TIMESTAMP`` is a wall-clock string
such as ``2023-11-16 18:17:03.9799600``, converted to seconds from the first good row
(``read_trace`` shifts them so the earliest arrival is 0 if the file is not sorted).
No prefix information: hits are NaN.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from pdd_plan.workload.traces.rows import BadRow, Row, check_width, column_positions, whole_number

AZURE_FIX = "each row must be TIMESTAMP (YYYY-MM-DD HH:MM:SS.fffffff),ContextTokens,GeneratedTokens"
AZURE_KEYS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

_FRACTION = re.compile(r"(.*\d\d:\d\d:\d\d)\.(\d+)(.*)")
_EPOCH = datetime(1970, 1, 1)


def wallclock_s(text: str) -> float:
    """Seconds since 1970 (naive times taken as they are, aware ones as UTC)."""
    s = text.strip()
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        dt = _seven_digit_fraction(s, text)
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return (dt - _EPOCH).total_seconds()


def _seven_digit_fraction(s: str, text: str) -> datetime:
    # Python < 3.11 wants exactly 3 or 6 fraction digits; Azure writes 7
    m = _FRACTION.fullmatch(s)
    if not m:
        raise BadRow("TIMESTAMP", f"not a date-time: {text!r}", AZURE_FIX) from None
    try:
        return datetime.fromisoformat(f"{m[1]}.{m[2][:6].ljust(6, '0')}{m[3]}")
    except ValueError:
        raise BadRow("TIMESTAMP", f"not a date-time: {text!r}", AZURE_FIX) from None


class AzureRows:
    """Parses the rows under an Azure header; arrivals count from the first good row."""

    fix = AZURE_FIX
    with_hit_rate = False
    has_hashes = False

    def __init__(self, header: list[str]):
        self.header = header
        self.columns = column_positions(header, AZURE_KEYS, AZURE_FIX)
        self.width = max(self.columns) + 1
        self.start_wallclock_s: float | None = None  # wall clock of the first good row

    def parse(self, row: list[str]) -> Row:
        check_width(row, self.width, self.header, AZURE_FIX)
        c_t, c_in, c_out = self.columns
        t = wallclock_s(row[c_t])
        i = whole_number(row[c_in], AZURE_KEYS[1], 1, AZURE_FIX)
        o = whole_number(row[c_out], AZURE_KEYS[2], 0, AZURE_FIX)
        if self.start_wallclock_s is None:
            self.start_wallclock_s = t
        return t - self.start_wallclock_s, i, o, math.nan, None
