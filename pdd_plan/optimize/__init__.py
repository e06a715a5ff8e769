"""Optimizer: the fleet MILP, the per-architecture search, and the plan it produces."""

from __future__ import annotations

from collections.abc import Callable

from pdd_plan.common import limits
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.inputs.context import Context
from pdd_plan.optimize import summary as optimize_summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.contains import take_contained
from pdd_plan.optimize.owned import OwnedPrices
from pdd_plan.optimize.problem import Catalog, Problem
from pdd_plan.optimize.search.objectives import dinkelbach, solve_architecture
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.optimize.verify import check_size, verified_all
from pdd_plan.outputs.plan import ArchitecturePlan, Infeasible, Plan
from pdd_plan.sim.worker import Forked
from pdd_plan.workload import periods
from pdd_plan.workload.classes import build_classes


def optimize(
    ctx: Context,
    verify: bool = True,
    sim_requests: int = 20_000,
    max_rounds: int = 4,
    timings: bool = False,
    replay_worker: bool | Forked | None = False,
    tail_requests: int = 0,
    deferred: list | None = None,
    idle: Callable[[dict[str, ArchitecturePlan], Callable[[], bool]], None] | None = None,
) -> Plan:
    """Plan every architecture the scenario lists.

    With `verify`, each plan is replayed by the simulator and re-solved with tightened caps
    while its simulated percentiles miss the SLA; the plan keeps analytic and simulated figures.
    An architecture with no plan is reported with its reasons; InfeasibleError only when none
    has one. With `replay_worker` (True, or a child `sim.worker.started` earlier) the replays
    run in a forked child process beside the planning (the same plans, sooner on two cores).
    `tail_requests`: each replay's TTFT figures and checks compose the prefill stage replayed
    over up to that many requests (`sim.tails`; 0: the replay's own). With `deferred` (a list)
    the rounds run on the plain replays' verdicts and the composed ones are left running: the
    `optimize.tails.Pending` appended to it settles the plan later (None: plan again without
    `deferred`). `idle`: called once where the planner would first wait on the replay child,
    with every architecture's first plan and a test of whether the replay is back (what the
    caller does next, started in the wait: `verify.verified_all`).
    """
    sc = ctx.scenario
    pb, replay = problem_of(ctx), ctx.replay_setup
    if periods.is_day(
        ctx.scenario.workload
    ):  # a day of periods: one fleet for the day (optimize/day)
        # the day's planner (and the replay its verification imports) only for a day: a plain
        # run skips ~0.1 s of imports
        from pdd_plan.optimize.day.day_problem import DayProblem
        from pdd_plan.optimize.day.run import optimize_day  # (as above)

        dp = DayProblem.of(pb, replay, periods.build_day(ctx.class_spec), sc)
        return optimize_day(dp, sc, verify, sim_requests, max_rounds)
    cls = build_classes(ctx.class_spec)
    fixed_rate = sc.workload.rate_rps or (cls.rate_rps if sc.workload.trace else None)
    plans: dict[str, ArchitecturePlan] = {}
    raw: dict[str, SolverResult] = {}
    infeasible: dict[str, Infeasible] = {}
    checked = (
        verified_all(
            pb,
            replay,
            list(sc.architectures),
            cls,
            fixed_rate,
            sim_requests,
            max_rounds,
            fork=replay_worker,
            stage=int(tail_requests),
            speculate=deferred,
            idle=idle,
        )
        if verify
        else {}
    )
    for a in sc.architectures:
        # search.time_limit_s holds for one architecture's planning, verification rounds included
        deadline = limits.deadline(sc.search.time_limit_s, ctx.file, f"planning {a}")
        try:
            if verify:
                if isinstance(checked[a], InfeasibleError):
                    raise checked[a]  # type: ignore[misc]
                raw[a], plans[a] = checked[a]  # type: ignore[misc]
                continue
            with deadline:
                raw[a] = solve_architecture(pb, a, cls, fixed_rate, Caps.of(sc.search))
                check_size(pb.file, a, raw[a])
                plans[a] = optimize_summary.summarize(raw[a], cls, raw[a].rate, pb.sites.prefill)
        except InfeasibleError as e:
            # a baseline that cannot meet the SLA is an answer too (e.g. CDC-PD's P99 over a
            # narrow line); only when no architecture can is the scenario itself infeasible
            infeasible[a] = infeasible_of(e)
    if verify:  # PDD contains CDC-PD: a replay must not leave it dearer (optimize/contains)
        take_contained(plans, raw, infeasible, sc.objective, fixed_rate is not None)
    if not plans:
        raise InfeasibleError(
            "; ".join(
                f"{a}: no plan meets the scenario: {i.message}" for a, i in infeasible.items()
            ),
            by_architecture=infeasible,
        )
    if timings:  # wall-clock seconds differ run to run: only on request, so plans stay byte-stable
        for a, p in plans.items():
            timed = p.solver.model_copy(update={"seconds": round(raw[a].solve_seconds, 3)})
            plans[a] = p.model_copy(update={"solver": timed})
    return Plan(
        scenario=sc.name,
        model=ctx.model.name,
        rate_rps=round(float(fixed_rate), 4) if fixed_rate is not None else None,
        objective=sc.objective,
        sla=sc.sla,
        classes=len(cls),
        inputs=sc,  # the scenario as validated: a plan file stands alone
        plans=plans,
        infeasible=infeasible,
        comparison=optimize_summary.comparison(plans, raw, cls),
    )


def problem_of(ctx: Context) -> Problem:
    """The planner's typed inputs, read from the resolved scenario once (the top stage's job:
    nothing below it takes the Context)."""
    sc = ctx.scenario
    sites = ctx.sites
    return Problem(
        sites=sites,
        catalog=Catalog.of(ctx.model, ctx.gpus, sc.search, sc.engine),
        lines=ctx.lines,
        max_lines=sc.link.max_lines if sc.link else 0,
        sla=sc.sla,
        policy=sc.policy,
        search=sc.search,
        owned=OwnedPrices.of(sc.owned, ctx.gpus, sites),
        objective=sc.objective,
        budget_per_hour=sc.budget_per_hour,
        file=ctx.file,
    )


def infeasible_of(e: InfeasibleError) -> Infeasible:
    """The structured reasons an InfeasibleError carries (or its message, classified)."""
    if e.reasons:
        return Infeasible(reasons=e.reasons)
    return Infeasible.from_message(str(e))


__all__ = ["optimize", "problem_of", "solve_architecture", "dinkelbach", "InfeasibleError", "Plan"]
