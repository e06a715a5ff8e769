"""Operating points at given rates over one enumerated combination (its prefill pool, decode
options and line options): a day's periods, or a rate forecast's draws.

The fleet tables are built once, at the peak rate (the pool must carry it, and each line option
is kept when it carries the peak's bytes under the cap). A point at another rate shares them
except where its rate moves a number the MILP reads: the prefill pool's wait and the line's
utilization, and so every TTFT miss probability. Those path tables are rebuilt once per distinct
rate; equal rates share theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import points, tables
from pdd_plan.optimize.search.enumeration import Combo, Shared, fleet_tables
from pdd_plan.optimize.tables import LineOption, PathTable
from pdd_plan.workload.requests import RequestClasses


def line_level(rho: float, cap: float) -> float:
    """The utilization a line option's tables are computed at for a load rho: a hair above it
    (slack for rounding in the MILP's row), never past the cap (line_options_at_load's rule)."""
    return min(max(rho, 1e-6) * (1 + 1e-6) + 1e-9, cap)


def levels_at_load(sh: Shared, lines: list[LineOption], load: float) -> np.ndarray:
    """Each line option's utilization level when the line carries `load` bytes/s (a fixed
    option keeps its own level)."""
    return np.array(
        [
            ln.level if ln.config is None else line_level(load / ln.capacity_bytes_s, sh.caps.line)
            for ln in lines
        ]
    )


def paths_at(
    sh: Shared,
    cb: Combo,
    lines: list[LineOption],
    classes: RequestClasses,
    n_prefill: int,
    rate: float,
    levels: np.ndarray,
) -> tuple[PathTable, ...]:
    """The path tables of `classes` at `rate` on `n_prefill` prefill instances, one per line
    option at its level."""
    pool = prefill_pool.PrefillPool.of(cb.pinst, n_prefill, classes, sh.prefill_chunk_tokens, rate)
    return tuple(
        tables.path_table(
            sh.sla,
            sh.policy,
            sh.prefill_chunk_tokens,
            sh.spec,
            classes,
            pool,
            cb.service,
            cb.md,
            cb.rld,
            dataclasses.replace(ln, level=float(lv)),
            sh.caps,
        )
        for ln, lv in zip(lines, levels)
    )


def rate_points(
    sh: Shared,
    cb: Combo,
    lines: list[LineOption],
    rates: Sequence[float],
    weights: Sequence[float],
    elastic: points.Elastic | None = None,
    max_violation: float | None = None,
) -> points.OperatingPoints:
    """Points at `rates` (req/s, each > 0) with `weights`; `lines` carry the peak's bytes
    (tables.line_options_at_load at max(rates)). At one rate: the fixed-rate search's tables."""
    peak = float(max(rates))
    chunk = sh.prefill_chunk_tokens
    pool = prefill_pool.PrefillPool.of(cb.pinst, cb.n_lo, sh.classes, chunk, peak)
    nominal = fleet_tables(sh, cb, pool, lines, peak)
    rebuilt: dict[float, tuple[np.ndarray, tuple[PathTable, ...] | None]] = {
        peak: (np.array([ln.level for ln in lines]), None)
    }
    for r in rates:
        r = float(r)
        if r not in rebuilt:
            lv = levels_at_load(sh, lines, r * float(np.dot(sh.classes.weight, sh.line_bytes)))
            rebuilt[r] = (lv, paths_at(sh, cb, lines, sh.classes, cb.n_lo, r, lv))
    return points.points(
        nominal,
        weights,
        [float(r) for r in rates],
        line_level=np.vstack([rebuilt[float(r)][0] for r in rates]),
        paths=[rebuilt[float(r)][1] for r in rates],
        elastic=elastic,
        max_violation=max_violation,
    )
