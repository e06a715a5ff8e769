"""The plan's `uncertainty` block for people: the verdict's probability and what would flip
it, beside each comparison; per architecture the bands, the share meeting the SLA, N-1; the
tornado. Renders only: the block is computed by pdd_plan/uncertainty/."""

from __future__ import annotations

from html import escape

from rich.console import Console

from pdd_plan.architectures import RELAY_ARCH, get
from pdd_plan.outputs.plan_uncertainty import Band, PlanUncertainty
from pdd_plan.report import layout


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.0f}%"


def _band(b: Band, fmt: str = "{:.3g}") -> str:
    if b.p50 is None:
        return "-"
    return " / ".join(fmt.format(x) if x is not None else "-" for x in (b.p10, b.p50, b.p90))


def verdict_lines(u: PlanUncertainty) -> list[str]:
    """One line per comparison: the probability with its error, then the flip sentence."""
    relay = get(RELAY_ARCH).title
    out = []
    for base, v in u.comparisons.items():
        t = get(base).title
        tie = f", tied in {v.ties:.0%}" if v.ties > 0 else ""
        cap = ""
        if v.capacity_median_gain is not None:
            cap = f" Capacity per dollar (a second figure): {_pct(v.capacity_median_gain)} at the median inputs."
        out.append(
            f"P({relay} beats {t} at the planned rate) = {v.p_beats:.0%} +/- {v.stderr:.0%} "
            f"over {u.draws} draws{tie}. {v.flip}{cap}"
        )
    if u.break_even:
        out.append(u.break_even)
    out += margin_lines(u)
    for a, c in u.confirmed.items():
        part = " (partly: some inputs do not reach the simulator)" if c.partial else ""
        out.append(
            f"Replayed {c.replays} draws of {a}{part}: SLA met in {c.sim_met_share:.0%} "
            f"(analytic {c.analytic_met_share:.0%}; verdicts agree in {c.agree_share:.0%})."
        )
    f = u.plan_flips
    if f is not None:
        per = "; ".join(
            f"{a}: line {f.line_changes[a]}/{f.corners}, counts {f.count_changes[a]}/{f.corners}"
            + (f", no plan {f.no_plan[a]}" if f.no_plan[a] else "")
            for a in f.line_changes
        )
        out.append(
            f"Re-planned at the {f.corners} P10/P90 corners of {' and '.join(f.inputs)}: "
            f"corners where the line option or an instance count changes ({per})."
        )
    return out + robust_lines(u)


def margin_lines(u: PlanUncertainty) -> list[str]:
    """One sentence per margin the scenario keeps: what it adds to each plan over the
    cheapest fleet meeting the SLA without it (the architectures it adds nothing to, named)."""
    by: dict[str, list] = {}
    for m in u.margin_costs:
        by.setdefault(m.margin, []).append(m)
    out = []
    for name, ms in by.items():
        adds = [
            f"{', '.join(f'{n:+d} {k}' for k, n in m.instances.items())} to {m.architecture} "
            f"(${m.cost_per_hour:,.1f}/h)"
            for m in ms
            if m.instances
        ]
        none = [m.architecture for m in ms if not m.instances]
        what = "; ".join(adds) if adds else "nothing"
        rest = f"; nothing to {', '.join(none)}" if adds and none else ""
        out.append(
            f"The {ms[0].value:.0%} {name.replace('_', ' ')} cap (search.{name}; none at "
            f"{ms[0].without:g}) adds "
            f"{what}{rest}, over the cheapest fleet meeting the SLA without it (nominal "
            f"inputs){_without(u, name, ms[0].without) if adds else ''}."
        )
    return out


def _without(u: PlanUncertainty, name: str, free: float) -> str:
    """', without it PDD vs X ...': the headline's figure with the margin at its no-margin
    value (the comparisons' bars at the plan's own inputs)."""
    relay = get(RELAY_ARCH).title
    parts = [
        f"{relay} vs {get(base).title} {_pct1(g)}"
        for base, v in u.comparisons.items()
        for r in v.nominal_margins
        for end, g in ((r.low, r.gain_low), (r.high, r.gain_high))
        if r.input == name and end == free and g is not None
    ]
    return f"; without it {', '.join(parts)}" if parts else ""


def _pct1(x: float) -> str:
    return f"{x * 100:+.1f}%"


def lines_text(u: PlanUncertainty) -> str:
    """The block as plain text lines (Markdown / HTML reports use the same sentences)."""
    return "\n".join(verdict_lines(u))


