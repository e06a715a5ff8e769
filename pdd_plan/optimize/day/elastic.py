"""What elastic capacity costs over a day: on-demand prices per decode candidate, what each
datacenter can add per period, and the hours a run is paid beyond the periods it serves.

A run of an elastic instance is paid for `elastic.startup_minutes` before it serves (it is
started that early, so it serves from the period's start), for its drain after it is scaled
down (its in-flight decodes finish: the mean decode time of its requests, output tokens x the
candidate's step time; relay decode stops at `policy.relay_max_tokens`), and up to the billing
granularity: a run's paid time is its serving hours plus start-up plus drain rounded up to whole
`billing_minutes`. When every period's length is a whole number of billing units the round-up
is exactly ceil((start-up + drain) / unit) units per run; otherwise it is bounded by start-up +
drain + one unit (the bound is what is charged).
"""

from __future__ import annotations

import math

import numpy as np

from pdd_plan.optimize import points
from pdd_plan.optimize.day.problem import DayProblem
from pdd_plan.optimize.search import owned
from pdd_plan.optimize.tables import DecodeCandidate
from pdd_plan.workload.periods import Day
from pdd_plan.workload.requests import RequestClasses


def on_demand(dp: DayProblem, c: DecodeCandidate) -> float:
    """$/hour of candidate c as an elastic instance (its GPUs at on-demand prices; a GPU type
    without one at its base price)."""
    base = dp.base_price(c.gpu)
    return c.cost_per_hour * dp.on_demand.get(c.gpu, base) / base


def drain_s(dp: DayProblem, classes: RequestClasses, c: DecodeCandidate) -> float:
    """Mean seconds an instance's in-flight decodes take to finish once it takes no more."""
    out = np.asarray(classes.output_tokens, float)
    if c.role == "relay_decode":
        out = np.minimum(out, dp.pb.policy.relay_max_tokens)
    return float(np.dot(classes.weight, out)) * c.step_s


def run_hours(dp: DayProblem, day: Day, classes: RequestClasses, c: DecodeCandidate) -> float:
    """Hours a run is paid beyond the periods it serves (see the module docstring)."""
    el = dp.elastic
    return paid_hours(day, el.startup_minutes + drain_s(dp, classes, c) / 60.0, el.billing_minutes)


def paid_hours(day: Day, extra_minutes: float, unit: float) -> float:
    """Hours paid for `extra_minutes` beyond a run's periods, billed in units of `unit` min."""
    whole = all(abs(p.hours * 60 / unit - round(p.hours * 60 / unit)) < 1e-9 for p in day.periods)
    paid = math.ceil(extra_minutes / unit - 1e-12) * unit if whole else extra_minutes + unit
    return paid / 60.0


def max_gpus(dp: DayProblem, day: Day) -> tuple[tuple[tuple[str, str], ...], np.ndarray]:
    """Sites (datacenter, GPU) and the GPUs each can add per period (the periods in `day`
    order; a period's `elastic_max_gpus` replaces `elastic.max_gpus`)."""
    tables = dp.period_gpus
    sites = tuple(sorted({(dc, g) for t in tables for dc, gs in t.items() for g in gs}))
    gpus = np.array(
        [[t.get(dc, {}).get(g, 0) for dc, g in sites] for t in tables], dtype=float
    ).reshape(len(tables), len(sites))
    return sites, gpus


def elastic_of(
    dp: DayProblem,
    day: Day,
    classes: RequestClasses,
    cands: list[DecodeCandidate],
    lag: bool = True,
    taken: tuple | None = None,
) -> points.Elastic | None:
    """The day's elastic capacity over decode candidates `cands` (main, then relay decode, as
    in the tables); None without `elastic:`. `lag` False: runs cost nothing beyond their
    periods (a check's setting); `taken`: (datacenter, GPU, GPUs per period) that elastic
    prefill instances already take."""
    if dp.elastic is None:
        return None
    sites, gpus = max_gpus(dp, day)
    if taken is not None and tuple(taken[:2]) in sites:
        j = sites.index(tuple(taken[:2]))
        gpus[:, j] = np.maximum(gpus[:, j] - taken[2], 0)
    cost = np.array([on_demand(dp, c) for c in cands])
    hours = np.array([run_hours(dp, day, classes, c) for c in cands]) if lag else None
    return points.Elastic(cost, sites, gpus, run_hours=hours, owned_first=owned_first(dp, sites))


def owned_first(dp: DayProblem, sites: tuple[tuple[str, str], ...]) -> np.ndarray | None:
    """Per site: the GPUs owned there that the base must use before elastic ones are bought
    (those owned at no more than the on-demand price; owned GPUs are there all day, and
    leaving them idle while buying more costs the owner both). None: nothing owned."""
    owned_gpus = owned.gpus(dp.pb.owned)
    out = np.zeros(len(sites))
    for j, (dc, g) in enumerate(sites):
        og = owned_gpus.get((dc, g))
        if og is not None and og.price <= dp.on_demand.get(g, dp.base_price(g)):
            out[j] = og.count
    return out if out.any() else None
