"""Robust plans: per architecture the cheapest fleet found that meets the SLA at its planned
rate in at least a share Q of N independent draws (a sampled chance constraint).

Method (docs/model.md, "Robust plans"). The draws are ranked by how hard they are on the
nominal fleet (its rate bound under the draw over the rate it must carry there). Planning at
a draw means the fixed-rate minimum-cost search (optimize.search.plan) on the models under
that draw; when every input moves the fleet one way (faster GPUs, fewer bytes, a faster line
never hurt), the fleet planned at the draw ranked ceil(Q N)-th meets every milder draw, and no
cheaper fleet can meet that draw: that is the chance-constrained optimum over the sample. With
several inputs the ranking is not an order of every fleet, so the fleet is then checked
against all N draws and, while it meets m < ceil(Q N), planned ceil(Q N) - m draws further
along the ranking (at most MAX_STEPS; a draw at which no plan exists ends the search: the harder ones have none
either). Prefill and decode speeds that differ in a draw are planned at the slower
of the two (the check uses both).

At a fixed rate this is the robust minimum-cost plan. With the rate free (objective `bcr`) the
rate is each architecture's nominal optimum, and the robust fleet is planned at it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdd_plan.common.errors import InfeasibleError
from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import Context
from pdd_plan.optimize import summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.outputs.plan import ArchitecturePlan, Comparison, LineChoice, Plan
from pdd_plan.uncertainty import paired, perturb
from pdd_plan.uncertainty.draws import Draws
from pdd_plan.workload.requests import RequestClasses

MAX_STEPS = 4  # re-plans at harder draws when the first design draw misses the share
METHOD = (
    "sampled chance constraint over independent draws: the fixed-rate minimum-cost plan at the "
    "draw ranked ceil(Q N)-th hardest for the nominal fleet, checked on every draw, re-planned "
    "as many draws further on as it falls short (docs/model.md, Robust plans)"
)


@dataclass(frozen=True)
class Robust:
    """One architecture's robust plan (None: no fleet meets the share) and what it cost."""

    plan: ArchitecturePlan | None
    raw: SolverResult | None
    nominal_cost_per_hour: float
    met: int  # draws whose SLA the robust fleet meets at the planned rate
    design_draw: int | None  # the draw it was planned at
    steps: int
    why: str | None = None


def meets(ap: perturb.Applied, fs: fleet.FleetSpec, rate: float) -> bool:
    """Whether the fleet meets the SLA at `rate` under the draw (evaluate's analytic check)."""
    fm = perturb.fleet_model(ap, fs)
    if fm.n_prefill == 0 or not fm.md:
        return False
    return analytic.at_rate(fm, rate).ok


def _design(ctx: Context, cls: RequestClasses, values: dict[str, float]) -> perturb.Applied:
    """The models a plan is made under at a draw: one speed for both roles (the slower)."""
    v = dict(values)
    if "prefill_speed" in v or "decode_speed" in v:
        k = min(v.get("prefill_speed", 1.0), v.get("decode_speed", 1.0))
        v["prefill_speed"] = v["decode_speed"] = k
    return perturb.apply(paired.pb_of(ctx), cls, v)


def _nominal_lines(p: ArchitecturePlan, ctx: Context) -> ArchitecturePlan:
    """The plan's line as the nominal SKU states it (the draw's line carried scaled rates)."""
    if p.line is None:
        return p
    sku = next(s for s in ctx.lines if s.name == p.line.sku)
    line = LineChoice.model_validate({**p.line.model_dump(), "gbps": sku.gbps * p.line.count})
    return p.model_copy(update={"line": line})


def _order(n: int) -> list[int]:
    """0..n-1 in bisection order (middle, then quarters, ...): checked in this order along a
    ranking, dominance settles most of the rest (see _count_met)."""
    out, seen, spans = [], set(), [(0, n - 1)]
    while spans:
        a, b = spans.pop(0)
        if a > b:
            continue
        m = (a + b) // 2
        if m not in seen:
            seen.add(m)
            out.append(m)
        spans += [(a, m - 1), (m + 1, b)]
    return out


def _count_met(ctx, cls, fs, draws: Draws, rate: float, rank: np.ndarray | None = None) -> int:
    """How many draws the fleet meets at the planned rate (x each draw's rate factor). A draw
    that dominates one met (every goodput input as favourable, a rate no higher) is met, one
    dominated by a draw missed is missed (paired.dominates); the rest are checked along the
    ranking in bisection order, so ordered draws (one input) cost about log2 N checks."""
    pb = paired.pb_of(ctx)
    n = len(draws)
    idx = list(range(n)) if rank is None else [int(i) for i in rank]
    met: list[tuple[dict, float]] = []
    missed: list[tuple[dict, float]] = []
    count = 0
    for pos in _order(n):
        v = draws.draw(idx[pos])
        need = rate * v.get("rate", 1.0)
        x = {k: val for k, val in v.items() if k in paired.MOVES_GOODPUT}
        if any(r >= need and paired.dominates(x, y) for y, r in met):
            ok = True
        elif any(r <= need and paired.dominates(y, x) for y, r in missed):
            ok = False
        else:
            ok = meets(perturb.apply(pb, cls, v), fs, need)
        (met if ok else missed).append((x, need))
        count += ok
    return count


