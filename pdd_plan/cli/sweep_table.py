"""`pdd-plan sweep`'s text outputs: the rich table and the CSV."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table


def sweep_csv(result: dict) -> str:
    """One row per point and architecture (optimize/sweep_rows.py), pandas-written."""
    import pandas as pd

    from ..optimize.sweep_rows import columns, rows

    cols = columns(result)
    df = pd.DataFrame(rows(result), columns=cols, dtype=object)  # object: ints stay ints
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n", na_rep="")
    return buf.getvalue()


def _fmt(x, nd: int = 2, pct: bool = False) -> str:
    if x is None:
        return "-"
    if pct:
        return f"{x * 100:.0f}%"
    return f"{x:,.{nd}f}" if isinstance(x, float) else str(x)


def sweep_table(result: dict, console: Console) -> None:
    """The rows as a table, Pareto points starred, then one line per infeasible row."""
    keys = [v["key"] for v in result["vary"]]
    t = Table(
        title=f"sweep {result['scenario']}: {len(result['points'])} points "
        f"({'verified' if result['verify'] else 'not verified'}; * = Pareto frontier)",
        show_lines=False,
    )
    for k in ["#", *keys]:
        t.add_column(k, justify="right")
    for c in ("arch", "status"):
        t.add_column(c)
    for c in ("$/hour", "goodput r/s", "BCR", "TTFT p90", "TTFT p99"):
        t.add_column(c, justify="right")
    if result["verify"]:
        t.add_column("sim SLA")
    t.add_column("routes md/rld-md/rld %", justify="right")
    t.add_column("GPUs", justify="right")
    t.add_column("line")
    t.add_column("*")
    notes = []
    for p in result["points"]:
        for a in result["architectures"]:
            r = p["architectures"][a]
            ok = r["status"] == "ok"
            cells = [str(p["index"]), *(str(p["values"][k]) for k in keys), a]
            cells.append(r["status"] if ok else f"[yellow]{r['status']}[/yellow]")
            cells += [
                _fmt(r["cost_per_hour"]),
                _fmt(r["goodput_rps"]),
                _fmt(r["bcr"], 1),
                _fmt(r["ttft_p90_s"]),
                _fmt(r["ttft_p99_s"]),
            ]
            if result["verify"]:
                met = r.get("sim_sla_met")
                cells.append("-" if met is None else ("yes" if met else "[red]no[/red]"))
            routes = "/".join(
                _fmt(r[f"route_{k}"], pct=True) for k in ("p_md", "p_rld_md", "p_rld")
            )
            cells += [
                routes.replace("%", "") if ok else "-",
                _fmt(r["gpus"]),
                r["line"] or "-",
                "*" if r["pareto"] else "",
            ]
            t.add_row(*cells)
            if not ok:
                notes.append(f"#{p['index']} {a}: {r['reason']}")
    console.print(t)
    for n in notes:
        console.print(f"[yellow]infeasible[/yellow] {n}", highlight=False, markup=True)


__all__ = ["sweep_csv", "sweep_table"]
