"""A plan under uncertainty: the draws, every planned fleet evaluated under each (paired), the
comparisons' probabilities, the tornado and flip sentences, the line's break-even price, and
N-1, as the plan's typed `uncertainty` block."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from pdd_plan.architectures import LINE_BASELINE, LOCAL_BASELINE, RELAY_ARCH
from pdd_plan.evaluate import fleet
from pdd_plan.inputs.context import Context
from pdd_plan.inputs.schema.uncertainty import Uncertainty
from pdd_plan.optimize.caps import Caps
from pdd_plan.outputs.plan import Plan
from pdd_plan.outputs.plan_uncertainty import (
    ArchitectureUncertainty,
    DrawRow,
    InputLaw,
    MarginCost,
    PlanUncertainty,
    RobustArchitecture,
    VerifiedDraws,
    Versus,
)
from pdd_plan.outputs.plan_uncertainty import Robust as RobustBlock
from pdd_plan.uncertainty import ahead, paired, replan, replay, robust, sensitivity, sizing, split
from pdd_plan.uncertainty import draws as draws_mod
from pdd_plan.uncertainty.n_minus_1 import at_reach, n_minus_1
from pdd_plan.workload.classes import build_classes
from pdd_plan.workload.requests import RequestClasses


@dataclass(frozen=True)
class Options:
    draws: int | None = None  # None: the scenario's (or the default 32)
    seed: int | None = None
    iid: bool = False  # independent draws instead of the Latin hypercube
    n_minus_1: bool = True
    robust: float | None = None  # plan robust fleets meeting the SLA in this share of draws
    verify_draws: int = 0  # replay this many of the draws in the simulator
    replan: bool = False  # re-plan at the corners of the two strongest inputs
    sim_requests: int = 5000


def settings(ctx: Context, opt: Options) -> tuple[Uncertainty, bool]:
    """The scenario's section (or the default) with the options' overrides; and whether the
    scenario has the section."""
    given = ctx.scenario.uncertainty
    u = given or Uncertainty()
    upd = {}
    if opt.draws is not None:
        upd["draws"] = opt.draws
    if opt.seed is not None:
        upd["seed"] = opt.seed
    # validated again: an override over the DRAWS limit is the same one-line error
    return (Uncertainty.model_validate({**u.model_dump(), **upd}) if upd else u), given is not None


def make_draws(ctx: Context, opt: Options) -> tuple[draws_mod.Draws, list[str], Uncertainty]:
    u, _ = settings(ctx, opt)
    ms, notes = draws_mod.marginals(ctx.scenario.uncertainty, ctx.model, ctx.lines)
    notes = ([ctx.speed_note] if ctx.speed_note else []) + notes  # what the plan stands on
    d = draws_mod.draw(ms, u.draws, u.seed, u.inputs.perf_correlation, iid=opt.iid)
    w = ctx.scenario.workload
    if w.periods is not None or w.periods_from_trace is not None:  # said, not implied
        notes.append(
            "a day scenario: the draws judge each architecture's busiest-period fleet at that "
            "period's rate, not the day's base and elastic schedule"
        )
    return d, notes + draws_mod.floored(d), u


def _law(m: draws_mod.Marginal) -> InputLaw:
    q = [float(f"{m.quantile(x):.4g}") for x in (0.1, 0.5, 0.9)]
    params = {k: float(f"{v:.4g}") for k, v in m.params.items()}
    return InputLaw(name=m.name, kind=m.kind, dist=m.dist, params=params, source=m.source,
                    p10=q[0], p50=q[1], p90=q[2])  # fmt: skip


def _verdict_parts(ev, d, ls, base: str) -> tuple:
    """The verdict's figures against `base` at chosen inputs (the tornado, the median, the
    plan's own inputs, the flips): each the verdict's fleets sized there, nothing else, so
    they may be found before the draws' child has handed over its chains (`_versus`)."""
    gains = sensitivity.Gains(ev, RELAY_ARCH, base)
    search = ev.ctx.scenario.search
    ls = ls + sensitivity.margin_levers({k: getattr(search, k) for k in paired.MARGINS})
    rows = sensitivity.tornado(gains, d, ls)
    med = gains(d.at())
    nominal = gains({})
    margins = [m for m in ls if isinstance(m, sensitivity.MarginLever)]
    at_plan = sensitivity.nominal_margins(gains, margins)
    flip = sensitivity.flip(gains, d, ls, rows) + sensitivity.at_plan(gains, at_plan)
    return rows, med, nominal, at_plan, flip


