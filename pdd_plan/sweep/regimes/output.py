"""A regime map as text: flat CSV rows (one per cell) and a compact grid for the terminal."""

from __future__ import annotations

import csv
import io

from pdd_plan.architectures import PATHS
from pdd_plan.sweep.regimes.cells import GAIN_LINE, GAIN_LOCAL

CELL_KEYS = ("regime", GAIN_LINE, GAIN_LOCAL, "relay_request_share", "rld_token_share")
ARCH_KEYS = ("status", "bcr", "cost_per_hour", *(f"route_{r}" for r in PATHS), "line", "reason")


def columns(result: dict) -> list[str]:
    """CSV columns: cell, the two axes, the cell's figures, then each architecture's."""
    per = [f"{a}_{k}" for a in result["architectures"] for k in ARCH_KEYS]
    return ["cell", result["x"]["name"], result["y"]["name"], *CELL_KEYS, *per]


def rows(result: dict) -> list[dict]:
    """One flat row per cell, in cell order (y outer, x inner)."""
    xn, yn = result["x"]["name"], result["y"]["name"]
    out = []
    for c in result["cells"]:
        row = {"cell": c["index"], xn: c["x"], yn: c["y"], **{k: c[k] for k in CELL_KEYS}}
        for a in result["architectures"]:
            r = c["architectures"][a]
            row.update({f"{a}_{k}": r.get(k) for k in ARCH_KEYS})
        out.append(row)
    return out


def csv_text(result: dict) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns(result), lineterminator="\n")
    w.writeheader()
    for r in rows(result):
        w.writerow({k: "" if v is None else v for k, v in r.items()})
    return buf.getvalue()


def _mark(cell: dict) -> str:
    """A cell in the terminal grid: PDD's BCR gain over CDC-PD, or why there is none."""
    reg = cell["regime"]
    if reg == "no_pdd":
        return "x"
    if reg == "pdd_only":
        return "only"
    g = cell[GAIN_LINE] or 0.0
    return "=" if reg == "same" else f"{g * 100:+.0f}%"


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def table_text(result: dict) -> str:
    """The map as a grid (y down, x across) of PDD's BCR gain over CDC-PD, with a legend."""
    xs, ys = result["x"]["values"], result["y"]["values"]
    nx = len(xs)
    head = [_fmt(v) for v in xs]
    w = max(5, *(len(h) for h in head))
    lw = max(len(_fmt(v)) for v in ys)
    lines = [
        f"{result['scenario']}: PDD's BCR gain over CDC-PD",
        f"  rows: {result['y']['label']}; columns: {result['x']['label']}",
        " " * (lw + 2) + " ".join(h.rjust(w) for h in head),
    ]
    cells = result["cells"]
    for iy in reversed(range(len(ys))):  # the largest y on top, as on the heatmap
        marks = [_mark(c).rjust(w) for c in cells[iy * nx : (iy + 1) * nx]]
        lines.append(f"{_fmt(ys[iy]).rjust(lw)}  " + " ".join(marks))
    counts = result["counts"]
    lines += [
        "=: same BCR (PDD's plan sends every request P->MD); +N%: relay decode pays;",
        "only: CDC-PD has no plan, PDD has; x: PDD has no plan",
        "cells: " + ", ".join(f"{k} {n}" for k, n in counts.items() if n),
        "analytic (not replayed in the simulator)" if not result["verify"] else "verified",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["columns", "rows", "csv_text", "table_text"]
