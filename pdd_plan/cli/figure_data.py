"""What `report --html/--plots` shows, computed before anything is drawn: each architecture's
plan replayed by the simulator, the bathtub of the prefill instance, and the small regime map
around the plan's point. :func:`pdd_plan.report.figures.build_figures` only renders it.

* Replays: ``sim.run.run`` on ``n_requests`` requests of the plan's workload at the plan's
  rate, with the scenario's seed (or ``seed``).
* Bathtub: ``perf.bathtub`` on the PDD plan's prefill instance (else the first
  architecture's) at the median input length of the replay and the scenario's prefill chunk;
  cached tokens billed at :data:`HIT_PRICE_RATIO` of uncached ones.
* Regime map: 5 x 5 cells (``sweep.regimes.grid.regime_map``, without verification) around
  the plan's own line capacity and rate (``sweep.regimes.around``).
"""

from __future__ import annotations

import numpy as np

from pdd_plan.architectures import RELAY_ARCH
from pdd_plan.inputs.context import Context
from pdd_plan.inputs.schema.plan import Plan
from pdd_plan.perf.bathtub import bathtub
from pdd_plan.report.figures import FigureData, RegimeData, Replayed
from pdd_plan.sim.result import SimResult
from pdd_plan.sim.run import run
from pdd_plan.sim.setup import row_instance
from pdd_plan.sweep.regimes.around import axes_around, centre
from pdd_plan.sweep.regimes.grid import regime_map

HIT_PRICE_RATIO = 0.1


def replays(plan: Plan, ctx: Context, n_requests: int, seed: int | None = None) -> dict:
    """{arch: SimResult} for every architecture of the plan."""
    return {a: run(ctx, plan, a, n_requests, seed) for a in plan.plans}


def regime_data(plan: Plan, ctx: Context, executor: str = "process") -> RegimeData | None:
    """The 5 x 5 map around the plan's point (None when the scenario has no line to vary, or
    plans a day: a cell is one rate, the day has many)."""
    sc = ctx.scenario
    if plan.day is not None:
        return None
    at = centre(plan, [ln.gbps for ln in ctx.lines], sc.link.max_lines if sc.link else 1)
    if at is None:
        return None
    x, y = axes_around(*at)
    data = sc.model_dump(mode="json")
    return RegimeData(at, regime_map(data, ctx.file, x, y, verify=False, executor=executor))


def bathtub_data(plan: Plan, ctx: Context, first: SimResult) -> tuple[str, dict]:
    """(architecture, the bathtub with its inputs) on that architecture's prefill instance."""
    plans = plan.plans
    a = RELAY_ARCH if RELAY_ARCH in plans else next(iter(plans))
    inst = row_instance(ctx.profiles, plans[a].groups("prefill")[0])
    length = int(max(1, round(float(np.median(first.input_tokens)))))
    chunk = ctx.scenario.search.prefill_chunk_tokens
    res = bathtub(inst, length, chunk, HIT_PRICE_RATIO)
    return a, {
        "model": ctx.model.name,
        "gpu": inst.gpu.name,
        "instance": inst.label,
        "input_tokens": length,
        "chunk": chunk,
        "hit_price_ratio": HIT_PRICE_RATIO,
        **res,
    }


def figure_data(
    plan: Plan, ctx: Context, n_requests: int = 3000, seed: int | None = None, regimes: bool = True
) -> FigureData:
    """Everything the report's figures show, for ``plan`` under its scenario ``ctx``."""
    sims = replays(plan, ctx, n_requests, seed)
    first = next(iter(sims.values()))
    shown = {}
    for a, r in sims.items():
        summ = r.summary()
        shown[a] = Replayed(r.ttft_s, summ.get("line_utilization"), summ.get("ttft_s"))
    arch, tub = bathtub_data(plan, ctx, first)
    return FigureData(
        n_requests=n_requests,
        seed=ctx.scenario.seed if seed is None else seed,
        source=first.source,
        replays=shown,
        hit_p=first.hit_p,
        bathtub_arch=arch,
        bathtub=tub,
        regimes=regime_data(plan, ctx) if regimes else None,
    )
