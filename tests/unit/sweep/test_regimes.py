"""`pdd-plan regimes`: the axes' readings against hand arithmetic and the bundled line prices,
cells equal to `optimize` run by hand at the same points, PDD's BCR never below CDC-PD's,
bad axes as one-line errors, the JSON / CSV / PNG outputs, and the report's small map."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.cli.main import app
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import parse, read_yaml
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.latency.line import transfer
from pdd_plan.sweep.regimes.around import axes_around
from pdd_plan.sweep.regimes.axes import (
    LOW_HIT_BELOW,
    RegimeAxis,
    apply_axes,
    line_price_per_month,
    low_hit_histogram,
)
from pdd_plan.sweep.regimes.grid import regime_map
from tests.cli_helpers import err_line, runner

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = str(ROOT / "examples" / "pdd-paper.yaml")
Y = RegimeAxis("rate_rps", (2, 10))


def invoke(*args: str):
    return runner().invoke(app, ["regimes", *map(str, args)])


# ------------------------------------------------------------------------------ axis readings
@pytest.mark.unit
@pytest.mark.parametrize("name", ["eth-10g", "eth-20g", "eth-25g", "eth-40g", "eth-100g"])
def test_line_price_matches_the_bundled_profiles(name) -> None:
    """The interpolation the eth-20g profile's source explains reproduces every metro-lit
    profile's monthly price (20/25/40 G are themselves that interpolation, 10/100 G the ends)."""
    sku = profiles.line(name)
    assert line_price_per_month(sku.gbps) == sku.cost_per_month


@pytest.mark.unit
def test_line_price_hand_arithmetic() -> None:
    assert line_price_per_month(4) == 4 * 275  # below 10 G: the 10 G $/Gbps
    assert line_price_per_month(55) == round((275 - 45 * 175 / 90) * 55)  # 187.5 $/Gbps
    assert line_price_per_month(400) == 40_000  # above 100 G: $100/Gbps, as eth-400g


@pytest.mark.unit
def test_low_hit_share_rescales_each_side_keeping_its_shape() -> None:
    bins = [[0.0, 0.2, 0.05], [0.2, 0.6, 0.04], [0.6, 0.95, 0.06], [0.95, 1.0, 0.85]]
    out = low_hit_histogram(bins, 0.30)  # low side 0.15 -> 0.30: x2; high 0.85 -> 0.70
    assert [b[2] for b in out] == pytest.approx([0.10, 0.08, 0.12, 0.70])
    assert sum(b[2] for b in out if b[1] <= LOW_HIT_BELOW) == pytest.approx(0.30)
    data = apply_axes(read_yaml(EXAMPLE), [RegimeAxis("low_hit_share", (0.3,))], [0.3], EXAMPLE)
    parse(Scenario, data, EXAMPLE)  # shares still sum to 1


@pytest.mark.unit
def test_line_axis_is_one_line_and_price_axis_prices_every_candidate() -> None:
    base = read_yaml(EXAMPLE)
    d = apply_axes(
        base,
        [RegimeAxis("line_price", (50,)), RegimeAxis("line_gbps", (20,))],
        [50, 20],
        EXAMPLE,
    )
    # line_gbps applies first whatever the order given; line_price then prices its one line
    assert d["link"]["max_lines"] == 1
    assert [(c["gbps"], c["cost_per_month"]) for c in d["link"]["candidates"]] == [(20.0, 1000.0)]
    d = apply_axes(base, [RegimeAxis("line_price", (50,))], [50], EXAMPLE)
    costs = {c["name"]: c["cost_per_month"] for c in d["link"]["candidates"]}
    assert costs == {"shared-10g": 500, "shared-25g": 1250, "shared-40g": 2000, "shared-100g": 5000}
    assert base["link"]["candidates"][0] == "shared-10g"  # the input is not modified
    # each priced line keeps its profile's per-transfer behaviour (loss, slow start, ...)
    sku = build_context(parse(Scenario, d, EXAMPLE), EXAMPLE).lines[0]
    shared = profiles.line("shared-10g")
    assert (sku.loss_rate, sku.slow_start) == (shared.loss_rate, shared.slow_start)
    assert sku.cost_per_month == 500


@pytest.mark.unit
def test_transfer_axis_sets_the_rate_one_transfer_gets() -> None:
    """transfer_gbps 0.4: every candidate's one transfer moves 0.4 Gb/s of goodput (k = 4
    connections at 0.4 / 4 / 0.9 Gb/s of line rate each, times 0.9 efficiency, less the 24 B
    header per 1 MiB slice), the lines' capacity kept."""
    d = apply_axes(read_yaml(EXAMPLE), [RegimeAxis("transfer_gbps", (0.4,))], [0.4], EXAMPLE)
    ctx = build_context(parse(Scenario, d, EXAMPLE), EXAMPLE)
    for sku in ctx.lines:
        line = transfer.LineConfig(sku, 1)
        assert line.flow_cap_bytes_s * 8 / 1e9 == pytest.approx(0.4 * 1048576 / (1048576 + 24))
        assert sku.gbps == profiles.line(sku.name).gbps


@pytest.mark.unit
def test_axes_around_the_default_point() -> None:
    x, y = axes_around(20.0, 40.0)
    assert x.values == (5, 10, 20, 40, 80) and y.values == (20, 30, 40, 50, 60)


@pytest.mark.unit
@pytest.mark.parametrize(
    "args, field",
    [
        (["--x", "nosuch=1:2:1"], "--x nosuch"),
        (["--x", "line_gbs=1,2"], "--x line_gbs"),  # did you mean line_gbps
        (["--x", "line_gbps=abc"], "--x line_gbps"),
        (["--x", "line_gbps=10:1:1"], "--x line_gbps"),
        (["--x", "line_gbps=0,10"], "--x line_gbps"),
        (["--x", "line_gbps"], "--x"),
        (["--y", "low_hit_share=0.2,1.5"], "--y low_hit_share"),
        (["--x", "rate_rps=1,2"], "--y rate_rps"),  # the same axis twice
        (["--y", "model=nosuch-model"], "--y model"),
        (["--x", "rtt_ms=-1,5"], "--x rtt_ms"),
        (["--png", "map.txt"], "--png"),
        (["--format", "yaml"], "--format"),
    ],
)
def test_bad_axis_is_one_line(args, field, tmp_path) -> None:
    args = [tmp_path / a if a.endswith(".txt") else a for a in args]
    r = invoke("--executor", "serial", *args)
    assert r.exit_code == 2
    assert f"field '{field}'" in err_line(r)


@pytest.mark.unit
def test_low_hit_axis_needs_a_histogram(tmp_path) -> None:
    d = read_yaml(EXAMPLE)
    d["workload"]["prefix_hit"] = {"fixed": 0.9}
    with pytest.raises(InputError, match="not a histogram"):
        regime_map(d, EXAMPLE, RegimeAxis("low_hit_share", (0.1,)), Y, executor="serial")
