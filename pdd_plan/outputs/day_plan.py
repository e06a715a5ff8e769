"""A day's plan (the optional `day` block of a plan file): per architecture the fleet's groups
with their base and per-period instances, per period its rate, cost, line load, path shares
and replay, and the day's cost split and BCR."""

from typing import ClassVar

from pydantic import Field, NonNegativeFloat, NonNegativeInt, model_validator

from pdd_plan.outputs.base import Out

MAX_DAY_COST = 1e15  # $ per day; finite and far above any fleet
MAX_COUNT = 100_000  # instances of one group (the plan's MAX_INSTANCES_PER_GROUP)
DayCost = Field(ge=0, le=MAX_DAY_COST)


class DayGroup(Out):
    """One instance group of the day's fleet: its shape, its base count (paid every hour) and
    its instances in each period (base plus elastic)."""

    role: str
    gpu: str
    datacenter: str
    gpus_per_instance: int = Field(ge=1)
    tp: int = Field(ge=1)
    dp: int = Field(ge=1)
    ep: int = Field(ge=1)
    base: NonNegativeInt = Field(le=MAX_COUNT)
    per_period: list[NonNegativeInt]  # instances in each period, base included


class PeriodReplay(Out):
    """The replay of one period's fleet at its rate and mix."""

    requests: NonNegativeInt
    ttft_p90_s: float | None
    ttft_p99_s: float | None
    tpot_p90_ms: float | None
    sla_met: bool


class DayPeriod(Out):
    start_hour: float = Field(ge=0, lt=24)
    hours: float = Field(gt=0)
    rate_rps: NonNegativeFloat
    base_per_role: dict[str, int]
    elastic_per_role: dict[str, int]
    cost_per_hour: float = Field(ge=0, le=MAX_DAY_COST)  # base + elastic while it lasts
    line_utilization: float | None
    route_share: dict[str, float]  # path -> share of the period's requests
    replay: PeriodReplay | None = None

    _omit_if_none: ClassVar[tuple[str, ...]] = ("replay",)


class ScaleTry(Out):
    """One scale of the rate profile the best-BCR search planned (day_scale free)."""

    scale: float = Field(gt=0)
    cost_day: float | None = Field(default=None, ge=0, le=MAX_DAY_COST)  # None: no day
    bcr: NonNegativeFloat | None = None


class DayArchitecture(Out):
    groups: list[DayGroup]
    periods: list[DayPeriod]
    cost_base: float = DayCost  # $ per day: the base fleet (prefill pool included), 24 h
    cost_elastic: float = DayCost  # $ per day: elastic instances, runs' extra hours included
    cost_line: float = DayCost  # $ per day: the line lease
    cost_day: float = DayCost
    peak_plan_cost_day: float | None = None  # 24 h of the busiest period's single-rate plan
    requests: NonNegativeFloat  # the day's requests
    bcr: NonNegativeFloat  # the day's requests per second per $/hour (mean rate / mean cost)
    sla_met: bool | None = None  # every period's replay met the SLA (None: not replayed)
    rounds: NonNegativeInt = 0  # re-solves after a missed replay
    # day_scale free: the profile's scale planned (every period's rate times it), the BCR of
    # the cheapest day at the profile as given (s = 1), and every scale the search planned;
    # those are the search's plans, before any replay (a replay's re-solves can raise the cost)
    scale: float | None = Field(default=None, gt=0)
    bcr_at_profile: NonNegativeFloat | None = None
    scales_tried: list[ScaleTry] | None = None

    _omit_if_none: ClassVar[tuple[str, ...]] = ("scale", "bcr_at_profile", "scales_tried")

    @model_validator(mode="after")
    def _one_schedule(self) -> "DayArchitecture":
        """The groups' schedules and the periods agree (a hand-edited plan with too few
        `per_period` entries was rendered, and emitted, as if they did)."""
        n = len(self.periods)
        if n == 0:
            raise ValueError("a day has at least one period")
        for i, g in enumerate(self.groups):
            if len(g.per_period) != n:
                raise ValueError(
                    f"groups[{i}].per_period has {len(g.per_period)} entries for {n} periods: "
                    "one count per period"
                )
            if min(g.per_period) < g.base:
                raise ValueError(
                    f"groups[{i}].per_period counts {min(g.per_period)} instances in some period, "
                    f"below its base of {g.base} (the base runs every hour)"
                )
        starts = [p.start_hour for p in self.periods]
        if starts != sorted(starts):
            raise ValueError("periods are not in the order of their start_hour")
        return self


class DayPlan(Out):
    timezone: str
    hours: float = Field(gt=0)  # the periods' hours (24, or a trace's span)
    sla_over: str
    startup_minutes: NonNegativeFloat | None = None
    architectures: dict[str, DayArchitecture]
    bcr_gain: dict[str, float | None] = {}  # pdd's day BCR over each baseline's, - 1

    @model_validator(mode="after")
    def _hours(self) -> "DayPlan":
        for a, d in self.architectures.items():
            total = sum(p.hours for p in d.periods)
            if abs(total - self.hours) > 1e-6 * max(self.hours, 1.0):
                raise ValueError(
                    f"architectures.{a}: the periods last {total:g} h, the day {self.hours:g} h"
                )
        return self
