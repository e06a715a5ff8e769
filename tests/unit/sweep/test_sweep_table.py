"""`sweep`'s table fits the terminal as one table: the grid keys, the architecture and each
row's answer (status, cost, goodput, BCR, Pareto star) always, the other columns while they
fit unwrapped, and a line naming what was left out and how to get it (--columns, --format
csv). tests/data/sweep-rates-lines.json: `sweep --vary workload.rate_rps=20:60:20 --vary
link.max_lines=1:2:1 -f json` on the default scenario (6 points, 18 rows)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from rich.console import Console

from pdd_plan.cli.sweep_table import OPTIONAL, choose, sweep_table
from tests.cli_helpers import invoke

ROOT = Path(__file__).resolve().parents[3]
RESULT = json.loads((ROOT / "tests" / "data" / "sweep-rates-lines.json").read_text())


def _table(result: dict, width: int, columns=None) -> str:
    c = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    sweep_table(result, c, columns)
    return c.export_text()


@pytest.mark.unit
@pytest.mark.parametrize("width", [80, 100, 140, 200])
def test_one_table_no_wider_than_the_terminal(width):
    text = _table(RESULT, width)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= width, text
    assert text.count("sweep deepseek-v4-pro-agentic-64k: 6 points") == 1, text  # one title
    rows = [ln for ln in lines if ln.startswith("│")]
    assert len(rows) == 18, text  # every point x architecture, one line each
    for head in ("rate_rps", "max_lines", "arch", "status", "$/h", "BCR", "*"):
        assert head in text, head
    # every row's cost and BCR, as the JSON has them
    for p in RESULT["points"]:
        for r in p["architectures"].values():
            assert f"{r['cost_per_hour']:,.2f}" in text and f"{r['bcr']:,.1f}" in text


@pytest.mark.unit
def test_columns_are_added_while_they_fit_and_the_rest_are_named():
    shown80, left80 = choose(RESULT, 80)
    shown200, left200 = choose(RESULT, 200)
    assert left200 == [] and set(OPTIONAL) <= set(shown200)
    assert left80 and set(left80) <= set(OPTIONAL)
    assert len(shown80) < len(shown200)
    # widening never drops a column (monotone in the width)
    prev = set(shown80)
    for w in range(80, 201, 10):
        cur = set(choose(RESULT, w)[0])
        assert prev <= cur, (w, prev - cur)
        prev = cur
    text = " ".join(_table(RESULT, 80).split())
    assert f"--columns {','.join(left80)}" in text and "--format csv has every field" in text
    assert "rate_rps = workload.rate_rps" in text  # the short key header, spelled out


@pytest.mark.unit
def test_asked_columns_are_shown():
    shown, left = choose(RESULT, 80, ["line"])
    assert "line" in shown and "line" not in left
    assert "1x eth-10g" in _table(RESULT, 200, ["line"])


@pytest.mark.unit
def test_the_replay_verdict_is_in_the_status_of_a_verified_sweep():
    res = copy.deepcopy(RESULT)
    res["verify"] = True
    for p in res["points"]:
        for a, r in p["architectures"].items():
            r["sim_sla_met"] = a != "cdc_pd"
    text = _table(res, 80)
    rows = [ln for ln in text.splitlines() if ln.startswith("│")]
    assert len(rows) == 18 and max(len(ln) for ln in text.splitlines()) <= 80, text
    assert all(("missed" in ln) == ("cdc_pd" in ln) for ln in rows), text
    assert "met the SLA in the replay" in " ".join(text.split())


@pytest.mark.unit
def test_bad_columns_is_one_line_before_any_point():
    r = invoke("sweep", "--vary", "workload.rate_rps=20:40:20", "--columns", "cost2")
    assert r.exit_code == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "--columns" in lines[0] and "cost2" in lines[0], r.stderr
