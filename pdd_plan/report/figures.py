"""The report's plots, as PNG bytes: what each shows, from data computed before it is drawn
(:class:`FigureData`; ``pdd_plan.cli.figure_data`` replays the plans, takes the bathtub and
runs the regime map). Rendering computes nothing.

* TTFT CDF per architecture: each architecture's plan replayed by the simulator; the
  optimizer's analytic P50/P90/P99 as markers.
* Prefix-hit histogram: the prefill-side hit rates of the replayed requests (sampled from the
  scenario's ``prefix_hit`` distribution, or read from its trace).
* Bathtub: on the PDD plan's prefill instance (else the first architecture's) at the median
  input length of the replay.
* Cost breakdown: $/h per role and the line, per architecture (the typed plan).
* Line utilization: analytic (plan) vs simulated (the CDF's replay), per architecture.
* TTFT percentiles: analytic vs simulated (the CDF's replay).
* Where PDD pays: a 5 x 5 regime map around the plan's own line capacity and rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.outputs.plan import Plan
from pdd_plan.report import plots
from pdd_plan.report.sections import cost_breakdown
from pdd_plan.sweep.regimes.plot import regime_png


@dataclass
class Figure:
    key: str
    title: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class Replayed:
    """One architecture's replay as the figures read it: the TTFT (s) of each request past
    its warm-up, and the replay's line utilization and TTFT percentiles (its summary)."""

    ttft_s: np.ndarray
    line_utilization: float | None
    ttft_pct: dict | None
    result: object = None  # the replay itself (sim.result.SimResult), for the bathtub's input
    # > 0: the TTFT composes the prefill stage replayed over this many requests (sim.tails),
    # `ttft_s` an even sample of the composed law, not the replay's own requests
    stage_requests: int = 0


@dataclass(frozen=True)
class RegimeData:
    """The regime map around the plan: its centre (line Gb/s, req/s) and the map's answer."""

    at: tuple[float, float]
    result: dict


@dataclass(frozen=True)
class FigureData:
    """What the figures show besides the plan itself."""

    n_requests: int  # replayed per architecture
    seed: int
    source: str  # "distribution", or the trace the requests came from
    replays: dict[str, Replayed]
    hit_p: np.ndarray  # prefill-side hit rate of each replayed request (the first replay's)
    bathtub_arch: str  # whose prefill instance the bathtub is taken on
    bathtub: dict  # perf.bathtub's answer with its inputs (model, gpu, instance, length, ...)
    regimes: RegimeData | None  # None: not asked for, or no line to vary
    verification: bool = False  # the replays are the plan's verification replays, run again

    def replay_text(self) -> str:
        """Which replay every simulated figure on the page is drawn from."""
        src = (
            "sampled from the scenario's distributions"
            if self.source == "distribution"
            else f"trace {self.source}"
        )
        kept = ", ".join(f"{a} {_kept(r):,}" for a, r in self.replays.items())
        if self.verification:
            stages = {r.stage_requests for r in self.replays.values() if r.stage_requests}
            composed = (
                f"; each TTFT composed with the prefill stage replayed alone over "
                f"{', '.join(f'{n:,}' for n in sorted(stages))} requests, as the plan states it"
                if stages
                else ""
            )
            return (
                f"the plan's verification replay of each architecture, run again ({src}, seed "
                f"{self.seed}; requests past the warm-up: {kept}{composed})"
            )
        return (
            f"the report replay, {self.n_requests:,} requests per architecture ({src}, seed "
            f"{self.seed}; past the warm-up: {kept}), not the plan's: the plan states no "
            "verification replay that gives its figures back (made with --no-verify, a day's "
            "plan, or by another version)"
        )


def _kept(r: Replayed) -> int:
    """Requests past the replay's warm-up (a composed law's sample is not requests)."""
    res = r.result
    if r.stage_requests and res is not None:
        return len(res.ttft_s[res.kept()])  # type: ignore[attr-defined]
    return len(r.ttft_s)


def regime_figure(data: RegimeData) -> Figure:
    """The 5 x 5 map around the plan's point."""
    at, c = data.at, data.result["counts"]
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
        regime_png(data.result, dpi=110),
    )


