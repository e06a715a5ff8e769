"""A day of traffic in the scenario: its periods (each with its rate and, optionally, its own
request mix), or periods cut from a trace; the elastic capacity on top of the base fleet and how
it is paid; the timezone the periods' hours are in.

The periods of `workload.periods` cover the 24 hours of a day once each: sorted by their start
hour, each ends where the next starts, the last wrapping past midnight to the first.
"""

import zoneinfo

from pydantic import Field, PositiveFloat, field_validator, model_validator

from pdd_plan.common import limits
from pdd_plan.inputs.schema.common import MAX_USD_PER_GPU_HOUR, Strict
from pdd_plan.inputs.schema.distribution import Distribution, hit_range, token_range

HOURS_PER_DAY = 24.0
# a period's start and length are read to the second: 1/3600 h of slack for rounding
TOL_H = 1.0 / 3600.0


class Period(Strict):
    start_hour: float = Field(ge=0, lt=24)
    """Start, in hours after local midnight (the scenario's `timezone`); 7.5 is 07:30."""
    hours: float
    """Length in hours (> 0); the periods sorted by start must cover the day without gap or
    overlap."""
    rate_rps: float | None = Field(default=None, ge=0, le=1e6)
    """Requests per second in this period (or give `rate_multiplier`)."""
    rate_multiplier: float | None = Field(default=None, ge=0, le=1e3)
    """This period's rate as a multiple of `workload.rate_rps`."""
    prefix_hit: Distribution | None = None
    """This period's prefix-hit distribution (default: the workload's)."""
    input_tokens: Distribution | None = None
    """This period's prompt lengths (default: the workload's)."""
    output_tokens: Distribution | None = None
    """This period's output lengths (default: the workload's)."""
    elastic_max_gpus: dict[str, dict[str, int]] | None = None
    """Elastic GPUs each datacenter can add in this period, per GPU type (default:
    `elastic.max_gpus`)."""

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _tokens(cls, v: Distribution | None) -> Distribution | None:
        return token_range(v)  # named at the period's field, not at `workload`

    @field_validator("prefix_hit")
    @classmethod
    def _hits(cls, v: Distribution | None) -> Distribution | None:
        return v if v is None else hit_range(v)

    @model_validator(mode="after")
    def _one_rate(self) -> "Period":
        if (self.rate_rps is None) == (self.rate_multiplier is None):
            raise ValueError("a period gives exactly one of rate_rps, rate_multiplier")
        return self


class PeriodsFromTrace(Strict):
    period_minutes: PositiveFloat = Field(le=1440)
    """Length of each period (minutes): the trace's timestamps are cut into periods of it, each
    with its own rate and request mix (the trace is `workload.trace`); the trace's span is
    taken to the nearest minute, and a last piece under half a period joins the one before."""
    start_hour: float = Field(default=0.0, ge=0, lt=24)
    """Local hour of day of the trace's first request (the periods' clock times)."""

    @model_validator(mode="after")
    def _whole_minutes(self) -> "PeriodsFromTrace":
        whole_minutes(self.period_minutes / 60.0, "workload.periods_from_trace.period_minutes")
        whole_minutes(self.start_hour, "workload.periods_from_trace.start_hour")
        return self


class Elastic(Strict):
    max_gpus: dict[str, dict[str, int]] = {}
    """Elastic GPUs each datacenter can add on top of the base fleet in any period, per GPU
    type: `{datacenter: {gpu: count}}` (a period's `elastic_max_gpus` overrides it)."""
    startup_minutes: float = Field(default=10.0, ge=0, le=1440)
    """Minutes an elastic instance is paid before it serves (node start and model load; default
    10: an assumption, of the order of loading hundreds of GB of weights)."""
    billing_minutes: float = Field(default=60.0, gt=0, le=1440)
    """Billing granularity of on-demand GPUs (minutes): a run is paid in whole units of it
    (default 60: hourly billing, an assumption; 1 for per-minute billing)."""


def check_timezone(tz: str) -> str:
    """An IANA timezone name zoneinfo knows, e.g. Asia/Shanghai or UTC."""
    if tz.startswith(("/", ".")) or not tz.strip():
        raise ValueError(f"timezone '{tz}' is not an IANA name (e.g. UTC, Asia/Shanghai)")
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone '{tz}': give an IANA name such as UTC or Asia/Shanghai"
        ) from None
    return tz


