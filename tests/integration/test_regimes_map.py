"""The regime map drawn end to end: its cells agree with `optimize` at the same points, the
CLI writes JSON/CSV/PNG, the report shows it (unit side: tests/unit/sweep/test_regimes.py)."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest

from pdd_plan.architectures import LINE_BASELINE, LOCAL_BASELINE, RELAY_ARCH
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import parse, read_yaml
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.sweep.regimes.axes import (
    RegimeAxis,
)
from pdd_plan.sweep.regimes.grid import GAIN_LINE, GAIN_LOCAL, regime_map
from tests.unit.sweep.test_regimes import EXAMPLE, Y, invoke  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


PNG = b"\x89PNG\r\n\x1a\n"


# the rate one transfer gets: slow (0.1 Gb/s: relay decode is what makes the SLA feasible), about
# the default's shared line (0.2) and fast (0.5); a small rate and a larger one
X = RegimeAxis("transfer_gbps", (0.1, 0.2, 0.5))


@pytest.fixture(scope="module")
def small_map() -> dict:
    return regime_map(read_yaml(EXAMPLE), EXAMPLE, X, Y, executor="serial")


# ------------------------------------------------------------------------------ the map
def _by_hand(gbps: float, rate: float) -> dict:
    """The scenario at one cell, written without the regimes code: every candidate's one
    transfer at `gbps`, the rate set."""
    d = copy.deepcopy(read_yaml(EXAMPLE))
    d["workload"]["rate_rps"] = rate
    d["link"]["transfer_gbps"] = gbps
    return d


@pytest.mark.integration
@pytest.mark.parametrize("ix, iy", [(0, 0), (1, 1), (2, 1)])
def test_cells_agree_with_optimize_at_the_same_points(small_map, ix, iy) -> None:
    cell = small_map["cells"][iy * len(X.values) + ix]
    assert (cell["x"], cell["y"]) == (X.values[ix], Y.values[iy])
    plan = optimize(
        build_context(parse(Scenario, _by_hand(cell["x"], cell["y"]), EXAMPLE), EXAMPLE), False
    )
    for a in (RELAY_ARCH, LINE_BASELINE, LOCAL_BASELINE):
        row = cell["architectures"][a]
        assert (row["status"] == "ok") == (a in plan.plans), a
        if a in plan.plans:
            p = plan.plans[a]
            assert row["bcr"] == p.bcr and row["cost_per_hour"] == p.cost_per_hour, a
            assert row["route_p_rld_md"] == p.route_share.p_rld_md, a
    assert cell[GAIN_LINE] == plan.comparison.bcr_gain_vs_cdc_pd
    assert cell[GAIN_LOCAL] == plan.comparison.bcr_gain_vs_idc_pd
    if RELAY_ARCH in plan.plans:
        p = plan.plans[RELAY_ARCH]
        assert cell["rld_token_share"] == p.rld_token_share
        share = p.route_share.p_rld_md + p.route_share.p_rld
        # tolerance: 1e-4: the plan's route shares are rounded to 4 decimals
        assert cell["relay_request_share"] == pytest.approx(share, abs=1e-4)


@pytest.mark.integration
def test_pdd_bcr_is_never_below_cdc_pd(small_map) -> None:
    """PDD may send every request P->MD, which is CDC-PD's plan: wherever CDC-PD has a plan,
    PDD has one at least as good."""
    for c in small_map["cells"]:
        cdc, pdd = c["architectures"][LINE_BASELINE], c["architectures"][RELAY_ARCH]
        if cdc["status"] == "ok":
            assert pdd["status"] == "ok", (c["x"], c["y"])
            assert pdd["bcr"] >= cdc["bcr"], (c["x"], c["y"])
            assert c["regime"] in ("same", "relay_pays")
    assert small_map["counts"]["pdd_worse"] == 0
    # 0.1 Gb/s a transfer: CDC-PD cannot meet the P99, PDD relays its low-hit requests
    first = small_map["cells"][0]
    assert first["regime"] == "pdd_only" and first["relay_request_share"] > 0


# ------------------------------------------------------------------------------ command line
@pytest.mark.integration
def test_cli_writes_json_csv_png(small_map, tmp_path) -> None:
    j, c, p = tmp_path / "m.json", tmp_path / "m.csv", tmp_path / "m.png"
    args = ["--x", "transfer_gbps=0.1,0.2,0.5", "--y", "rate_rps=2:10:8", "--executor", "serial"]
    r = invoke(*args, "--json", j, "--csv", c, "--png", p, "-f", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(j.read_text())
    assert data == json.loads(r.stdout)
    assert data["cells"] == small_map["cells"]  # the CLI's map is the library's
    rows = list(csv.DictReader(io.StringIO(c.read_text())))
    assert len(rows) == 6 and rows[0]["transfer_gbps"] == "0.1" and rows[0]["rate_rps"] == "2"
    assert rows[0]["regime"] == data["cells"][0]["regime"]
    assert float(rows[5]["pdd_bcr"]) == data["cells"][5]["architectures"][RELAY_ARCH]["bcr"]
    assert p.read_bytes().startswith(PNG)
    assert not [n for n in tmp_path.iterdir() if n.name.startswith(".")]  # atomic writes
    table = invoke(*args).stdout
    assert "rate one transfer gets (Gb/s)" in table and "only" in table


# ------------------------------------------------------------------------------ report --html
@pytest.mark.integration
def test_report_html_has_the_small_map(unverified_html) -> None:
    # conftest.py: `report --html --plots` of the unverified default plan (shared with
    # test_report.py)
    html, pngs = unverified_html.html, unverified_html.plots
    assert 'id="fig-regimes"' in html and "5x5 map around this scenario" in html
    assert "without verification" in html and "(25 Gb/s of line, 40 req/s)" in html
    assert (pngs / "regimes.png").read_bytes().startswith(PNG)
