"""Render a Report for the terminal (rich tables) or as Markdown."""

from __future__ import annotations

from rich.console import Console

from pdd_plan.report import fit
from pdd_plan.report.sections import Report


def render_rich(rep: Report, console: Console) -> None:
    """Each section as a table sized to the console: wide when it fits, else one table per
    architecture (its first column), else one key/value table per row."""
    console.print(f"[bold]{rep.title}[/bold]: {rep.subtitle}")
    for s in rep.sections:
        fit.show(console, s.title, s.columns, s.rows)
        if s.note:
            console.print(f"[dim]{s.note}[/dim]")
    for line in rep.summary:
        console.print(line)


def _md_cell(x: str) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown(rep: Report) -> str:
    out = [f"# {rep.title}", "", rep.subtitle, ""]
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
