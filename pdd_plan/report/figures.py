"""The report's plots: what each shows and where its data come from, as PNG bytes.

* TTFT CDF per architecture: each architecture's plan replayed by the simulator
  (``sim.run.run``) on ``n_requests`` requests of the plan's workload at the plan's rate, with
  the scenario's seed; the optimizer's analytic P50/P90/P99 as markers.
* Prefix-hit histogram: the prefill-side hit rates of the replayed requests (sampled from the
  scenario's ``prefix_hit`` distribution, or read from its trace).
* Bathtub: ``workload.bathtub`` on the PDD plan's prefill instance (else the first
  architecture's) at the median input length of the replay and the scenario's prefill chunk;
  cached tokens billed at 0.1 of uncached ones.
* Cost breakdown: $/h per role and the line, per architecture (the typed plan).
* Line utilization: analytic (plan) vs simulated (the plan's verification replay when it has
  one, else the replay above), per architecture.
* TTFT percentiles: analytic vs simulated (same simulated source as line utilization).
* Where PDD pays: a 5 x 5 regime map (``regimes.grid.regime_map``, without verification)
  around the plan's own line capacity and rate (``regimes.around``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.architectures import RELAY_ARCH
from pdd_plan.inputs.schema.plan import Plan
from pdd_plan.report import plots
from pdd_plan.report.sections import cost_breakdown

HIT_PRICE_RATIO = 0.1


@dataclass
class Figure:
    key: str
    title: str
    caption: str
    png: bytes


def _prefill_instance(plan: Plan, ctx):
    from pdd_plan.sim.setup import row_instance

    plans = plan.plans
    a = RELAY_ARCH if RELAY_ARCH in plans else next(iter(plans))
    row = plans[a].groups("prefill")[0]
    inst = row_instance(ctx, row)
    return a, inst


def replays(plan: Plan, ctx, n_requests: int, seed: int | None = None) -> dict:
    """{arch: SimResult} for every architecture of the plan."""
    from pdd_plan.sim.run import run

    return {a: run(ctx, plan, a, n_requests, seed) for a in plan.plans}


def regime_figure(plan: Plan, ctx, executor: str = "process") -> Figure | None:
    """The 5 x 5 map around the plan's point (None when the scenario has no line to vary)."""
    from pdd_plan.sweep.regimes.around import axes_around, centre
    from pdd_plan.sweep.regimes.grid import regime_map
    from pdd_plan.sweep.regimes.plot import regime_png

    sc = ctx.scenario
    at = centre(plan, [ln.gbps for ln in ctx.lines], sc.link.max_lines if sc.link else 1)
    if at is None:
        return None
    x, y = axes_around(*at)
    data = sc.model_dump(mode="json")
    res = regime_map(data, ctx.file, x, y, verify=False, executor=executor)
    c = res["counts"]
    return Figure(
        "regimes",
        "Where PDD pays: a small regime map",
        f"A 5x5 map around this scenario's own point ({at[0]:g} Gb/s of line, {at[1]:g} req/s), "
        "each cell optimized for all three architectures without verification (analytic, as "
        "`pdd-plan regimes --no-verify`; not replayed in the simulator). The line axis is one "
        "line of that capacity priced by interpolating the bundled line prices, so the centre "
        "cell need not equal the plan above. Hatched: PDD has no plan. Cells: "
        f"{c['relay_pays']} relay pays, {c['pdd_only']} only PDD has a plan, {c['same']} same "
        f"BCR as CDC-PD, {c['no_pdd']} no PDD plan. `pdd-plan regimes` draws larger maps.",
        regime_png(res, dpi=80),
    )


def build_figures(
    plan: Plan, ctx, n_requests: int = 3000, seed: int | None = None, regimes: bool = True
) -> list[Figure]:
    plans = plan.plans
    sla = plan.sla.model_dump()
    sims = replays(plan, ctx, n_requests, seed)
    s = ctx.scenario.seed if seed is None else seed
    first = next(iter(sims.values()))
    src = (
        "sampled from the scenario's distributions"
        if first.source == "distribution"
        else f"trace {first.source}"
    )
    figs: list[Figure] = []
    note = (
        f"simulator replay: {n_requests:,} requests per architecture, {src}, seed {s}; "
        "circles: analytic percentiles"
    )
    figs.append(
        Figure(
            "ttft_cdf",
            "TTFT CDF per architecture",
            f"Simulated TTFT distribution of each architecture's plan ({note}). Dotted/dashed "
            "lines: the SLA's P90 and P99 targets.",
            plots.ttft_cdf_png(
                {a: r.ttft_s for a, r in sims.items()},
                {a: plans[a].ttft_s.model_dump() for a in plans},
                sla,
                note,
            ),
        )
    )
    figs.append(
        Figure(
            "prefix_hit",
            "Prefix-hit histogram",
            f"Prefill-side prefix hit rate of the {len(first.hit_p):,} replayed requests ({src}).",
            plots.hit_hist_png(first.hit_p, f"prefill-side hit rates, {src}"),
        )
    )
    a, inst = _prefill_instance(plan, ctx)
    from pdd_plan.perf.bathtub import bathtub

    L = int(max(1, round(float(np.median(first.input_tokens)))))
    chunk = ctx.scenario.search.prefill_chunk_tokens
    res = bathtub(inst, L, chunk, HIT_PRICE_RATIO)
    res = {
        "model": ctx.model.name,
        "gpu": inst.gpu.name,
        "instance": inst.label,
        "input_tokens": L,
        "chunk": chunk,
        "hit_price_ratio": HIT_PRICE_RATIO,
        **res,
    }
    v = res["valley"]
    figs.append(
        Figure(
            "bathtub",
            "Bathtub on the prefill instance",
            f"Uncached-token throughput and revenue against prefix hit rate on the {a} plan's "
            f"prefill instance ({inst.label}), {L:,}-token inputs (median of the replay), chunk "
            f"{chunk}, cached tokens billed at x{HIT_PRICE_RATIO:g}. Valley at "
            f"{v['hit_rate'] * 100:.0f}% hit, {v['revenue_drop'] * 100:.1f}% below hit rate 0.",
            plots.bathtub_png(res),
        )
    )
    figs.append(
        Figure(
            "cost",
            "Cost breakdown",
            "Dollars per hour of each architecture's plan, by role and the leased line.",
            plots.cost_png({a: cost_breakdown(p) for a, p in plans.items()}),
        )
    )
    have_sim = all(p.simulated for p in plans.values())
    util = {}
    pct = {}
    for arch, p in plans.items():
        ln = p.line
        if have_sim:
            su = p.simulated.line_utilization
            st = p.simulated.ttft_s.model_dump()
        else:
            summ = sims[arch].summary()
            su, st = summ.get("line_utilization"), summ.get("ttft_s")
        util[arch] = (ln.utilization, su) if ln else (None, None)
        pct[arch] = (p.ttft_s.model_dump(), st)
    sim_label = "simulated (plan's verification)" if have_sim else "simulated (report replay)"
    figs.append(
        Figure(
            "line_utilization",
            "Line utilization",
            "Share of the leased line's capacity in use: the optimizer's analytic figure vs the "
            f"{sim_label}. IDC-PD has no line.",
            plots.line_util_png(util, sim_label),
        )
    )
    figs.append(
        Figure(
            "ttft_percentiles",
            "TTFT percentiles",
            f"Analytic vs {sim_label} TTFT P50/P90/P99 per architecture.",
            plots.ttft_percentiles_png(pct, sla),
        )
    )
    fig = regime_figure(plan, ctx) if regimes else None
    if fig is not None:
        figs.append(fig)
    return figs