def _verdicts_ahead(ev, d, ls) -> None:
    """`_verdict_parts` for each baseline, while this process waits on the draws' child with
    no tornado point left to size: the fleets they size are memoized, so `_versus` finds
    them. Only the verdict's sizing runs here (no goodput edge: a chain the child runs
    must reach this process's memo whole, `split.Pending.join`)."""
    for base in (LINE_BASELINE, LOCAL_BASELINE):
        if RELAY_ARCH in ev.fleets and base in ev.fleets:
            _verdict_parts(ev, d, ls, base)


def _versus(ev, d, pr, ls, base: str) -> Versus:
    share, se, ties = paired.beats(pr, RELAY_ARCH, base)
    rows, med, nominal, at_plan, flip = _verdict_parts(ev, d, ls, base)
    i, j = pr.column(RELAY_ARCH), pr.column(base)
    g = paired.gain(pr.planned_bcr[:, i], pr.planned_bcr[:, j])
    # last: the capacity figure finds goodput edges at the median (no verdict reads them)
    cap = sensitivity.Gains(ev, RELAY_ARCH, base, capacity=True)(d.at())
    return Versus(
        baseline=base,
        p_beats=round(share, 4),
        stderr=round(se, 4),
        ties=round(ties, 4),
        gain=paired.band(g),
        median_gain=None if med is None else float(f"{med:.4g}"),
        capacity_gain=paired.band(paired.gain(pr.bcr[:, i], pr.bcr[:, j])),
        capacity_median_gain=None if cap is None else float(f"{cap:.4g}"),
        nominal_gain=None if nominal is None else float(f"{nominal:.4g}"),
        nominal_margins=at_plan,
        flip=flip,
        tornado=rows,
    )


KNEE = 0.95  # a plan's decode at >= 95% of the TPOT target has little room left to slow


def _knee(ctx: Context, plan: Plan, d: draws_mod.Draws) -> list[str]:
    """Plans whose decode runs near the TPOT target: their goodput falls steeply as decode
    slows (the batch that still meets the target shrinks fast when most of a step is time a
    smaller batch does not save), which is why the tornado need not be monotone in perf speed."""
    if "decode_speed" not in d.names:
        return []
    target = ctx.scenario.sla.tpot_ms
    near = [a for a, p in plan.plans.items() if p.tpot_ms.p50 >= KNEE * target]
    if not near:
        return []
    at = ", ".join(f"{a} {plan.plans[a].tpot_ms.p50:.1f} ms" for a in near)
    return [
        f"decode near the {target:g} ms TPOT target ({at}): a slightly slower decode leaves a "
        "much smaller batch within the target, so that fleet's SLA goodput drops steeply below "
        "the model's speed and the tornado is not monotone in perf speed; this is the plan's "
        "real edge, not a search artefact (a TPOT margin or --robust is the remedy)"
    ]


ADMISSION = 0.9  # decode use of its TPOT-target batch from which slot waits show in the tail