def robust_lines(u: PlanUncertainty) -> list[str]:
    """The robust fleets' cost against the nominal ones'."""
    r = u.robust
    if r is None:
        return []
    out = [f"Robust fleets: SLA met in >= {r.q:.0%} of {r.draws} independent draws."]
    if r.rate_note:
        out.append(r.rate_note + ".")
    for a, x in r.architectures.items():
        if x.robust_cost_per_hour is None:
            out.append(f"  {a}: none found (meets {x.met_share:.0%} as planned): {x.note}")
            continue
        extra = "" if x.design_draw is None else f", planned at draw {x.design_draw}"
        out.append(
            f"  {a}: ${x.robust_cost_per_hour:,.1f}/h vs nominal ${x.nominal_cost_per_hour:,.1f}/h "
            f"({_pct(x.cost_of_robustness)} for robustness), meets {x.met_share:.0%}{extra}"
        )
    return out


def render(u: PlanUncertainty, console: Console) -> None:
    names = ", ".join(m.name for m in u.inputs) or "none"
    console.print(f"How sure: {u.draws} draws ({u.method}); inputs: {names}.", highlight=False)
    for n in u.notes:
        console.print(f"  note: {n}", highlight=False)
    for line in verdict_lines(u):
        console.print(line, highlight=False)
    rows = []
    for a, x in u.architectures.items():
        n1 = ", ".join(f"-{k}: {v:.3g}" for k, v in x.n_minus_1.items()) or "-"
        rows.append([a, f"{x.meets_sla_share:.0%}", _band(x.goodput_rps), _band(x.bcr), n1])
    cols: tuple[str, ...]
    cols = ("arch", "meets SLA", "goodput P10/50/90", "BCR P10/50/90", "N-1 goodput")
    layout.show(
        console, "under the draws", cols, rows, justify=("left", "right", "right", "right", "left")
    )
    bases = list(u.comparisons)
    by_input: dict[str, list[str]] = {}
    width: dict[str, float] = {}
    for base in bases:
        for r in u.comparisons[base].tornado:
            key = f"{r.input} {r.low:.3g} .. {r.high:.3g}"
            by_input.setdefault(key, []).append(f"{_pct(r.gain_low)} .. {_pct(r.gain_high)}")
            lo, hi = r.gain_low or 0.0, r.gain_high or 0.0
            width[key] = max(width.get(key, 0.0), abs(hi - lo))
    # widest bar over the comparisons first (the table is a tornado)
    trows = [[k, *by_input[k]] for k in sorted(by_input, key=lambda k: (-width[k], k))]
    if trows:
        cols = ("input P10 .. P90", *(f"gain vs {get(b).title}" for b in bases))
        layout.show(console, "tornado: PDD's BCR gain, one input moved", cols, trows)
    console.print(
        "meets SLA: share of draws whose SLA goodput covers the planned (drawn) rate; N-1: SLA "
        "goodput with one instance of a role, or one line, lost (nominal inputs; the SLA alone, no "
        "planning margin).",
        highlight=False,
    )


def section_parts(u: PlanUncertainty) -> list[tuple]:
    """The block as report sections (key, title, columns, rows, note) for Markdown and HTML
    (report.sections wraps them): the verdict's sentences, the bands, the tornado (with its
    plot, an inline SVG the HTML page draws under the table)."""
    names = ", ".join(f"{m.name} ({m.dist}; {m.source})" for m in u.inputs) or "none"
    verdict = [[line] for line in verdict_lines(u)]
    rows = [
        [a, f"{x.meets_sla_share:.0%}", _band(x.goodput_rps), _band(x.bcr),
         ", ".join(f"-{k}: {v:.3g}" for k, v in x.n_minus_1.items()) or "-"]
        for a, x in u.architectures.items()
    ]  # fmt: skip
    torn = [
        [get(b).title, r.input, f"{r.low:.3g} .. {r.high:.3g}",
         f"{_pct(r.gain_low)} .. {_pct(r.gain_high)}"]
        for b, v in u.comparisons.items()
        for r in v.tornado
    ]  # fmt: skip
    note = f"{u.draws} draws, {u.method}. Inputs: {names}. " + " ".join(u.notes)
    cols = ["arch", "meets SLA", "goodput P10/50/90", "BCR P10/50/90", "N-1 goodput"]
    return [
        ("uncertainty_verdict", "How sure: the verdict", ["statement"], verdict, note),
        ("uncertainty", "Under the draws", cols, rows, ""),
        ("tornado", "Tornado: PDD's BCR gain, one input at P10 / P90",
         ["vs", "input", "P10 .. P90", "gain"], torn, "", tornado_svg(u)),
    ]  # fmt: skip


