"""Operating points: the table the fleet MILP plans one shared fleet over.

A point is a state the fleet must serve: a period of a day (weight: its hours) or a draw of the
uncertain inputs (weight: 1/N). The fleet (instances per decode candidate, the prefill pool, the
line option) is shared; each point has its own rate, class mix and the numbers its rows read.

The table is columnar: numpy arrays with one row per point over the nominal `FleetTables`.
Where a point differs from the nominal only by a scale factor, the factor is the only thing
stored and the MILP rows apply it:

- `decode_speed` (K x candidates): a factor on each decode candidate's tokens/s at the TPOT
  target; a request's step time (how long it holds its KV) divides by it;
- `kv_scale` (K): a factor on KV bytes per request, both held in decode memory and sent on
  the line;
- `line_speed` (K): a factor on what the line and its connection pool carry (bytes/s).

What a point's TTFT rows read (miss probabilities per line option, path and class) depends on
the prefill wait at its rate, the line's wait at its load and each transfer's time, so a point
whose rate, line rate or KV bytes move those numbers carries its own path tables (`paths[k]`);
`None` shares the nominal tables (no copy). The nominal single-rate plan is `single(t)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pdd_plan.optimize.tables import FleetTables, PathTable


@dataclass(frozen=True)
class Elastic:
    """Instances a point may add on top of the shared base, paid only in that point.

    `cost_per_hour[i]`: $/hour of an elastic instance of decode candidate i (md then rld, as in
    the tables); `gpus[k, s]`: GPUs datacenter-and-type `sites[s]` can add in point k (a site
    not listed adds none)."""

    cost_per_hour: np.ndarray  # (candidates,)
    sites: tuple[tuple[str, str], ...]  # (datacenter, gpu)
    gpus: np.ndarray  # (points, sites)
    # hours a run of elastic instance i is paid beyond the periods it serves (start-up, drain,
    # billing round-up: milp/runs.py); None: none, and the points need no order. Given, the
    # points are periods in time order, the last followed by the first (a day repeats)
    run_hours: np.ndarray | None = None  # (candidates,)
    # GPUs owned at site s that the base must use before any point adds elastic ones there
    # (owned capacity first: milp/elastic.define_owned_first); None: no such rule
    owned_first: np.ndarray | None = None  # (sites,)


@dataclass(frozen=True)
class OperatingPoints:
    """K operating points over one nominal `FleetTables` (see the module docstring)."""

    nominal: FleetTables
    weight: np.ndarray  # (K,) hours of a period, or 1/N for a draw
    rate_rps: np.ndarray  # (K,) req/s; NaN: the rate is a variable up to rate_max
    rate_max: np.ndarray  # (K,) upper bound on a variable rate
    class_weight: np.ndarray  # (K, classes) each point's class mix (shares of its rate)
    decode_speed: np.ndarray  # (K, candidates)
    kv_scale: np.ndarray  # (K,)
    line_speed: np.ndarray  # (K,)
    line_level: np.ndarray  # (K, line options) utilization cap each point's line row enforces
    paths: tuple[tuple[PathTable, ...] | None, ...]  # per point: its own tables, or None
    elastic: Elastic | None = None
    # the weighted share of points allowed to miss their SLA rows (the chance constraint's
    # 1 - Q); None: every point meets them
    max_violation: float | None = None
    # the TTFT percentiles over every point's requests pooled (a day's SLA over the day), not
    # in each point
    pooled_ttft: bool = False

    def __len__(self) -> int:
        return len(self.weight)

    @property
    def share(self) -> np.ndarray:
        """Each point's weight as a share of the total: the objective averages over points."""
        return self.weight / float(np.sum(self.weight))

    def rate(self, k: int) -> float | None:
        r = float(self.rate_rps[k])
        return None if np.isnan(r) else r

    def point_paths(self, k: int) -> Sequence[PathTable]:
        p = self.paths[k]
        return self.nominal.paths if p is None else p

    def line_bytes(self, k: int) -> np.ndarray:
        return _scaled(self.nominal.line_bytes, float(self.kv_scale[k]))

    def kv_bytes(self, k: int) -> np.ndarray:
        return _scaled(self.nominal.kv_bytes, float(self.kv_scale[k]))


def _scaled(a: np.ndarray, x: float) -> np.ndarray:
    # the nominal array itself at 1: no copy, and the one-point model reads the same floats
    return a if x == 1.0 else a * x