def _admission(ev: paired.Evaluator, caps: dict[str, Caps]) -> list[str]:
    """Plans whose decode runs near its TPOT-target batch: a request can wait for a free decode
    slot (admitted when one finishes), which the replay has and the analytic TTFT leaves out.
    Measured (2026-12-07, the default's IDC-PD at the band's median speed after perf v4's
    refit: 6 prefill at 96% busy, decode at 97% of its batch; 1,000,000 requests, `pdd-plan
    simulate tests/golden/pdd-paper.optimize.yaml -a idc_pd -n 1000000`): that wait's P90 0,
    P99 2.00 s; TTFT P90 / P99 3.07 / 5.26 s against the analytic 2.83 / 5.59 s: the prefill
    law's lean at 96% busy covers it at P99, not at P90 (-8%). An earlier plan (7 prefill,
    decode at 97%) read 1.46 s analytic against 2.57 s: where prefill is less busy the
    analytic tail reads low by about that wait."""
    near = {}
    for a, fs in ev.fleets.items():
        ok, _, use = ev.check({}, a, fs, ev.planned[a])
        u = use.get("decode_tpot", 0.0) * caps[a].decode
        if ok and u >= ADMISSION:
            near[a] = u
    if not near:
        return []
    at = ", ".join(f"{a} {u:.0%}" for a, u in near.items())
    return [
        f"decode runs near its TPOT-target batch ({at}): a request can wait for a free decode "
        "slot, which the analytic TTFT leaves out (the default's IDC-PD at 97%, 1M-request "
        "replay: that wait's P99 2.00 s; TTFT P99 5.26 s against the analytic 5.59 s, the "
        "prefill queue's law leaning high there); with a less busy prefill pool the analytic "
        "tail reads low by about that wait"
    ]


def _rows(d: draws_mod.Draws, pr: paired.Paired) -> list[DrawRow]:
    def r(x: float) -> float:
        return float(f"{x:.4g}")

    return [
        DrawRow(
            values={k: r(v) for k, v in d.draw(i).items()},
            goodput_rps={a: r(pr.goodput[i, j]) for j, a in enumerate(pr.archs)},
            bcr={a: r(pr.bcr[i, j]) for j, a in enumerate(pr.archs)},
            planned_bcr={a: r(pr.planned_bcr[i, j]) for j, a in enumerate(pr.archs)},
        )
        for i in range(len(d))
    ]


def _robust_block(
    ctx: Context, plan: Plan, opt: Options, cls: RequestClasses
) -> tuple[Plan, RobustBlock]:
    """The plan with robust fleets in place, and how they were found (independent draws, the
    scenario approach's premise, seeded apart from the assessment's)."""
    q = float(opt.robust)  # type: ignore[arg-type]
    d, _, u = make_draws(ctx, Options(draws=opt.draws, seed=opt.seed, iid=True))
    found = robust.robust_plans(ctx, plan, cls, d, q)
    rows = {}
    for a, r in found.items():
        rc = r.plan.cost_per_hour if r.plan is not None else None
        rows[a] = RobustArchitecture(
            nominal_cost_per_hour=r.nominal_cost_per_hour,
            robust_cost_per_hour=rc,
            cost_of_robustness=None
            if rc is None or r.nominal_cost_per_hour <= 0
            else round(rc / r.nominal_cost_per_hour - 1.0, 4),
            met_share=round(r.met / len(d), 4),
            design_draw=r.design_draw,
            replans=r.steps,
            note=r.why,
        )
    note = None
    if plan.rate_rps is None:
        note = (
            "objective bcr: the rate is each architecture's nominal optimum; the robust fleet "
            "is the cheapest found serving it"
        )
    block = RobustBlock(q=q, draws=len(d), seed=u.seed, method=robust.METHOD, rate_note=note,
                        architectures=rows)  # fmt: skip
    return robust.replace_plans(plan, found), block


def _evaluator(ctx: Context, cls: RequestClasses, fleets: dict, plans: dict, caps: dict):
    """The draws' evaluator of the planned fleets (each plan's rate, under its caps)."""
    if RELAY_ARCH in fleets:  # planned without relay decode, a draw may still add one
        fleets[RELAY_ARCH] = sizing.relay_option(
            fleets[RELAY_ARCH], paired.pb_of(ctx), ctx.relay_dc
        )
    planned = {a: float(p.goodput_rps) for a, p in plans.items()}
    return paired.Evaluator(ctx, cls, fleets, planned, caps)