# ------------------------------------------------------------------ the tornado as a plot

_W, _LABEL, _PLOT, _ROW, _HEAD = 720, 250, 400, 22, 26
_P10, _P90 = "#4c72b0", "#dd8452"  # the palette of the report's PNG plots (plots.PART_COLORS)


def tornado_svg(u: PlanUncertainty) -> str:
    """PDD's BCR gain over each baseline with one input at its P10 (blue) and P90 (orange),
    the others at their medians, as bars from the median inputs' gain (solid line), with no
    gain (a tie, dashed) marked: an inline SVG (deterministic text, no script, no external
    reference; HTML5 needs no namespace for it). Empty when there is no bar to draw."""

    def flat(v) -> bool:  # tied in every bar (PDD planned as CDC-PD): nothing to draw
        gs = [g for r in v.tornado for g in (r.gain_low, r.gain_high)] + [v.median_gain]
        return all(g is None or abs(g) < 1e-9 for g in gs)

    panels = [(b, v) for b, v in u.comparisons.items() if v.tornado and not flat(v)]
    if not panels:
        return ""
    vals = [0.0]
    for _, v in panels:
        vals += [x for r in v.tornado for x in (r.gain_low, r.gain_high) if x is not None]
        vals += [v.median_gain] if v.median_gain is not None else []
    lo, hi = min(vals), max(vals)
    pad = 0.06 * (hi - lo or 1.0)
    lo, hi = lo - pad, hi + pad

    def x(g: float) -> float:
        return _LABEL + _PLOT * (g - lo) / (hi - lo)

    parts, y = [], 0
    for base, v in panels:
        parts.append(_text(4, y + 17, f"PDD's BCR gain vs {get(base).title}", bold=True))
        y += _HEAD
        top = y
        mid = v.median_gain if v.median_gain is not None else 0.0
        for r in v.tornado:
            parts.append(_text(4, y + 15, f"{r.input} {r.low:.3g} .. {r.high:.3g}"))
            for g, color in ((r.gain_low, _P10), (r.gain_high, _P90)):
                if g is None:
                    continue
                a, b = sorted((x(mid), x(g)))
                parts.append(
                    f'<rect x="{a:.1f}" y="{y + 4}" width="{max(b - a, 1.0):.1f}" '
                    f'height="{_ROW - 8}" fill="{color}"><title>{escape(_pct(g))}</title></rect>'
                )
                tx = x(g) + (4 if g >= mid else -4)
                anchor = "start" if g >= mid else "end"
                parts.append(_text(tx, y + 15, _pct(g), anchor=anchor, size=10))
            y += _ROW
        for g, dash in ((0.0, ' stroke-dasharray="4 3"'), (mid, "")):
            parts.append(
                f'<line x1="{x(g):.1f}" y1="{top}" x2="{x(g):.1f}" y2="{y}" stroke="#222"{dash}/>'
            )
        parts.append(_text(x(mid), y + 12, f"median inputs {_pct(mid)}", anchor="middle", size=10))
        y += 18
    legend = (
        f'<rect x="{_LABEL}" y="{y + 2}" width="10" height="10" fill="{_P10}"/>'
        + _text(_LABEL + 14, y + 11, "input at P10", size=10)
        + f'<rect x="{_LABEL + 100}" y="{y + 2}" width="10" height="10" fill="{_P90}"/>'
        + _text(_LABEL + 114, y + 11, "input at P90", size=10)
        + _text(_LABEL + 200, y + 11, "dashed: no gain (the ranking flips)", size=10)
    )
    y += 18
    return (
        f'<svg width="{_W}" height="{y}" viewBox="0 0 {_W} {y}" role="img" '
        f'aria-label="tornado of PDD\'s BCR gain">{"".join(parts)}{legend}</svg>'
    )


def _text(x: float, y: float, s: str, anchor: str = "start", size: int = 12, bold=False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (
        f'<text x="{x:.1f}" y="{y}" font-size="{size}" text-anchor="{anchor}"'
        f' font-family="sans-serif"{weight}>{escape(s)}</text>'
    )
