"""Verification: replay each architecture's plan in the simulator and re-solve with a tighter
cap on its bottleneck while the replay misses the SLA; a plan that still misses is no answer."""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator

from pdd_plan.common import limits
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.optimize import summary as optimize_summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Problem
from pdd_plan.optimize.search.objectives import solve_architecture
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.optimize.tails import Pending, simulated_of
from pdd_plan.outputs.plan import ArchitecturePlan, Reason
from pdd_plan.sim.verdict import Verdict
from pdd_plan.sim.worker import Forked, replays
from pdd_plan.workload.requests import RequestClasses


def verification(
    pb: Problem,
    a: str,
    classes: RequestClasses,
    rate: float | None,
    n_requests: int,
    rounds: int,
) -> Generator[ArchitecturePlan, Verdict, tuple[SolverResult, ArchitecturePlan]]:
    """Solve, replay the plan in the simulator, and while the simulated SLA fails cap the
    bottleneck 10% below the utilization the plan ran it at and re-solve (at most `rounds`
    times). A plan whose replay still misses the SLA then, or whose re-solve under the tighter
    cap finds no plan, does not meet the scenario: InfeasibleError with a `replay_sla` reason
    carrying the replay's figures, so no comparison or ranking can pick it.

    A generator, so that the replays can run elsewhere while other plans are solved: it yields
    each plan to replay and is sent the replay's `sim.run.verify` verdict; it returns the
    solver's result and the plan with its simulated figures (`verified_all` drives it)."""
    caps = Caps.of(pb.search)
    history: list[dict] = []
    kept = None
    instead: Caps | None = None  # the line capped, where its stretched estimate finds no plan
    for i in range(rounds + 1):
        try:
            raw = solve_architecture(pb, a, classes, rate, caps)
        except InfeasibleError as e:
            if kept is None:
                raise
            history.append({"round": i, "caps": dict(caps.__dict__), "infeasible": str(e)})
            if instead is None:
                break
            # the stretch lengthens every transfer, the bare time too, which no line bought
            # shortens: where it leaves no plan, the line's utilization is capped instead
            caps, instead = instead, None
            continue
        check_size(pb.file, a, raw)
        summary = optimize_summary.summarize(raw, classes, raw.rate, pb.sites.prefill)
        v = yield summary
        kept = (raw, summary, v)
        history.append(
            {
                "round": i,
                "caps": dict(caps.__dict__),
                "sla_met": v.sla_met,
                "bottleneck": v.bottleneck,
            }
        )
        if v.sla_met or v.bottleneck is None or i == rounds:
            break
        used = optimize_summary.utilization(raw, v.bottleneck)
        prev, caps = caps, caps.tightened(v.bottleneck, used)
        instead = prev.capped(v.bottleneck, used) if caps.line_delay != prev.line_delay else None
    raw, summary, v = kept  # type: ignore[misc]  # the loop runs at least once
    if not v.sla_met:
        why = replay_miss(summary.cost_per_hour, v, n_requests, history)
        raise InfeasibleError(f"{a}: no plan meets the scenario: {why.message}", reasons=[why])
    return raw, summary.model_copy(update={"simulated": simulated_of(v, history)})


Outcome = tuple[SolverResult, ArchitecturePlan] | InfeasibleError


