"""The Pareto frontier of plans over (goodput ↑, cost ↓, BCR ↑)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pareto_indices(points: Sequence[tuple[float, float, float]]) -> list[int]:
    """Indices of the points on the frontier of (goodput ↑, cost ↓, BCR ↑).

    A point is on it when no other point is at least as good in all three and strictly better
    in one; equal points are all on it.
    """
    if not points:
        return []
    # cost negated: then "better" is "greater" in every coordinate
    x = np.asarray(points, dtype=float).reshape(len(points), 3) * np.array([1.0, -1.0, 1.0])
    out = []
    for i in range(len(x)):
        ge = np.all(x >= x[i], axis=1)
        gt = np.any(x > x[i], axis=1)
        if not np.any(ge & gt):
            out.append(i)
    return out


__all__ = ["pareto_indices"]
