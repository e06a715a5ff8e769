"""What a regime map's cell holds besides the architectures' rows: the keys of PDD's BCR
gains and the regime labels. Apart from the grid that computes them, so what reads or draws a
map (the plot, the CSV, the report) does not import the optimizer."""

from __future__ import annotations

from pdd_plan.architectures import LINE_BASELINE, LOCAL_BASELINE, RELAY_ARCH

ARCHS = (RELAY_ARCH, LINE_BASELINE, LOCAL_BASELINE)
GAIN_LINE = f"bcr_gain_vs_{LINE_BASELINE}"
GAIN_LOCAL = f"bcr_gain_vs_{LOCAL_BASELINE}"
# regime of a cell, PDD against CDC-PD (the baseline that crosses the same line)
REGIMES = {
    "relay_pays": "PDD has the higher BCR (its relay paths are used)",
    "pdd_only": "PDD has a plan, CDC-PD has none",
    "same": "same BCR: PDD's best plan sends every request P->MD",
    "pdd_worse": "PDD's BCR below CDC-PD's (must not happen: PDD may route as CDC-PD does)",
    "no_pdd": "PDD has no plan",
}
