"""Spread the arrivals of a trace whose timestamps are quantised to ticks.

The Mooncake conversation trace has timestamps quantised to ~3 s ticks (1,180 distinct
values for 12,031 requests). When a trace looks quantised (at most half of the arrivals are
distinct and >= 90% of the steps between distinct values are whole multiples, within 1%, of
their median step), the ``c`` requests sharing a tick value ``t`` get ``t + j * w / c`` for
``j = 0..c-1`` in order of appearance, where ``w = min(next distinct value - t, tick)``.
This is deterministic and keeps the order.
"""

from __future__ import annotations

import numpy as np


def detect_tick(arrival_s: np.ndarray) -> float | None:
    """The quantisation tick of sorted arrivals, or None if they do not look quantised."""
    a = np.asarray(arrival_s, dtype=np.float64)
    if a.shape[0] < 4:
        return None
    distinct = np.unique(a)
    if distinct.shape[0] < 2 or distinct.shape[0] > a.shape[0] // 2:
        return None
    steps = np.diff(distinct)
    tick = float(np.median(steps))
    if tick <= 0:
        return None
    ratio = steps / tick
    whole = np.abs(ratio - np.rint(ratio)) <= 0.01 * np.maximum(np.rint(ratio), 1)
    return tick if float(np.mean(whole)) >= 0.9 else None


def spread_ticks(arrival_s: np.ndarray, tick_s: float) -> np.ndarray:
    """Spread requests sharing a tick value evenly inside the tick (sorted input)."""
    a = np.asarray(arrival_s, dtype=np.float64)
    if a.shape[0] == 0:
        return a.copy()
    uniq, start, count = np.unique(a, return_index=True, return_counts=True)
    nxt = np.append(uniq[1:], uniq[-1] + tick_s)
    width = np.minimum(nxt - uniq, tick_s)
    rank = np.arange(a.shape[0]) - np.repeat(start, count)
    return a + rank / np.repeat(count, count) * np.repeat(width, count)


def tick_to_spread(spread: bool | float | None, arrival_s: np.ndarray) -> float | None:
    """The tick to spread sorted arrivals over: detected (None or True), none (False) or given."""
    if spread is None or spread is True:
        return detect_tick(arrival_s)
    if spread is False:
        return None
    tick = float(spread)
    if not tick > 0:
        raise ValueError(f"spread must be None, False or a tick > 0 s, got {spread!r}")
    return tick