def head_start(ctx: Context, plans: dict, opt: Options, stop) -> int:
    """`ahead.run` for `plans` as first solved (before their replays: each under the
    scenario's caps, as a plan its first replay passes keeps them), the block's draws; the
    number of draws run. Nothing for robust fleets (the block then assesses other fleets)."""
    if opt.robust is not None or not plans:
        return 0
    cls = build_classes(ctx.class_spec)
    d, _, _ = make_draws(ctx, opt)
    caps = {a: Caps.of(ctx.scenario.search) for a in plans}
    return ahead.run(_evaluator(ctx, cls, fleet.specs(plans), plans, caps), d, stop)


def plan_under_uncertainty(ctx: Context, plan: Plan, opt: Options) -> Plan:
    """The plan (robust fleets in place with `opt.robust`) with its `uncertainty` block."""
    cls = build_classes(ctx.class_spec)
    block = None
    if opt.robust is not None:
        plan, block = _robust_block(ctx, plan, opt, cls)
    u = assess(ctx, plan, opt, cls)
    return plan.model_copy(update={"uncertainty": u.model_copy(update={"robust": block})})


def _verified_draws(
    ctx, cls, plan: Plan, d, pr: paired.Paired, opt: Options
) -> dict[str, VerifiedDraws]:
    """The first `opt.verify_draws` draws replayed per architecture, against the analytic verdict."""
    k = min(opt.verify_draws, len(d))
    out = {}
    for j, a in enumerate(pr.archs):
        sim, partial = [], False
        for i in range(k):
            r = replay.replay(ctx, cls, plan.plans[a], a, d.draw(i), opt.sim_requests, i)
            sim.append(r.sla_met)
            partial = partial or r.partial
        an = [bool(pr.meets[i, j]) for i in range(k)]
        out[a] = VerifiedDraws(
            replays=k,
            sim_requests=opt.sim_requests,
            sim_met_share=round(sum(sim) / k, 4),
            analytic_met_share=round(sum(an) / k, 4),
            agree_share=round(sum(x == y for x, y in zip(sim, an)) / k, 4),
            partial=partial,
        )
    return out


def _counts(fs) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in fs.instances:
        out[g.role] = out.get(g.role, 0) + g.count
    if fs.line is not None:
        out["line"] = fs.line.count
    return out


def margin_costs(ev: paired.Evaluator) -> list[MarginCost]:
    """What each margin the scenario keeps (a value other than its no-margin one) costs each
    plan: its fleet against the cheapest meeting the SLA without it (nominal inputs)."""
    out = []
    search = ev.ctx.scenario.search
    for name, free in sensitivity.NO_MARGIN.items():
        kept = float(getattr(search, name))
        if kept == free:
            continue
        for a, fs in ev.fleets.items():
            if paired.MARGINS[name] == "line" and fs.line is None:
                continue  # a fleet without a line keeps no line margin
            lean = ev.sized({name: free}, a)
            if lean is None:
                continue
            have, need = _counts(fs), _counts(lean)
            more = {k: have.get(k, 0) - need.get(k, 0) for k in have | need}
            more = {k: n for k, n in sorted(more.items()) if n}
            usd = round(fs.cost_per_hour - lean.cost_per_hour, 2)
            what = ", ".join(f"{n:+d} {k}" for k, n in more.items()) or "nothing"
            text = (
                f"{a}: the {kept:.0%} {name.replace('_', ' ')} cap adds {what} "
                f"(${usd:,.1f}/h) over the cheapest fleet meeting the SLA without it"
            )
            out.append(MarginCost(architecture=a, margin=name, value=kept, without=free,
                                  instances=more, cost_per_hour=usd, text=text))  # fmt: skip
    return out


def _reach_notes(arch: str, lost: list[str], n1: dict[str, float], caps: Caps | None) -> list[str]:
    c = caps or Caps()  # None: evaluate's caps, the laws' reach
    return [
        f"N-1 {arch} without one {k.replace('_', ' ')}: {n1[k]:.3g} req/s, where the laws' "
        f"reach stops it (prefill queue {c.prefill:.0%}, line {c.line:.0%}), not the SLA: "
        "only a replay can say it serves more"
        for k in lost
    ]


