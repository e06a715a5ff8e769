"""What `report --html/--plots` shows, computed before anything is drawn: each architecture's
plan replayed by the simulator, the bathtub of the prefill instance, and the small regime map
around the plan's point. :func:`pdd_plan.report.figures.build_figures` only renders it.

* Replays: the plan's own verification replay, run again (``sim.run.verify_replay`` with the
  length and seed the plan states) and kept only where it gives the plan's figures back, so the
  CDF, the percentile bars and the tables are one replay; else (a plan made with --no-verify,
  a day's plan, or a plan from another version) ``sim.run.run`` on ``n_requests`` requests of
  the plan's workload at the plan's rate, with the scenario's seed (or ``seed``), and the page
  says so.
* Bathtub: ``perf.bathtub`` on the PDD plan's prefill instance (else the first
  architecture's) at the median input length of the replay and the scenario's prefill chunk;
  cached tokens billed at :data:`HIT_PRICE_RATIO` of uncached ones.
* Regime map: 5 x 5 cells (``sweep.regimes.grid.regime_map``, without verification) around
  the plan's own line capacity and rate (``sweep.regimes.around``).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from pdd_plan.architectures import RELAY_ARCH
from pdd_plan.cli.progress import Stages
from pdd_plan.inputs.context import Context
from pdd_plan.outputs.plan import Plan, Simulated
from pdd_plan.perf.bathtub import bathtub
from pdd_plan.report.figures import FigureData, RegimeData, Replayed
from pdd_plan.sim.result import SimResult
from pdd_plan.sim.run import composed_ttft, recomposed, run, verify_replay
from pdd_plan.sim.setup import row_instance
from pdd_plan.sim.verdict import Verdict
from pdd_plan.sweep.regimes.around import axes_around, centre
from pdd_plan.sweep.regimes.grid import regime_map

HIT_PRICE_RATIO = 0.1


def replays(
    plan: Plan, ctx: Context, n_requests: int, seed: int | None = None, tick=None
) -> dict[str, SimResult]:
    """{arch: SimResult} for every architecture of the plan: the report's own replays."""
    out = {}
    for a in plan.plans:
        out[a] = run(ctx, plan, a, n_requests, seed)
        if tick is not None:
            tick()
    return out


def _same(v: Verdict, sim: Simulated) -> bool:
    """Whether a replay's figures are the plan's (stored to 6 significant figures)."""
    if v.figures is None:  # not replayed
        return False
    for k in ("ttft_s", "tpot_ms"):
        for q in ("p50", "p90", "p99"):
            a, b = v.figures[k][q], getattr(getattr(sim, k), q)
            if a is None or b is None or abs(a - b) > 1e-5 * max(abs(b), 1e-9):
                return False
    return True


def verification_replays(plan: Plan, ctx: Context, tick=None) -> dict[str, Replayed] | None:
    """Each architecture's verification replay run again, or None when the plan states none
    for some architecture or one does not give the plan's figures back. Where the plan's
    TTFT figures compose a prefill stage (`sim.tails`), so do these: the same stage, and the
    CDF an even sample of the composed law (`sim.run.composed_ttft`)."""
    if plan.day is not None or not plan.plans:
        return None
    out = {}
    rs, seed = ctx.replay_setup, ctx.scenario.seed
    for a, p in plan.plans.items():
        sim = p.simulated
        if sim is None:
            return None
        n = sim.early_stop.full_length if sim.early_stop is not None else sim.requests
        v, res = verify_replay(rs, plan, a, n, seed)
        ttft = res.ttft_s[res.kept()]
        stage = int((sim.tails or {}).get("prefill_stage_requests", 0))
        if stage:
            v = recomposed(rs, plan, a, (v, res), n, seed, stage)
            got = composed_ttft(rs, plan, a, res, n, seed, stage)
            if got is None:
                return None
            ttft = got
        if not _same(v, sim):
            return None
        figs = v.figures or {}  # (replayed: _same found its figures)
        out[a] = Replayed(ttft, figs.get("line_utilization"), figs["ttft_s"], res, stage)
        if tick is not None:
            tick()
    return out


def _own_replays(plan: Plan, ctx: Context, n_requests: int, seed, tick) -> dict[str, Replayed]:
    out = {}
    for a, r in replays(plan, ctx, n_requests, seed, tick).items():
        summ = r.summary()
        out[a] = Replayed(r.ttft_s[r.kept()], summ.get("line_utilization"), summ.get("ttft_s"), r)
    return out


def regime_data(
    plan: Plan, ctx: Context, executor: str = "process", progress=None
) -> RegimeData | None:
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
    kw = {} if progress is None else {"progress": progress}  # (test doubles memoize on kw)
    return RegimeData(at, regime_map(data, ctx.file, x, y, verify=False, executor=executor, **kw))


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
    plan: Plan,
    ctx: Context,
    n_requests: int = 3000,
    seed: int | None = None,
    regimes: bool = True,
    bar: Stages | None = None,
) -> FigureData:
    """Everything the report's figures show, for ``plan`` under its scenario ``ctx``; ``bar``
    (a progress bar) is told each replay and cell as it is done."""
    bar = bar or Stages("report", False)
    bar.stage("replays", len(plan.plans))
    shown = None if seed is not None else verification_replays(plan, ctx, bar.advance)
    verified = shown is not None
    if shown is None:
        bar.stage("replays", len(plan.plans))
        shown = _own_replays(plan, ctx, n_requests, seed, bar.advance)
    first = cast(SimResult, next(iter(shown.values())).result)
    bar.stage("bathtub", 1)
    arch, tub = bathtub_data(plan, ctx, first)
    bar.advance()
    return FigureData(
        n_requests=n_requests,
        seed=ctx.scenario.seed if seed is None else seed,
        source=first.source,
        replays=shown,
        hit_p=first.hit_p[first.kept()],
        bathtub_arch=arch,
        bathtub=tub,
        regimes=regime_data(plan, ctx, progress=_cells(bar)) if regimes else None,
        verification=verified,
    )


def _cells(bar: Stages):
    """The regime map's progress (cells done of all) on the bar; None without a bar."""
    if not bar.enabled:
        return None

    def done(n: int, total: int) -> None:
        bar.count("regime map cells", n, total)

    return done