def whole_minutes(hours: float, what: str) -> None:
    """A period's start or length on the minute: the emitted scaling schedule is cron, whose
    unit is the minute (a 30 s period gave a window that starts where it ends)."""
    m = hours * 60.0
    if abs(m - round(m)) > 60.0 * TOL_H:
        raise ValueError(
            f"{what} is {m:g} minutes: periods start and last whole minutes (the scaling "
            "schedule is cron, by the minute)"
        )


def check_periods(periods: list[Period], have_rate: bool) -> None:
    """The periods cover the day once, each one's rate is known, and some rate is positive."""
    if not periods:
        raise ValueError("workload.periods is empty: give at least one period")
    if len(periods) > limits.value("PERIODS"):
        raise ValueError(limits.exceeded("PERIODS", len(periods)))
    for i, p in enumerate(periods):
        if not p.hours > 0:
            raise ValueError(f"workload.periods[{i}].hours must be > 0 (got {p.hours:g})")
        whole_minutes(p.start_hour, f"workload.periods[{i}].start_hour")
        whole_minutes(p.hours, f"workload.periods[{i}].hours")
        if p.rate_multiplier is not None and not have_rate:
            raise ValueError(
                f"workload.periods[{i}].rate_multiplier needs workload.rate_rps to multiply"
            )
    order = sorted(range(len(periods)), key=lambda i: periods[i].start_hour)
    for a, b in zip(order, order[1:] + order[:1]):
        end = (periods[a].start_hour + periods[a].hours) % HOURS_PER_DAY
        nxt = periods[b].start_hour
        gap = (nxt - end + 12.0) % HOURS_PER_DAY - 12.0  # signed, the nearest way round
        if abs(gap) > TOL_H:
            what = "overlaps" if gap < 0 else "leaves a gap before"
            raise ValueError(
                f"workload.periods[{a}] (from {periods[a].start_hour:g} h for "
                f"{periods[a].hours:g} h) {what} periods[{b}] (from {nxt:g} h): each period "
                "must end where the next starts"
            )
    total = sum(p.hours for p in periods)
    if abs(total - HOURS_PER_DAY) > TOL_H:
        raise ValueError(f"workload.periods last {total:g} h in all; they must cover 24 h")
    if not any((p.rate_rps or 0) > 0 or (p.rate_multiplier or 0) > 0 for p in periods):
        raise ValueError("every period's rate is 0: give some period a positive rate")


def check_prices(prices: dict[str, float]) -> None:
    for g, x in prices.items():
        if not 0 < x <= MAX_USD_PER_GPU_HOUR:
            raise ValueError(f"on_demand_prices.{g} must be in (0, {MAX_USD_PER_GPU_HOUR:g}]")


def check_elastic_gpus(table: dict[str, dict[str, int]], dcs: dict[str, dict[str, int]]) -> None:
    """Elastic GPUs name known datacenters, GPU types and non-negative counts."""
    for dc, gpus in table.items():
        if dc not in dcs:
            raise ValueError(f"elastic max_gpus names unknown datacenter '{dc}' (have {list(dcs)})")
        for g, n in gpus.items():
            if g not in dcs[dc]:
                raise ValueError(
                    f"elastic max_gpus.{dc}.{g}: {dc} lists no {g} (has {', '.join(dcs[dc])}): "
                    f"add {g} to its gpus, or remove the entry"
                )
            if n < 0:
                raise ValueError(f"elastic max_gpus.{dc}.{g} must be >= 0 (got {n})")
            if not n <= limits.value("GPUS"):
                raise ValueError(limits.exceeded("GPUS", n))


def check_free_scale(days: bool, objective: str, budget: float | None) -> None:
    """`day_scale: free` frees the profile's scale for the best day BCR: a day, objective bcr,
    and no budget (the scale, not a spend cap, sets what the day buys)."""
    if not days:
        raise ValueError("day_scale free needs workload.periods or periods_from_trace")
    if objective != "bcr":
        raise ValueError(
            f"day_scale free maximizes the day's BCR: set objective bcr (not {objective})"
        )
    if budget is not None:
        raise ValueError("day_scale free sets no budget: remove budget_per_hour or day_scale")
