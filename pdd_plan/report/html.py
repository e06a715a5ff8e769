"""One self-contained HTML page: inline CSS, plots embedded as base64 PNG (and inline SVG: the
plans' diagrams, the tornado), no network references (no external CSS, scripts, fonts or links)
and no timestamps.

It opens on the answer: the verdict in one sentence per baseline, then the recommended plan
drawn (``id="plan-diagram"``) with each other architecture's plan smaller beside it; the tables,
the inputs and the plots follow."""

from __future__ import annotations

import base64
from html import escape

from pdd_plan.architectures import get
from pdd_plan.outputs.plan import Plan
from pdd_plan.report import verdict
from pdd_plan.report.diagram import plan_svg
from pdd_plan.report.figures import Figure
from pdd_plan.report.sections import Report

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto;
       max-width: 1100px; color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
p.sub { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
p.note { color: #666; font-size: 0.85em; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.9em; }
nav a { margin-right: 1em; }
p.verdict { font-size: 1.15em; margin: 0.4em 0; }
p.verdict.second { font-size: 1em; color: #333; }
figure.plan { margin: 0.6em 0; }
figure.plan svg { width: 100%; max-width: 760px; height: auto; display: block; }
div.others { display: flex; flex-wrap: wrap; gap: 1em; }
div.others figure { flex: 1 1 340px; max-width: 540px; margin: 0; }
div.others svg { width: 100%; height: auto; display: block; }
"""


def _table(columns: list[str], rows: list[list[str]], classes: str) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f'<table class="{classes}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>'


def _answer(rep: Report, plan: Plan | None) -> list[str]:
    """The verdict and the plans' pictures: the page's first screen."""
    out = ['<section id="answer">']
    for i, line in enumerate(rep.verdict):
        cls = "verdict" if i == 0 else "verdict second"
        out.append(f'<p class="{cls}"><strong>{escape(line)}</strong></p>')
    best = None if plan is None else verdict.recommended(plan)
    if best is not None:
        assert plan is not None  # a recommendation comes from a plan
        p = plan.plans[best]
        head = f"Recommended: {_heading(best, p)}"
        out.append(f'<figure class="plan">{plan_svg(best, p, head, "plan-diagram")}</figure>')
        others = [a for a in plan.plans if a != best]
        if others:
            out.append('<div class="others">')
            for a in others:
                svg = plan_svg(a, plan.plans[a], _heading(a, plan.plans[a]), f"plan-{a}")
                out.append(f'<figure class="plan small">{svg}</figure>')
            out.append("</div>")
    out.append("</section>")
    return out


def _heading(a: str, p) -> str:
    return (
        f"{get(a).title}: ${p.cost_per_hour:,.2f}/h, {p.goodput_rps:,.2f} req/s within the SLA, "
        f"BCR {p.bcr:,.1f} req/$"
    )


def render_html(rep: Report, figures: list[Figure], plan: Plan | None = None) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(rep.title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{escape(rep.title)}</h1>",
        f'<p class="sub">{escape(rep.subtitle)}</p>',
    ]
    parts += _answer(rep, plan)
    links = [f'<a href="#{escape(s.key)}">{escape(s.title)}</a>' for s in rep.sections]
    if figures:
        links.append('<a href="#plots">Plots</a>')
    parts.append("<nav>" + " ".join(links) + "</nav>")
    for line in rep.summary:
        parts.append(f"<p><strong>{escape(line)}</strong></p>")
    for s in rep.sections:
        parts.append(f'<section id="{escape(s.key)}">')
        parts.append(f"<h2>{escape(s.title)}</h2>")
        parts.append(_table(s.columns, s.rows, f"plan-table {escape(s.key)}"))
        if s.note:
            parts.append(f'<p class="note">{escape(s.note)}</p>')
        if s.svg:  # built from the plan's numbers by the section's module, escaped there
            parts.append(f'<figure id="fig-{escape(s.key)}">{s.svg}</figure>')
        parts.append("</section>")
    if figures:
        parts.append('<section id="plots">')
        parts.append("<h2>Plots</h2>")
        for f in figures:
            b64 = base64.b64encode(f.png).decode("ascii")
            parts += [
                f'<figure id="fig-{escape(f.key)}">',
                f'<img alt="{escape(f.title)}" src="data:image/png;base64,{b64}">',
                f"<figcaption><strong>{escape(f.title)}.</strong> {escape(f.caption)}</figcaption>",
                "</figure>",
            ]
        parts.append("</section>")
    parts += [
        '<p class="note">Generated by pdd-plan report from a plan file.</p>',
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(parts)
