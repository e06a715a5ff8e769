"""`pdd-plan sweep`'s text outputs: the rich table and the CSV."""

from __future__ import annotations

import io

from rich.console import Console

from pdd_plan.architectures import PATHS
from pdd_plan.report import fit


def sweep_csv(result: dict) -> str:
    """One row per point and architecture (optimize/sweep_rows.py), pandas-written."""
    import pandas as pd

    from pdd_plan.sweep.rows import columns, rows

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


def _columns(keys: list[str], verify: bool) -> list[str]:
    cols = ["#", *keys, "arch", "status", "$/h", "goodput r/s", "BCR", "TTFT p90", "TTFT p99"]
    if verify:
        cols.append("sim SLA")
    return [*cols, "routes md/rld-md/rld %", "GPUs", "line", "*"]


def _cells(p: dict, a: str, keys: list[str], verify: bool) -> list[str]:
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
    if verify:
        met = r.get("sim_sla_met")
        cells.append("-" if met is None else ("yes" if met else "[red]no[/red]"))
    routes = "/".join(_fmt(r[f"route_{k}"], pct=True) for k in PATHS)
    return [
        *cells,
        routes.replace("%", "") if ok else "-",
        _fmt(r["gpus"]),
        r["line"] or "-",
        "*" if r["pareto"] else "",
    ]


def sweep_table(result: dict, console: Console) -> None:
    """The rows as a table, Pareto points starred, then one line per infeasible row. On a
    console too narrow for every column: one table per architecture, else one per row."""
    keys = [v["key"] for v in result["vary"]]
    verify = bool(result["verify"])
    title = (
        f"sweep {result['scenario']}: {len(result['points'])} points "
        f"({'verified' if verify else 'not verified'}; * = Pareto frontier)"
    )
    cols = _columns(keys, verify)
    arch = 1 + len(keys)
    justify = ["right"] * len(cols)
    justify[arch] = justify[arch + 1] = justify[-2] = justify[-1] = "left"
    if verify:
        justify[arch + 7] = "left"
    rows, notes = [], []
    for p in result["points"]:
        for a in result["architectures"]:
            rows.append(_cells(p, a, keys, verify))
            r = p["architectures"][a]
            if r["status"] != "ok":
                notes.append(f"#{p['index']} {a}: {r['reason']}")
    fit.show(console, title, cols, rows, justify, stack_by=arch, keys=arch + 1)
    for n in notes:
        console.print(f"[yellow]infeasible[/yellow] {n}", highlight=False, markup=True)


__all__ = ["sweep_csv", "sweep_table"]
