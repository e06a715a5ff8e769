"""`pdd-plan sweep`'s text outputs: the rich table and the CSV."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape

from pdd_plan.architectures import PATHS
from pdd_plan.report import layout


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


# the columns past the grid keys and the architecture: the first always shown (the answer of
# each row: its status, with the replay's verdict when verified, cost, goodput, BCR, Pareto
# mark), the rest (by their --columns names) added in this order while the table still fits
# the console unwrapped
ALWAYS = ("status", "cost", "goodput", "bcr", "pareto")
OPTIONAL = ("ttft_p90", "ttft_p99", "gpus", "line", "routes")
HEADERS = {
    "status": "status",
    "cost": "$/h",
    "goodput": "goodput r/s",
    "bcr": "BCR",
    "pareto": "*",
    "ttft_p90": "TTFT p90",
    "ttft_p99": "TTFT p99",
    "gpus": "GPUs",
    "line": "line",
    "routes": "routes md/rld-md/rld %",
}
_LEFT = {"status", "pareto", "line", "routes"}


def _cell(r: dict, name: str) -> str:
    ok = r["status"] == "ok"
    if name == "status":  # with --verify: whether the replay met the SLA too
        if not ok:
            return f"[yellow]{r['status']}[/yellow]"
        return "[red]missed[/red]" if r.get("sim_sla_met") is False else "ok"
    if name == "pareto":
        return "*" if r["pareto"] else ""
    if name == "routes":
        routes = "/".join(_fmt(r[f"route_{k}"], pct=True) for k in PATHS)
        return routes.replace("%", "") if ok else "-"
    if name == "line":
        return r["line"] or "-"
    key, nd = {
        "cost": ("cost_per_hour", 2),
        "goodput": ("goodput_rps", 2),
        "bcr": ("bcr", 1),
        "ttft_p90": ("ttft_p90_s", 2),
        "ttft_p99": ("ttft_p99_s", 2),
        "gpus": ("gpus", 0),
    }[name]
    return _fmt(r[key], nd)


def _key_headers(keys: list[str]) -> list[str]:
    """Each grid key by its last part (`workload.rate_rps`: rate_rps) where that is unique."""
    short = [k.rsplit(".", 1)[-1] for k in keys]
    return short if len(set(short)) == len(short) else list(keys)


def _table(result: dict, keys: list[str], names: list[str]) -> tuple[list, list, list]:
    """(headers, justify, rows) of the table with these columns after the keys and arch."""
    cols = ["#", *_key_headers(keys), "arch", *(HEADERS[n] for n in names)]
    justify = ["right"] * (2 + len(keys)) + ["left" if n in _LEFT else "right" for n in names]
    justify[1 + len(keys)] = "left"
    rows = []
    for p in result["points"]:
        for a in result["architectures"]:
            r = p["architectures"][a]
            head = [str(p["index"]), *(str(p["values"][k]) for k in keys), a]
            rows.append([*head, *(_cell(r, n) for n in names)])
    return cols, justify, rows


def _unwrapped(cols: list, rows: list, width: int) -> bool:
    """Whether the table fits `width` with no cell wrapped."""
    return layout.widths(cols, rows, width) == layout.widths(cols, rows, 10**6)


def choose(result: dict, width: int, asked: list[str] | None = None) -> tuple[list, list]:
    """(columns shown, columns left out): `asked` (--columns) as given, else the answer's
    columns and as many of the others, in order, as fit `width` unwrapped."""
    keys = [v["key"] for v in result["vary"]]
    base = list(ALWAYS)
    if asked is not None:
        shown = [n for n in (*ALWAYS, *OPTIONAL) if n in base or n in asked]
        return shown, [n for n in OPTIONAL if n not in shown]
    shown = list(base)
    for n in OPTIONAL:
        trial = [*shown[:-1], n, shown[-1]]  # the Pareto mark stays last
        cols, _, rows = _table(result, keys, trial)
        if _unwrapped(cols, rows, width):
            shown = trial
    return shown, [n for n in OPTIONAL if n not in shown]


def sweep_table(result: dict, console: Console, columns: list[str] | None = None) -> None:
    """The rows as one table sized to the console: the grid keys, the architecture and each
    row's answer (status, cost, goodput, BCR, replay verdict, Pareto star), then as many of
    the other columns as fit; a line says which were left out and how to get them. Then one
    line per infeasible row. A console too narrow even for the answer's columns gets one
    table per architecture, else one per row."""
    keys = [v["key"] for v in result["vary"]]
    verify = bool(result["verify"])
    names, left = choose(result, console.width, columns)
    cols, justify, rows = _table(result, keys, names)
    title = f"sweep {result['scenario']}: {len(result['points'])} points"
    layout.show(console, title, cols, rows, justify, stack_by=1 + len(keys), keys=2 + len(keys))
    short = _key_headers(keys)
    legend = [
        "verified: status ok = planned and met the SLA in the replay, missed = did not"
        if verify
        else "not verified (status ok = planned)",
        "* = Pareto frontier",
    ]
    legend += [f"{s} = {k}" for s, k in zip(short, keys) if s != k]
    if left:
        legend.append(
            f"not shown to fit {console.width} columns: {', '.join(left)} (--columns "
            f"{','.join(left)} adds {'it' if len(left) == 1 else 'them'}; --format csv has every field)"
        )
    console.print("; ".join(legend) + ".", highlight=False, markup=False)
    for p in result["points"]:
        for a in result["architectures"]:
            r = p["architectures"][a]
            if r["status"] != "ok":
                n = f"#{p['index']} {a}: {r['reason']}"
                console.print(f"[yellow]infeasible[/yellow] {escape(n)}", highlight=False)


__all__ = ["ALWAYS", "OPTIONAL", "choose", "sweep_csv", "sweep_table"]
