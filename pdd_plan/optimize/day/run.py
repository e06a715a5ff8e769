"""Plan a day for every architecture the scenario lists: the day's fleet, its replay per
period (with re-solves), the typed plan (the busiest period's fleet as each architecture's plan,
the day in the plan's `day` block) and the comparison of the day's BCRs."""

from __future__ import annotations

from pdd_plan.architectures import LINE_BASELINE, LOCAL_BASELINE, RELAY_ARCH, get
from pdd_plan.common import limits
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import summary as optimize_summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.day import scale, search, summary, verify
from pdd_plan.optimize.day.day_problem import DayProblem
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.outputs.day_plan import DayArchitecture, DayPlan, ScaleTry
from pdd_plan.outputs.plan import ArchitecturePlan, Infeasible, Plan
from pdd_plan.workload.periods import Day, reweighted

# a period's replay: this share of --sim-requests (24 periods x 3 architectures stay in seconds)
PERIOD_REQUESTS_SHARE = 0.05


def _one(
    dp: DayProblem, a: str, day: Day, verified: bool, n: int, rounds: int
) -> tuple[SolverResult, ArchitecturePlan, DayArchitecture]:
    found = None
    if dp.free_scale:  # the best day BCR: plan (and replay) the day at the best scale found
        s, tried = scale.best_scale(dp, get(a), Caps.of(dp.pb.search))
        found = (s, tried)
        dp = scale.scaled(dp, s)
        day = dp.day
    if verified:
        ds, replays, i, peak, met = verify.verified_day(dp, a, day, n, rounds)
    else:
        caps = Caps.of(dp.pb.search)
        seed = search.peak_plan(dp, get(a), day, caps)
        ds, replays, i, peak = search.plan_day(dp, get(a), day, caps, seed=seed), None, 0, 0.0
        peak, met = seed.cost_per_hour, True
    k = search.busiest(day)
    raw = summary.period_result(ds, day, k)
    plan = summary.period_plan(ds, day, k)
    d = summary.day_architecture(ds, day, peak)
    if found is not None:
        d = d.model_copy(update=_scale_fields(*found))
    if replays is not None:
        periods = [p.model_copy(update={"replay": r}) for p, r in zip(d.periods, replays)]
        d = d.model_copy(update={"periods": periods, "sla_met": met, "rounds": i})
        if not met:
            raise InfeasibleError(
                f"{a}: no day plan meets the scenario: the replay misses the SLA in periods "
                + ", ".join(
                    f"{p.start_hour:g} h" for p, r in zip(d.periods, replays) if not r.sla_met
                )
                + f" after {i} re-solve(s) with tighter caps"
                + (" (the next found no day)" if i < rounds else "")
                + "; relax the SLA or add capacity"
            )
    return raw, plan, d


def _scale_fields(s: float, tried: list[scale.Tried]) -> dict:
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 6) + 0.0

    at_1 = next((t.bcr for t in tried if t.scale == 1.0), None)
    return {
        "scale": r(s),
        "bcr_at_profile": r(at_1),
        "scales_tried": [
            ScaleTry(scale=r(t.scale), cost_day=r(t.cost_day), bcr=r(t.bcr)) for t in tried
        ],
    }


def optimize_day(
    dp: DayProblem,
    sc: Scenario,
    verify_: bool = True,
    sim_requests: int = 20_000,
    max_rounds: int = 4,
) -> Plan:
    """Every architecture's day (`dp`: the top stage's typed inputs; `sc`: the scenario the
    plan file carries)."""
    day = dp.day
    n = max(verify.MIN_REQUESTS, int(sim_requests * PERIOD_REQUESTS_SHARE))
    plans: dict[str, ArchitecturePlan] = {}
    raw: dict[str, SolverResult] = {}
    days: dict[str, DayArchitecture] = {}
    infeasible: dict[str, Infeasible] = {}
    for a in sc.architectures:
        deadline = limits.deadline(sc.search.time_limit_s, dp.pb.file, f"planning {a}'s day")
        try:
            with deadline:
                raw[a], plans[a], days[a] = _one(dp, a, day, verify_, n, max_rounds)
        except InfeasibleError as e:
            infeasible[a] = (
                Infeasible(reasons=e.reasons) if e.reasons else Infeasible.from_message(str(e))
            )
    if not plans:
        raise InfeasibleError(
            "; ".join(f"{a}: {i.message}" for a, i in infeasible.items()),
            by_architecture=infeasible,
        )
    peak = search.busiest(day)
    cls = reweighted(day.classes, day.periods[peak].class_weight)
    el = sc.elastic
    return Plan(
        scenario=sc.name,
        model=dp.pb.model.name,
        rate_rps=round(float(day.periods[peak].rate_rps), 4),
        objective=sc.objective,
        sla=sc.sla,
        classes=len(day.classes),
        inputs=sc,
        plans=plans,
        infeasible=infeasible,
        comparison=optimize_summary.comparison(plans, raw, cls),
        day=DayPlan(
            timezone=sc.timezone,
            hours=round(day.hours, 6),
            sla_over=sc.sla.over,
            startup_minutes=el.startup_minutes if el is not None else None,
            architectures=days,
            bcr_gain=_gains(days),
        ),
    )


def _gains(days: dict[str, DayArchitecture]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for b in (LOCAL_BASELINE, LINE_BASELINE):
        if RELAY_ARCH in days and b in days and days[b].bcr > 0:
            out[f"vs_{b}"] = round(days[RELAY_ARCH].bcr / days[b].bcr - 1.0, 4) + 0.0
        else:
            out[f"vs_{b}"] = None
    return out
