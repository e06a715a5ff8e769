"""Every table the CLI prints stays readable on an 80- (and 60-) column terminal or a pipe:
no line wider than the console and no cell cut to `…` (rich's default when a table is too
wide). The bundled examples drive every command; `fit` itself is checked on hand-made rows."""

from __future__ import annotations

import pytest
from rich.console import Console

from pdd_plan.report import layout


def _assert_fits(text: str, width: int, what: str) -> None:
    assert "…" not in text, f"{what}: a cell was cut at {width} columns:\n{text}"
    for ln in text.splitlines():
        if ln.startswith("trace: "):  # the file's path on its own line, never wrapped mid-word:
            continue  # as long as the checkout's path, which no width bounds
        assert len(ln) <= width, f"{what}: {len(ln)} > {width} columns: {ln!r}"


# ------------------------------------------------------------------------------ fit itself
COLS = ["arch", "paths p_md / p_rld_md / p_rld (analytic)", "TTFT p50", "p90", "p99", "checks"]
ROWS = [
    ["pdd", "95.0% / 5.0% / 0.0%", "0.489", "1.556", "8.880", "ttft_p90 2.845 <= 10.0: ok"],
    ["idc_pd", "100.0% / 0.0% / 0.0%", "0.075", "0.694", "1.232", "ttft_p90 0.677 <= 10.0: ok"],
]


def _render(width: int, **kw) -> str:
    c = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    layout.show(c, "t", COLS, ROWS, **kw)
    return c.export_text()


@pytest.mark.unit
def test_widths_give_each_column_its_longest_word():
    w = layout.widths(["a", "b"], [["one two three", "x"]], 3 * 2 + 1 + 6)
    assert w == [5, 1]  # "three" whole; the spare column gets nothing it does not need
    assert layout.widths(["a"], [["abcdefgh"]], 3 + 1 + 7) is None  # a word wider than the room
    assert layout.widths(["a", "b"], [["ab cd", "xy"]], 100) == [5, 2]  # natural widths


@pytest.mark.unit
@pytest.mark.parametrize("width", [200, 80, 60, 40, 24])
def test_layouts_never_cut_a_cell(width):
    text = _render(width)
    _assert_fits(text, width, "fit")
    for r in ROWS:
        for cell in r[2:5]:
            assert cell in text  # numbers whole, on one line


@pytest.mark.unit
def test_layout_falls_back_wide_then_per_architecture_then_records():
    wide, stacked, records = _render(200), _render(54), _render(40)
    assert wide.count("┏") == 1 and "t: pdd" not in wide
    assert stacked.count("┏") == 2 and "t: pdd" in stacked and "t: idc_pd" in stacked
    # records: one key/value table per row; a bare `p90` reads as `TTFT p90`
    assert "TTFT p90" in records and "t: idc_pd" in records and "┏" not in records
    assert layout.record_labels(["x", "analytic p50", "p90", "simulated p50", "p90", "SLA"]) == [
        "x", "analytic p50", "analytic p90", "simulated p50", "simulated p90", "SLA",
    ]  # fmt: skip
