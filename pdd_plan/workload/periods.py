"""A day of traffic as the planner reads it: the periods (clock time, hours, rate) and each
one's request mix over one set of classes.

The classes are built from the day's requests pooled (each period's sample in proportion to
the requests it carries), so one class means the same requests in every period and a period's
mix is the share of its own requests in each class. With `workload.periods_from_trace` the
pooled requests are the trace itself and a period's are those whose timestamps fall in it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

import numpy as np

from pdd_plan.common import limits
from pdd_plan.inputs.pieces import ClassSpec
from pdd_plan.inputs.schema.scenario import Workload
from pdd_plan.workload import classes as wclasses
from pdd_plan.workload.requests import RequestClasses, Requests
from pdd_plan.workload.traces.classes import class_index

# a period's sample is never smaller than this (its mix must be measured, not guessed)
MIN_PERIOD_SAMPLES = 500


@dataclass(frozen=True)
class DayPeriod:
    start_hour: float  # local hour of day
    hours: float
    rate_rps: float  # 0 for an idle period
    class_weight: np.ndarray  # shares of the period's requests per class (sums to 1)


@dataclass(frozen=True)
class Day:
    classes: RequestClasses  # the day's classes (the pooled mix)
    periods: tuple[DayPeriod, ...]  # sorted by start hour
    from_trace: bool

    @property
    def hours(self) -> float:
        return float(sum(p.hours for p in self.periods))

    @property
    def peak_rps(self) -> float:
        return max(p.rate_rps for p in self.periods)

    @property
    def mean_rps(self) -> float:
        """Requests per second over the day (its requests / its seconds)."""
        return sum(p.rate_rps * p.hours for p in self.periods) / self.hours


def is_day(w: Workload) -> bool:
    return w.periods is not None or w.periods_from_trace is not None


def build_day(spec: ClassSpec) -> Day:
    """The scenario's day (workload.periods or periods_from_trace)."""
    w = spec.workload
    if w.periods_from_trace is not None:
        return _from_trace(spec)
    rates = [
        float(p.rate_rps) if p.rate_rps is not None else float(p.rate_multiplier) * w.rate_rps
        for p in w.periods
    ]
    volume = np.array([r * p.hours for r, p in zip(rates, w.periods)])
    share = volume / volume.sum()
    # periods with the same distributions share one sample (and so one mix): only their rates
    # differ, and a flat day samples exactly what the single-rate planner does
    kinds: dict[str, list[int]] = {}
    for i, p in enumerate(w.periods):
        own = p.model_dump(mode="json", include={"prefix_hit", "input_tokens", "output_tokens"})
        kinds.setdefault(json.dumps(own, sort_keys=True), []).append(i)
    parts, mixes, weights = [], [], []
    for g, members in enumerate(kinds.values()):
        p = w.periods[members[0]]
        own = {k: getattr(p, k) for k in ("prefix_hit", "input_tokens", "output_tokens")}
        pw = w.model_copy(update={k: v for k, v in own.items() if v is not None})
        g_share = float(share[members].sum())
        n = max(MIN_PERIOD_SAMPLES, int(round(w.samples * g_share)))
        parts.append(wclasses.sampled(spec, pw, n, spec.seed + g))
        weights.append(np.full(n, g_share / n))
    pooled = _concat(parts)
    # the pooled sample weighs each kind by its requests, not by its (floored) sample size
    cls, idx = _classes(spec, pooled, np.concatenate(weights) if len(parts) > 1 else None)
    bounds = np.cumsum([0] + [len(x) for x in parts])
    for g in range(len(parts)):
        mixes.append(_mix(idx[bounds[g] : bounds[g + 1]], len(cls)))
    kind_of = {i: g for g, members in enumerate(kinds.values()) for i in members}
    periods = [
        DayPeriod(float(p.start_hour), float(p.hours), rates[i], mixes[kind_of[i]])
        for i, p in enumerate(w.periods)
    ]
    periods.sort(key=lambda p: p.start_hour)
    return Day(cls, tuple(periods), False)


def _from_trace(cs: ClassSpec) -> Day:
    spec = cs.workload.periods_from_trace
    req = wclasses.trace_requests(cs)
    # whole minutes, as every period (the schedule's cron has no seconds): the trace's span to
    # the nearest minute, cut into periods; a last piece under half a period joins the one
    # before it (a trailing request alone would otherwise be a seconds-long busiest period)
    minutes = max(1, round(req.duration_s / 60.0))
    per = int(round(spec.period_minutes))
    k = max(1, math.ceil(minutes / per))
    if k > 1 and minutes - (k - 1) * per < per / 2:
        k -= 1
    limits.check("PERIODS", k, cs.file, "workload.periods_from_trace.period_minutes")
    length = per * 60.0
    t = np.asarray(req.arrival_s, float) - float(req.arrival_s[0])
    which = np.minimum((t // length).astype(np.int64), k - 1)
    cls, idx = _classes(cs, req, None)
    periods = []
    for i in range(k):
        secs = (minutes - i * per) * 60.0 if i == k - 1 else length
        mine = idx[which == i]
        rate = len(mine) / secs if secs > 0 else 0.0
        mix = _mix(mine, len(cls)) if len(mine) else cls.weight
        start = (spec.start_hour + i * length / 3600.0) % 24.0
        periods.append(DayPeriod(start, secs / 3600.0, rate, mix))
    return Day(replace(cls, rate_rps=None), tuple(periods), True)


def _concat(parts: list[Requests]) -> Requests:
    cat = [
        np.concatenate([getattr(p, f) for p in parts])
        for f in ("arrival_s", "input_tokens", "output_tokens", "hit_p", "hit_d")
    ]
    return Requests(*cat)


def _classes(
    spec: ClassSpec, req: Requests, weights: np.ndarray | None
) -> tuple[RequestClasses, np.ndarray]:
    """The classes of the pooled requests and each request's class; with `weights`, the class
    and stratum weights are the requests' weights summed (each period at its share)."""
    cls = wclasses.classes_of(spec, req)
    idx = class_index(req, wclasses.input_buckets(spec), output_split=spec.singular_split)
    if weights is None:
        return cls, idx
    w = np.bincount(idx, weights, len(cls))
    return reweighted(cls, w / w.sum()), idx


def _mix(idx: np.ndarray, n: int) -> np.ndarray:
    c = np.bincount(idx, minlength=n).astype(float)
    return c / c.sum()


def reweighted(cls: RequestClasses, weight: np.ndarray) -> RequestClasses:
    """The classes with another mix: each class's strata keep their shares within it. A class
    the mix lacks keeps a 1e-9 share, so a figure averaged over its strata stays defined."""
    weight = np.maximum(np.asarray(weight, float), 1e-9)
    weight = weight / weight.sum()
    nodes = cls.nodes
    if nodes is not None and cls.node_class is not None:
        own = np.bincount(cls.node_class, nodes.weight, len(cls))
        f = np.divide(weight, own, out=np.zeros_like(weight), where=own > 0)
        nodes = replace(nodes, weight=nodes.weight * f[cls.node_class])
    return replace(cls, weight=weight, nodes=nodes)