def build_figures(plan: Plan, data: FigureData) -> list[Figure]:
    """The report's figures of ``plan``, drawn from ``data`` (computed beforehand)."""
    plans = plan.plans
    sla = plan.sla.model_dump()
    src = (
        "sampled from the scenario's distributions"
        if data.source == "distribution"
        else f"trace {data.source}"
    )
    note = f"simulated: {data.replay_text()}; open markers: analytic P50/P90/P99"
    figs = [
        Figure(
            "ttft_cdf",
            "TTFT CDF per architecture",
            f"Simulated TTFT distribution of each architecture's plan ({note}). Dotted/dashed "
            "lines: the SLA's P90 and P99 targets.",
            plots.ttft_cdf_png(
                {a: r.ttft_s for a, r in data.replays.items()},
                {a: plans[a].ttft_s.model_dump() for a in plans},
                sla,
                "simulated: the plan's verification replay"
                if data.verification
                else f"simulated: the report replay, {data.n_requests:,} requests each",
            ),
        ),
        Figure(
            "prefix_hit",
            "Prefix-hit histogram",
            f"Prefill-side prefix hit rate of the {len(data.hit_p):,} replayed requests ({src}).",
            plots.hit_hist_png(data.hit_p, f"prefill-side hit rates, {src}"),
        ),
        _bathtub_figure(data),
        Figure(
            "cost",
            "Cost breakdown",
            "Dollars per hour of each architecture's plan, by role and the leased line.",
            plots.cost_png({a: cost_breakdown(p) for a, p in plans.items()}),
        ),
        *_simulated_figures(plan, data, sla),
    ]
    if plan.day is not None:
        figs.append(day_figure(plan))
    if data.regimes is not None:
        figs.append(regime_figure(data.regimes))
    return figs


def day_figure(plan: Plan) -> Figure:
    """Instances per role over the day (the plan's `day` block), base and elastic together."""
    day = plan.day
    assert day is not None  # drawn only for a day's plan
    series = {}
    for a, d in day.architectures.items():
        roles: dict[str, list[int]] = {}
        for g in d.groups:
            cur = roles.setdefault(g.role, [0] * len(d.periods))
            roles[g.role] = [x + n for x, n in zip(cur, g.per_period)]
        starts = [p.start_hour for p in d.periods]
        series[a] = (starts, [p.hours for p in d.periods], roles)
    costs = ", ".join(
        f"{a} ${d.cost_day:,.0f} (base {d.cost_base:,.0f}, elastic {d.cost_elastic:,.0f}, "
        f"line {d.cost_line:,.0f})"
        for a, d in day.architectures.items()
    )
    return Figure(
        "day",
        "The day: instances per role",
        f"Instances per role in each period ({day.timezone}), the base paid all day plus elastic "
        f"instances where the rate needs them. The day's cost: {costs}.",
        plots.day_png(series, f"hour of day ({day.timezone})"),
    )


def _bathtub_figure(data: FigureData) -> Figure:
    res = data.bathtub
    v = res["valley"]
    return Figure(
        "bathtub",
        "Bathtub on the prefill instance",
        "Uncached-token throughput and revenue against prefix hit rate on the "
        f"{data.bathtub_arch} plan's prefill instance ({res['instance']}), "
        f"{res['input_tokens']:,}-token inputs (median of the replay), chunk {res['chunk']}, "
        f"cached tokens billed at x{res['hit_price_ratio']:g}. Valley at "
        f"{v['hit_rate'] * 100:.0f}% hit, {v['revenue_drop'] * 100:.1f}% below hit rate 0.",
        plots.bathtub_png(res),
    )


def _simulated_figures(plan: Plan, data: FigureData, sla: dict) -> list[Figure]:
    """Line utilization and TTFT percentiles, analytic vs simulated: the same replay as the
    CDF's (the plan's verification replay where the page could run it again)."""
    plans = plan.plans
    util = {}
    pct = {}
    for arch, p in plans.items():
        ln = p.line
        r = data.replays[arch]
        util[arch] = (ln.utilization, r.line_utilization) if ln else (None, None)
        pct[arch] = (p.ttft_s.model_dump(), r.ttft_pct)
    sim_label = (
        "simulated (verification replay)" if data.verification else "simulated (report replay)"
    )
    return [
        Figure(
            "line_utilization",
            "Line utilization",
            "Share of the leased line's capacity in use: the optimizer's analytic figure vs "
            f"{data.replay_text()}. IDC-PD has no line.",
            plots.line_util_png(util, sim_label),
        ),
        Figure(
            "ttft_percentiles",
            "TTFT percentiles",
            f"Analytic vs simulated TTFT P50/P90/P99 per architecture; simulated: {data.replay_text()}.",
            plots.ttft_percentiles_png(pct, sla),
        ),
    ]