def verified_all(
    pb: Problem,
    replay: ReplaySetup,
    architectures: list[str],
    classes: RequestClasses,
    rate: float | None,
    n_requests: int,
    rounds: int,
    fork: bool | Forked | None = False,
    stage: int = 0,
    speculate: list | None = None,
    idle: Callable[[dict[str, ArchitecturePlan], Callable[[], bool]], None] | None = None,
) -> dict[str, Outcome]:
    """:func:`verification` of every architecture, each plan's replay handed to
    `sim.worker.replays` as soon as it is solved: with `fork` (True, or a child started
    earlier), a child process loads the kernels and replays while the next architectures are
    solved here. Every architecture's first solve runs before any replay's result is awaited;
    after that each is taken up in turn, as driving them one after another would, so the
    outcomes and the first error raised (other than InfeasibleError, which is an outcome) are
    the same as theirs. An architecture's `search.time_limit_s` runs from its first solve.

    `stage`: each replay's TTFT figures and checks composed with the prefill stage replayed
    over up to that many requests (`sim.run.verify`'s `stage_requests`). With `speculate` (a
    list) the rounds run on the replays' own verdicts, and the composed replays of every round
    are handed to the child to run while the caller goes on: the `optimize.tails.Pending`
    appended to `speculate` settles the plan later, the same as `stage` would have made it.
    `idle` runs once, the first time a replay's result is awaited before it is there, given
    every architecture's first plan and a test of whether that result has come."""

    def deadline(a: str, started: float | None = None):
        what = f"planning {a}"
        return limits.deadline(pb.search.time_limit_s, pb.file, what, started)

    out: dict[str, Outcome] = {}
    steps, tickets, started, failed = {}, {}, {}, {}
    sim = replays(replay, n_requests, replay.seed, fork)
    if stage:
        sim.draw_ahead(stage)  # a child draws the stage's requests while the first plans solve
    now = 0 if speculate is not None else stage  # speculating: the replays' own verdicts first
    log: dict[str, list] = {a: [] for a in architectures}  # each round's plan and its verdict

    def submit(plan: ArchitecturePlan, a: str) -> int:
        log[a].append([plan, None])
        return sim.submit(plan, a, now)

    pending = None
    try:
        for a in architectures:
            with deadline(a) as d:
                started[a] = d.end - d.seconds
                steps[a] = verification(pb, a, classes, rate, n_requests, rounds)
                try:
                    tickets[a] = submit(next(steps[a]), a)
                except Exception as e:  # raised in its turn, below
                    failed[a] = e
        for a in architectures:
            try:
                if a in failed:
                    raise failed[a]
                while True:
                    if idle is not None and not sim.ready(tickets[a]):
                        run_idle, idle = idle, None
                        first = {b: log[b][0][0] for b in architectures if log[b]}
                        run_idle(first, functools.partial(sim.ready, tickets[a]))  # meanwhile
                    v = sim.result(tickets[a])
                    log[a][-1][1] = v
                    with deadline(a, started[a]):
                        try:
                            tickets[a] = submit(steps[a].send(v), a)
                        except StopIteration as done:
                            out[a] = done.value
                            break
            except InfeasibleError as e:
                out[a] = e
        if speculate is not None and stage:
            pending = Pending.of(sim, log, stage, own=not isinstance(fork, Forked))
            speculate.append(pending)
    finally:
        if pending is None:
            sim.close()
    return out


def check_size(file: str, a: str, p: SolverResult) -> None:
    """A solution past the PLAN_INSTANCES limit (a rate that needs a huge fleet) is a one-line
    error naming the rate, before the plan schema would refuse it as an internal error."""
    total = p.prefill_count + sum(p.solution.counts.get(o.cand.key, 0) for o in p.options)
    limits.check(
        "PLAN_INSTANCES",
        total,
        file,
        "workload.rate_rps",
        f"{a}'s plan needs {total:,} instances: lower the rate",
    )


# the SLA field each replay check compares against
CHECK_FIELDS = {
    "ttft_p90": "sla.ttft_p90_s",
    "ttft_p99": "sla.ttft_p99_s",
    "tpot_p90": "sla.tpot_ms",
}
CHECK_TEXT = {
    "ttft_p90": ("TTFT P90", "s"),
    "ttft_p99": ("TTFT P99", "s"),
    "tpot_p90": ("TPOT P90", "ms"),
}


def replay_miss(cost: float, v: Verdict, n_requests: int, history: list[dict]) -> Reason:
    """Why a verified plan is not an answer: the replay's figures against the SLA."""

    def fig(k: str) -> str:
        c = v.checks[k]
        name, unit = CHECK_TEXT[k]
        sim = "-" if c.simulated is None else f"{c.simulated:.3g}"
        return f"{name} {sim} {unit} {'<=' if c.ok else '>'} {c.target:g} {unit}"

    failed = v.failed_checks
    met = [k for k in v.checks if k not in failed]
    also = f" ({', '.join(fig(k) for k in met)})" if met else ""
    fields = ", ".join(CHECK_FIELDS[k] for k in failed)
    tries = f"{len(history) - 1} re-solve(s) with tighter caps"
    if "infeasible" in history[-1]:
        tries += " (the last found no plan)"
    return Reason(
        kind="replay_sla",
        message=f"the simulator replay ({n_requests:,} requests) of its ${cost:,.1f}/h plan "
        f"misses the SLA after {tries}: "
        f"{', '.join(fig(k) for k in failed)}{also}; relax {fields}, or add capacity "
        f"(bottleneck: {v.bottleneck or 'none found'})",
        field=CHECK_FIELDS[failed[0]] if failed else None,
    )
