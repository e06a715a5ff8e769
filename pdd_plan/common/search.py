"""Searches over a monotone integer function, shared by the perf model and the analytic check."""

from __future__ import annotations

from collections.abc import Callable


def largest_meeting(step: Callable[[int], float], target: float, lo: int, hi: int) -> int:
    """The largest batch b in [lo, hi) with ``step(b) <= target``, given ``step(lo) <= target
    < step(hi)`` and steps monotone in the batch: the one batch a bisection finds, found by
    interpolation. A decode step is nearly linear in the batch (a fixed part and a part per
    request), so the batch read off the chord and its neighbour usually settle it in two
    steps where a bisection of a few thousand batches times about ten; a round that does not
    halve the bracket is followed by a bisection step, so it never takes more than about
    twice the bisection's."""
    bisect = False
    while hi - lo > 1:
        width = hi - lo
        if bisect:
            g = (lo + hi) // 2
        else:
            tl, th = step(lo), step(hi)
            g = lo + int((target - tl) / (th - tl) * width) if th > tl else (lo + hi) // 2
            g = min(max(g, lo + 1), hi - 1)
        for probe in (g, g + 1):
            if probe >= hi:
                break
            if step(probe) <= target:
                lo = probe
            else:
                hi = probe
                break
        bisect = not bisect and 2 * (hi - lo) > width
    return lo
