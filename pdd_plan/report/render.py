"""Render a Report for the terminal (rich tables) or as Markdown."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .model import Report


def render_rich(rep: Report, console: Console) -> None:
    console.print(f"[bold]{rep.title}[/bold]: {rep.subtitle}")
    for s in rep.sections:
        t = Table(title=s.title, title_justify="left")
        for c in s.columns:
            t.add_column(c)
        for r in s.rows:
            t.add_row(*r)
        console.print(t)
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