def plan_caps(ctx: Context, plan: Plan) -> dict[str, Caps]:
    """The caps each plan answers under: those its verification ended with (the replay's
    tightening included), else the scenario's; the draws, the tornado and N-1 check each fleet
    under them, so they ask the question the plan answered."""
    out = {}
    for a, p in plan.plans.items():
        rounds = [r for r in (p.simulated.rounds if p.simulated else []) if r.sla_met is not None]
        c = rounds[-1].caps.model_dump() if rounds else {}
        out[a] = Caps(**c) if c else Caps.of(ctx.scenario.search)
    return out


def assess(
    ctx: Context, plan: Plan, opt: Options | None = None, classes: RequestClasses | None = None
) -> PlanUncertainty:
    """The plan's `uncertainty` block (see the module doc)."""
    opt = opt or Options()
    cls = classes or build_classes(ctx.class_spec)
    d, notes, u = make_draws(ctx, opt)
    caps = plan_caps(ctx, plan)
    ev = _evaluator(ctx, cls, fleet.from_plan(ctx, plan, "plan"), plan.plans, caps)
    fleets, planned = ev.fleets, ev.planned
    ahead.adopt(ev, d)  # the line fleets' first chains, where the planner's wait ran them
    ls = sensitivity.levers(d, u.inputs.perf_correlation)
    # the line fleets' goodput chains here, every draw's sizing in a child (the same bits)
    points = split.tornado_points(d, ls, ctx.scenario.search) if RELAY_ARCH in fleets else []
    n1 = {}
    ahead_of_join = functools.partial(_verdicts_ahead, ev, d, ls)
    with split.shared(ev, d, planned, points, ahead_of_join):  # N-1 meanwhile
        for a in fleets if opt.n_minus_1 else ():
            k = ev.key(a)
            if k not in n1:  # equal fleets (PDD as CDC-PD) lose the same
                # the SLA alone, as evaluate measures a fleet: a kept planning margin is priced
                # apart (margin_costs); where a law's reach stops it instead, a note says so
                c = ev.caps_of(a, dict(sensitivity.NO_MARGIN))
                n1[k] = n_minus_1(ctx, cls, fleets[a], c)
                notes += _reach_notes(a, at_reach(ctx, cls, fleets[a], c, n1[k]), n1[k], c)
    pr = paired.evaluate(ev, d, planned)
    archs = {}
    for j, a in enumerate(pr.archs):
        k = ev.key(a)
        archs[a] = ArchitectureUncertainty(
            goodput_rps=paired.band(pr.goodput[:, j]),
            bcr=paired.band(pr.bcr[:, j]),
            cost_per_hour=paired.band(pr.cost[:, j]),
            planned_cost_per_hour=paired.band(pr.planned_cost[:, j]),
            meets_sla_share=round(float(np.mean(pr.meets[:, j])), 4),
            n_minus_1=n1.get(k, {}),
        )
    comps = {}
    if RELAY_ARCH in fleets:
        for base in (LINE_BASELINE, LOCAL_BASELINE):
            if base in fleets:
                comps[base] = _versus(ev, d, pr, ls, base)
    if "rate" in d.names:
        notes.append("the request rate moves whether a plan meets the SLA, not its BCR at goodput")
    notes += _knee(ctx, plan, d) + _admission(ev, caps)
    return PlanUncertainty(
        draws=len(d),
        seed=u.seed,
        method=f"{d.method}; each fleet's SLA goodput by evaluate's analytic check, to 1%",
        inputs=[_law(m) for m in d.marginals],
        notes=notes,
        architectures=archs,
        comparisons=comps,
        break_even=sensitivity.line_break_even(ev, d, RELAY_ARCH, LOCAL_BASELINE),
        confirmed=_verified_draws(ctx, cls, plan, d, pr, opt) if opt.verify_draws > 0 else {},
        plan_flips=replan.plan_flips(ctx, cls, plan, d, replan.strongest(comps, ls))
        if opt.replan and ls
        else None,
        margin_costs=margin_costs(ev),
        per_draw=_rows(d, pr),
    )