def single(t: FleetTables) -> OperatingPoints:
    """The nominal plan as one point of weight 1."""
    return points(t, [1.0], [t.rate_rps], rate_max=[t.rate_max])


def points(
    t: FleetTables,
    weight: Sequence[float],
    rate_rps: Sequence[float | None],
    *,
    rate_max: Sequence[float] | None = None,
    class_weight: np.ndarray | None = None,
    decode_speed: np.ndarray | Sequence[float] | None = None,
    kv_scale: Sequence[float] | None = None,
    line_speed: Sequence[float] | None = None,
    line_level: np.ndarray | None = None,
    paths: Sequence[Sequence[PathTable] | None] | None = None,
    elastic: Elastic | None = None,
    max_violation: float | None = None,
    pooled_ttft: bool = False,
) -> OperatingPoints:
    """A checked table of K = len(weight) points over `t`; every omitted column is the
    nominal's (`decode_speed` may be one factor per point or one per point and candidate)."""
    k = len(weight)
    n_cand, n_lines = len(t.md) + len(t.rld), len(t.lines)
    w = np.asarray(weight, float)
    if k == 0 or not np.all(w > 0) or not np.all(np.isfinite(w)):
        raise ValueError("operating points need positive, finite weights")
    rates = np.array([np.nan if r is None else float(r) for r in rate_rps], float)
    rmax = np.asarray(rate_max if rate_max is not None else np.zeros(k), float)
    cw = np.tile(t.weight, (k, 1)) if class_weight is None else np.asarray(class_weight, float)
    speed = np.ones((k, n_cand)) if decode_speed is None else np.asarray(decode_speed, float)
    if speed.ndim == 1:
        speed = np.repeat(speed[:, None], n_cand, axis=1)
    levels = np.tile([ln.level for ln in t.lines], (k, 1)) if line_level is None else line_level
    out = OperatingPoints(
        nominal=t,
        weight=w,
        rate_rps=rates,
        rate_max=rmax,
        class_weight=cw,
        decode_speed=speed,
        kv_scale=_column(kv_scale, k),
        line_speed=_column(line_speed, k),
        line_level=np.asarray(levels, float).reshape(k, n_lines),
        paths=tuple(None if p is None else tuple(p) for p in (paths or [None] * k)),
        elastic=elastic,
        max_violation=max_violation,
        pooled_ttft=pooled_ttft,
    )
    _check(out, n_cand)
    return out


def _column(x: Sequence[float] | None, k: int) -> np.ndarray:
    return np.ones(k) if x is None else np.asarray(x, float)


def _check(p: OperatingPoints, n_cand: int) -> None:
    """Shapes and ranges the MILP relies on: a bad column is a caller's bug, said at once."""
    k, n_cls = len(p.weight), len(p.nominal.weight)
    shapes = {
        "rate_rps": (p.rate_rps.shape, (k,)),
        "rate_max": (p.rate_max.shape, (k,)),
        "class_weight": (p.class_weight.shape, (k, n_cls)),
        "decode_speed": (p.decode_speed.shape, (k, n_cand)),
        "kv_scale": (p.kv_scale.shape, (k,)),
        "line_speed": (p.line_speed.shape, (k,)),
    }
    for name, (got, want) in shapes.items():
        if got != want:
            raise ValueError(f"operating points: {name} has shape {got}, expected {want}")
    if len(p.paths) != k:
        raise ValueError(f"operating points: {len(p.paths)} path tables for {k} points")
    if any(q is not None and len(q) != len(p.nominal.lines) for q in p.paths):
        raise ValueError("operating points: a point's path tables need one per line option")
    for name in ("decode_speed", "kv_scale", "line_speed"):
        if not np.all(getattr(p, name) > 0):
            raise ValueError(f"operating points: {name} must be positive")
    if not np.all(p.class_weight >= 0):
        raise ValueError("operating points: class weights must not be negative")
    if p.max_violation is not None and not 0.0 <= p.max_violation < 1.0:
        raise ValueError("operating points: max_violation must be in [0, 1)")
    e = p.elastic
    if e is not None and (e.cost_per_hour.shape != (n_cand,) or e.gpus.shape != (k, len(e.sites))):
        raise ValueError("operating points: elastic costs or GPUs have the wrong shape")
    if e is not None and e.run_hours is not None and e.run_hours.shape != (n_cand,):
        raise ValueError("operating points: elastic run hours have the wrong shape")
