"""Rich tables that stay readable on an 80-column terminal (or a 60-column one, or a pipe).

Rich squeezes a table wider than the console by cutting cells to `p50/p…`. Instead, `show`
picks the first layout whose narrowest rendering fits the console: the table as given
(cells wrap at spaces, never inside a number); one table per value of one column
(`stack_by`, e.g. one per architecture); one small key/value table per row. Every column
folds rather than ellipsizes, so even a console narrower than one word loses no character.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

_QUANTILE = re.compile(r"^p\d+$")


def _span(text: str) -> tuple[int, int]:
    """(longest word, longest line) of a cell, markup not counted."""
    plain = Text.from_markup(text).plain
    words = [cell_len(w) for w in plain.split()] or [0]
    lines = [cell_len(ln) for ln in plain.splitlines()] or [0]
    return max(words), max(lines)


def widths(
    columns: Sequence[str], rows: Sequence[Sequence[str]], width: int, show_header: bool = True
) -> list[int] | None:
    """Content width of each column so the table fits `width` with no word cut, or None when
    even the longest words do not fit. Rich itself shrinks the widest columns first, cutting
    words that would have fit, so the widths are set here: each column gets its longest word,
    and the room left goes to the columns in proportion to what they lack of their longest
    line."""
    cells = [[*([c] if show_header else []), *(r[i] for r in rows)] for i, c in enumerate(columns)]
    spans = [[_span(x) for x in col] for col in cells]
    lo = [max(w for w, _ in sp) for sp in spans]
    hi = [max(n for _, n in sp) for sp in spans]
    room = width - (3 * len(columns) + 1)  # borders and one space of padding each side
    if sum(hi) <= room:
        return hi
    if sum(lo) > room:
        return None
    spare, lack = room - sum(lo), [h - w for w, h in zip(lo, hi)]
    total = sum(lack)
    out = [w + spare * d // total for w, d in zip(lo, lack)]
    for i in sorted(range(len(out)), key=lambda i: -lack[i]):  # leftovers of the rounding
        if sum(out) < room and out[i] < hi[i]:
            out[i] += 1
    return out


def make(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    justify: Sequence[str] | None = None,
    width: int | None = None,
    show_header: bool = True,
) -> Table | None:
    """A table whose cells wrap at spaces and fold (never `…`) when a word is too long,
    sized to `width` columns; None when its words cannot fit that width."""
    ws = widths(columns, rows, width, show_header) if width is not None else None
    if width is not None and ws is None:
        return None
    t = Table(title=title, show_header=show_header)
    for i, c in enumerate(columns):
        j = justify[i] if justify else "left"
        w = ws[i] if ws else None
        t.add_column(c, justify=j, overflow="fold", width=w)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*r)
    return t


def record_labels(columns: Sequence[str]) -> list[str]:
    """Column headers as stand-alone labels: a bare `p90` after `simulated p50` is read as
    `simulated p90`, as it is under the wide table's header."""
    out: list[str] = []
    prefix = ""
    for c in columns:
        head, _, last = c.rpartition(" ")
        if _QUANTILE.match(c) and prefix:
            out.append(f"{prefix} {c}")
            continue
        prefix = head if _QUANTILE.match(last) else ""
        out.append(c)
    return out


def _records(
    console: Console,
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    keys: int,
) -> list[Table]:
    """One key/value table per row, titled by its first `keys` cells. The last resort: a word
    wider than the console is folded onto the next line, never cut."""
    labels = record_labels(columns)
    out = []
    for r in rows:
        if keys == 1:
            head = r[0]
        else:
            head = ", ".join(f"{c}={x}" for c, x in zip(columns[:keys], r[:keys]))
        name = f"{title}: {head}" if title else head
        kv = list(zip(labels[keys:], r[keys:]))
        t = make(name, ["", ""], kv, width=console.width, show_header=False)
        out.append(t or make(name, ["", ""], kv, show_header=False))
    return out  # type: ignore[return-value]


def _drop(cells: Sequence[str], i: int) -> list[str]:
    return [*cells[:i], *cells[i + 1 :]]


def _stacked(
    console: Console,
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    justify: Sequence[str] | None,
    by: int,
) -> list[Table | None]:
    """One table per value of column `by` (e.g. one per architecture), without that column."""
    groups: dict[str, list[list[str]]] = {}
    for r in rows:
        groups.setdefault(r[by], []).append(_drop(r, by))
    j = _drop(justify, by) if justify else None
    cols = _drop(columns, by)
    return [
        make(f"{title}: {k}" if title else k, cols, g, j, width=console.width)
        for k, g in groups.items()
    ]


def layouts(
    console: Console,
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    justify: Sequence[str] | None = None,
    stack_by: int | None = 0,
    keys: int = 1,
) -> list[Table]:
    """The tables of the first layout that fits the console (see the module doc)."""
    wide = make(title, columns, rows, justify, width=console.width)
    if wide is not None:
        return [wide]
    if stack_by is not None and len(columns) > 2:
        stacked = _stacked(console, title, columns, rows, justify, stack_by)
        if all(t is not None for t in stacked):
            return stacked  # type: ignore[return-value]
    return _records(console, title, columns, rows, keys)


def show(
    console: Console,
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    justify: Sequence[str] | None = None,
    legend: str | None = None,
    stack_by: int | None = 0,
    keys: int = 1,
) -> None:
    """Print the table in the first layout that fits the console, then its legend (units and
    abbreviations, wrapped to the console rather than to the table)."""
    for t in layouts(console, title, columns, rows, justify, stack_by, keys):
        console.print(t)
    if legend:
        console.print(legend, highlight=False)
