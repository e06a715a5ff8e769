"""Render a Report for the terminal (rich tables) or as Markdown."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from pdd_plan.report import layout
from pdd_plan.report.sections import Report


def render_rich(rep: Report, console: Console) -> None:
    """Each section as a table sized to the console: wide when it fits, else one table per
    architecture (its first column), else one key/value table per row."""
    console.print(f"[bold]{escape(rep.title)}[/bold]: {escape(rep.subtitle)}")
    for line in rep.verdict:
        console.print(f"[bold]{escape(line)}[/bold]")
    for s in rep.sections:
        layout.show(console, s.title, s.columns, s.rows)
        if s.note:
            console.print(f"[dim]{escape(s.note)}[/dim]")
    for line in rep.summary:
        console.print(escape(line))


def _md_cell(x: str) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown(rep: Report) -> str:
    out = [f"# {rep.title}", "", rep.subtitle, ""]
    out += [f"**{line}**\n" for line in rep.verdict]
    for s in rep.sections:
        out += [f"## {s.title}", ""]
        out.append("| " + " | ".join(_md_cell(c) for c in s.columns) + " |")
        out.append("|" + "---|" * len(s.columns))
        for r in s.rows:
            out.append("| " + " | ".join(_md_cell(c) for c in r) + " |")
        out.append("")
        if s.note:
            out += [s.note, ""]
    out += list(rep.summary)
    return "\n".join(out).rstrip() + "\n"