def _severity(ctx: Context, cls: RequestClasses, fs: fleet.FleetSpec, draws: Draws,
              rate: float) -> np.ndarray:  # fmt: skip
    """Per draw: how much the nominal fleet could carry under it (its rate bound: prefill,
    line and decode at their caps) over the rate it must carry there; low: hard. The bound,
    not the SLA goodput, because only the order is used: it is the same order wherever the
    draws are ordered (one input, or inputs moving every fleet one way), and it costs no
    SLA check (a fleet model per draw)."""
    pb = paired.pb_of(ctx)
    out = np.zeros(len(draws))
    for i in range(len(draws)):
        v = draws.draw(i)
        fm = perturb.fleet_model(perturb.apply(pb, cls, v), fs)
        cap = analytic.rate_bound(fm) if fm.n_prefill and fm.md else 0.0
        out[i] = cap / (rate * v.get("rate", 1.0))
    return out


def robust_one(
    ctx: Context,
    cls: RequestClasses,
    arch: str,
    nominal: ArchitecturePlan,
    fs: fleet.FleetSpec,
    draws: Draws,
    q: float,
) -> Robust:
    """The robust plan of one architecture at its nominal plan's rate (see the module doc);
    `fs` is the nominal fleet. A fleet that meets m < ceil(QN) draws is re-planned that many
    draws further along the ranking (the shortfall), not one by one."""
    rate = float(nominal.goodput_rps)
    n = len(draws)
    need = math.ceil(q * n - 1e-9)
    sev = _severity(ctx, cls, fs, draws, rate)
    order = np.argsort(-sev, kind="stable")  # mildest first
    met0 = _count_met(ctx, cls, fs, draws, rate, order)
    if met0 >= need:
        return Robust(nominal, None, nominal.cost_per_hour, met0, None, 0)
    caps = Caps.of(ctx.scenario.search)
    last_why = None
    pos, tried = need - 1, 0
    for step in range(MAX_STEPS):
        if pos >= n:
            last_why = f"the {tried} fleets planned up to the hardest draw fall short of it"
            break
        tried += 1
        j = int(order[pos])
        v = draws.draw(j)
        ap = _design(ctx, cls, v)
        try:
            raw = plan_architecture(ap.prefill, arch, ap.classes, rate * v.get("rate", 1.0), caps)
        except InfeasibleError as e:
            # the next draws are harder still: no plan there either
            last_why = str(e)
            break
        p = summary.summarize(raw, ap.classes, raw.rate, ap.prefill.sites.prefill)
        p = _nominal_lines(p, ctx)
        plan_fs = fleet.from_plan(ctx, _one(ctx, arch, p), "robust plan")[arch]
        met = _count_met(ctx, cls, plan_fs, draws, rate, order)
        if met >= need:
            cost = p.cost_per_hour
            bcr = summary.bcr(nominal.goodput_rps, cost)
            p = p.model_copy(update={"goodput_rps": nominal.goodput_rps, "bcr": round(bcr, 4)})
            return Robust(p, raw, nominal.cost_per_hour, met, j, step + 1)
        pos += need - met
    why = last_why or f"no fleet planned at {MAX_STEPS} draws past the share meets it"
    return Robust(None, None, nominal.cost_per_hour, met0, None, tried, why)


def _one(ctx: Context, arch: str, p: ArchitecturePlan) -> Plan:
    """A one-architecture plan around `p` (fleet.from_plan reads plans)."""
    sc = ctx.scenario
    return Plan(scenario=sc.name, model=ctx.model.name, rate_rps=p.goodput_rps,
                objective=sc.objective, sla=sc.sla, classes=1, inputs=sc, plans={arch: p},
                comparison=summary.comparison({arch: p}, {}))  # fmt: skip


def robust_plans(
    ctx: Context, plan: Plan, cls: RequestClasses, draws: Draws, q: float
) -> dict[str, Robust]:
    fleets = fleet.from_plan(ctx, plan, "plan")
    return {a: robust_one(ctx, cls, a, p, fleets[a], draws, q) for a, p in plan.plans.items()}


def replace_plans(plan: Plan, robust: dict[str, Robust]) -> Plan:
    """The plan with each architecture's robust fleet in place of the nominal one (and the BCR
    comparison over them; the TTFT figures at a design draw are not the nominal's, so the
    same-fleet TTFT comparison is left out); an architecture with no robust fleet keeps the
    nominal."""
    plans = {a: (r.plan if r.plan is not None else plan.plans[a]) for a, r in robust.items()}
    comp = Comparison.model_validate(summary.comparison(plans, {}))
    return plan.model_copy(update={"plans": plans, "comparison": comp})
