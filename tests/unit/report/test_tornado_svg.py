"""The tornado plot: one bar per input and end (P10, P90) from the median gain, lines at no
gain and at the median, deterministic text with nothing external; none when every bar ties."""

from __future__ import annotations

import re

import pytest

from pdd_plan.outputs.plan_uncertainty import Band, PlanUncertainty, TornadoRow, Versus
from pdd_plan.report.uncertainty import section_parts, tornado_svg

pytestmark = pytest.mark.unit


def _u(rows_idc, rows_cdc) -> PlanUncertainty:
    def vs(base, rows, med):
        return Versus(baseline=base, p_beats=0.1, stderr=0.05, ties=0.0, gain=Band(), median_gain=med,
                      flip="x", tornado=rows)  # fmt: skip

    return PlanUncertainty(
        draws=8, seed=0, method="m", inputs=[], notes=[], architectures={}, per_draw=[],
        comparisons={"idc_pd": vs("idc_pd", rows_idc, -0.74), "cdc_pd": vs("cdc_pd", rows_cdc, 0.0)},
    )  # fmt: skip


ROWS = [
    TornadoRow(input="perf_speed", low=0.58, high=1.35, gain_low=-0.13, gain_high=-0.41),
    TornadoRow(input="line_price", low=0.68, high=1.32, gain_low=-0.7, gain_high=-0.78),
]
TIED = [TornadoRow(input="perf_speed", low=0.58, high=1.35, gain_low=0.0, gain_high=0.0)]


def test_bars_and_lines():
    s = tornado_svg(_u(ROWS, TIED))
    assert s.startswith("<svg") and s.endswith("</svg>")
    # the tied comparison (PDD planned as CDC-PD) is left out: two bars per input of IDC-PD's
    assert len(re.findall(r"<rect [^>]*><title>", s)) == 4
    assert "vs IDC-PD" in s and "vs CDC-PD" not in s
    assert s.count("<line ") == 2 and "stroke-dasharray" in s  # no gain, and the median
    assert "-74%" in s and "-13%" in s and "-41%" in s
    assert not re.search(r"https?://|<script", s)
    assert s == tornado_svg(_u(ROWS, TIED))


def test_bar_ends_sit_where_the_gains_say():
    s = tornado_svg(_u(ROWS[:1], TIED))
    rects = [
        tuple(map(float, m)) for m in re.findall(r'<rect x="([\d.]+)" y="\d+" width="([\d.]+)"', s)
    ]
    (a1, w1), (a2, w2) = rects[:2]
    # both bars start or end on the median gain's line; the P90 bar (-41%) is the longer, by
    # (0.74 - 0.41) / (0.74 - 0.13) of... each length is its distance from -74% on one scale
    assert w2 / w1 == pytest.approx((0.74 - 0.41) / (0.74 - 0.13), rel=0.02)
    assert a1 == pytest.approx(a2, abs=0.11)


def test_nothing_to_draw_and_the_section_carries_it():
    assert tornado_svg(_u([], TIED)) == ""
    parts = section_parts(_u(ROWS, TIED))
    torn = next(p for p in parts if p[0] == "tornado")
    assert torn[5] == tornado_svg(_u(ROWS, TIED))
