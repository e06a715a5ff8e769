"""Values read from a JSON record (iperf3 runs, engine result files, HF configs), checked.

JSON lets any value stand anywhere: a string where a count goes, NaN, 1e300, a list where a
name goes. Each reader passes what it read through these, so the error names the file, the
field and what the value must be, before arithmetic turns it into an internal error or a
silently wrong fit.
"""

from __future__ import annotations

import math
from typing import Any

from pdd_plan.common.errors import InputError

# Far above any real figure a benchmark or config file holds (tokens/s, bytes, heads, ...),
# far below where float arithmetic overflows: 1e300 is refused, not squared into inf.
MAX_FIGURE = 1e15


def _problem(v: Any, lo: float, hi: float, lo_open: bool, whole: bool) -> str | None:
    """What is wrong with ``v`` as a number in range, or None."""
    what = "a whole number" if whole else "a number"
    if not isinstance(v, int | float) or isinstance(v, bool):
        return f"must be {what} (got {v!r})"[:200]
    if not math.isfinite(v):
        return f"must be a finite number (got {v!r})"
    if v > hi:
        return f"must be at most {hi:g} (got {v:g})"
    if (v <= lo) if lo_open else (v < lo):
        return f"must be {'above' if lo_open else 'at least'} {lo:g} (got {v:g})"
    if whole and not float(v).is_integer():
        return f"must be a whole number (got {v:g})"
    return None


def number(
    v: Any,
    file: str,
    field: str,
    fix: str,
    *,
    lo: float = 0.0,
    hi: float = MAX_FIGURE,
    lo_open: bool = False,
    whole: bool = False,
) -> float:
    """``v`` as a float when it is a finite number in [lo, hi] (``lo_open``: above lo), and a
    whole one when ``whole``; else a one-line InputError naming ``field``."""
    problem = _problem(v, lo, hi, lo_open, whole)
    if problem is not None:
        raise InputError(file, field, problem, fix)
    return float(v)


def count(v: Any, file: str, field: str, fix: str, *, lo: int = 1, hi: float = MAX_FIGURE) -> int:
    """A whole number in [lo, hi] (a string, a fraction, a boolean refused)."""
    return int(number(v, file, field, fix, lo=lo, hi=hi, whole=True))


def string(v: Any, file: str, field: str, fix: str, *, max_len: int = 1000) -> str:
    """``v`` when it is a string without control characters (it is printed and written into
    profiles); a list, a number or a terminal escape is refused naming ``field``."""
    if not isinstance(v, str):
        raise InputError(file, field, f"must be a string (got {v!r})"[:200], fix)
    if len(v) > max_len:
        raise InputError(file, field, f"longer than {max_len} characters ({len(v)})", fix)
    bad = next((c for c in v if ord(c) < 32 or 127 <= ord(c) < 160), None)
    if bad is not None:
        raise InputError(file, field, f"holds the control character {bad!r}", fix)
    return v
