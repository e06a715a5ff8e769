"""A day's operating points over one enumerated combination: one point per period, weight its
hours, its own rate and class mix, and its own path tables (the prefill wait at its rate and
mix, the line's wait at its load); the elastic capacity and, with `sla.over: day`, the TTFT
percentiles over the day's requests pooled.

Main decode's warm-up: a new main-decode instance starts with an empty decode-side cache, so
until it fills, the prefixes its requests share with earlier ones cross the line in full. The
ramp is an ASSUMPTION (no published measurement): the instance's hit rate climbs linearly from
0 to the steady one over `WARMUP_MINUTES`, and the instances that join in a period are the
capacity its rate adds over the previous period's (the fleet follows the rate). A period's line
then carries 1 + new share x (ramp / 2) / period x (cold bytes / warm bytes - 1) times its warm
bytes: the line's rows and tables see that load (`line_speed` below 1). Without elastic
instances the fleet is held all day: no instance joins, so no period carries warm-up bytes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.latency.line import transfer
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import points
from pdd_plan.optimize.search.at_rates import levels_at_load, paths_at
from pdd_plan.optimize.search.enumeration import Combo, Shared, fleet_tables
from pdd_plan.optimize.tables import LineOption, PathTable
from pdd_plan.workload.periods import Day, reweighted

WARMUP_MINUTES = 10.0  # an assumption: see the module docstring
MIN_RPS = 1e-3  # an idle period is planned at this rate (its fleet keeps what the base holds)


def rates(day: Day) -> np.ndarray:
    return np.array([max(p.rate_rps, MIN_RPS) for p in day.periods])


def warmup_factor(sh: Shared, day: Day, model: ModelProfile, joins: bool = True) -> np.ndarray:
    """Per period: the line's bytes with the new main-decode instances' cold caches over its
    bytes with every cache warm (1 without DRC, for an architecture off the line, or when no
    instance joins: `joins` False, a fleet held all day)."""
    if not joins or not sh.spec.crosses_line or not sh.policy.drc:
        return np.ones(len(day.periods))
    cls = sh.classes
    cold = transfer.line_bytes(model, cls.input_tokens, np.zeros(len(cls)), True)
    r = rates(day)
    out = []
    for k, p in enumerate(day.periods):
        warm_b = float(np.dot(p.class_weight, sh.line_bytes))
        cold_b = float(np.dot(p.class_weight, cold))
        new = max(r[k] - r[k - 1], 0.0) / r[k]
        ramp = min(WARMUP_MINUTES / 60.0, p.hours) / 2.0 / p.hours
        out.append(1.0 + new * ramp * (cold_b / warm_b - 1.0) if warm_b > 0 else 1.0)
    return np.array(out)


def peak_load(sh: Shared, day: Day, factor: np.ndarray) -> float:
    """The most bytes/s the line carries in any period (warm-up included)."""
    r = rates(day)
    return max(
        float(r[k] * np.dot(p.class_weight, sh.line_bytes) * factor[k])
        for k, p in enumerate(day.periods)
    )


def _paths(
    sh: Shared,
    cb: Combo,
    lines: list[LineOption],
    rate: float,
    mix: np.ndarray,
    f: float,
    n_p: int,
) -> tuple[np.ndarray, tuple[PathTable, ...]]:
    cls = reweighted(sh.classes, mix)
    levels = levels_at_load(sh, lines, rate * float(np.dot(mix, sh.line_bytes)) * f)
    paths = paths_at(sh, cb, lines, cls, n_p, rate, levels)
    return levels, paths


def day_points(
    sh: Shared,
    model: ModelProfile,
    cb: Combo,
    lines: list[LineOption],
    day: Day,
    elastic: points.Elastic | None,
    pooled: bool,
    decode_speed: np.ndarray | None = None,
    line_level_factor: np.ndarray | None = None,
    pools: np.ndarray | None = None,
    base_prefill: int | None = None,
    main_joins: bool | None = None,
) -> points.OperatingPoints:
    """The day's points over combination `cb` and line options `lines` (carrying the peak);
    `decode_speed` and `line_level_factor` (per period) tighten a period's caps after a missed
    replay (verify.py); `pools`: each period's prefill pool (default: the combination's),
    `base_prefill` the instances of it paid all day (the tables' fixed cost; default: all);
    `main_joins` whether main-decode instances join during the day (default: with elastic
    capacity), which is what puts their cold caches' bytes on the line."""
    r = rates(day)
    joins = elastic is not None if main_joins is None else main_joins
    f = warmup_factor(sh, day, model, joins=joins)
    peak = float(r.max())
    chunk = sh.prefill_chunk_tokens
    pool = prefill_pool.PrefillPool.of(cb.pinst, cb.n_lo, sh.classes, chunk, peak)
    nominal = fleet_tables(sh, cb, pool, lines, peak)
    if base_prefill is not None:  # the elastic rest of the pool is paid per period (prefill.py)
        fixed = base_prefill * cb.pinst.cost_per_hour
        # the base's GPUs are the ones owned GPUs count against (milp/fleet.gpu_use)
        nominal = dataclasses.replace(
            nominal, prefill_cost_per_hour=fixed, prefill_instances=(base_prefill, base_prefill)
        )
    pools = np.full(len(day.periods), cb.n_lo) if pools is None else pools
    built: dict[tuple, tuple[np.ndarray, tuple[PathTable, ...]]] = {}
    levels, paths = [], []
    for k, p in enumerate(day.periods):
        key = (float(r[k]), p.class_weight.tobytes(), float(f[k]), int(pools[k]))
        if key not in built:
            built[key] = _paths(
                sh, cb, lines, float(r[k]), p.class_weight, float(f[k]), int(pools[k])
            )
        levels.append(built[key][0])
        paths.append(built[key][1])
    lv = np.vstack(levels)
    if line_level_factor is not None:
        lv = lv * line_level_factor[:, None]
    return points.points(
        nominal,
        [p.hours for p in day.periods],
        list(r),
        class_weight=np.vstack([p.class_weight for p in day.periods]),
        decode_speed=decode_speed,
        line_speed=list(1.0 / f),
        line_level=lv,
        paths=paths,
        elastic=elastic,
        pooled_ttft=pooled,
    )
