"""`pdd-plan report`: tables in three formats, and one self-contained, deterministic HTML page
with at least five embedded plots that opens offline."""

from __future__ import annotations

import base64
import copy
import io
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from pdd_plan.cli.common import dumps
from pdd_plan.outputs.plan import parse_plan
from pdd_plan.report import plots
from pdd_plan.report.inputs_section import dist_text
from pdd_plan.report.render import markdown
from pdd_plan.report.sections import build_report, cost_breakdown
from pdd_plan.report.table import render_plan
from tests.cli_helpers import err_line, invoke

pytestmark = pytest.mark.integration

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def plan(example_plan) -> dict:
    return example_plan  # conftest.py: optimize --no-verify on the default scenario


@pytest.fixture(scope="module")
def verified(plan) -> dict:
    """The plan with a `simulated` block shaped like optimize's verification (numbers made up
    from the analytic ones: the report only reads the dict)."""
    p = copy.deepcopy(plan)
    for a in p["plans"].values():
        ln = a.get("line")
        a["simulated"] = {
            "ttft_s": {k: v * 0.9 for k, v in a["ttft_s"].items()} | {"mean": 0.4},
            "tpot_ms": {"p50": 20.0, "p90": 21.0, "p99": 22.0, "mean": 20.0},
            "kv_transfer_s": {"p50": 0.01, "p90": 0.02, "p99": 0.05, "mean": 0.015},
            "line_utilization": (ln["utilization"] * 1.01) if ln else None,
            "route_share": a["route_share"],
            "rld_token_share": 0.0,
            "goodput_rps": a["goodput_rps"],
            "requests": 2000,
            "sla_met": True,
            "checks": {"ttft_p90": {"simulated": 1.0, "target": 10.0, "ok": True}},
            "rounds": [
                {
                    "round": 0,
                    "caps": {"prefill": 0.97, "line": 0.95, "decode": 0.9, "line_delay": 1.0},
                    "sla_met": True,
                    "bottleneck": None,
                }
            ],
        }
    return p


@pytest.fixture(scope="module")
def plan_file(verified, tmp_path_factory) -> Path:
    f = tmp_path_factory.mktemp("plan") / "plan.yaml"
    f.write_text(dumps(verified, "yaml"))
    return f


@pytest.fixture(scope="module")
def html_page(plan_file, tmp_path_factory, serial_regime_map) -> str:
    out = tmp_path_factory.mktemp("html") / "report.html"
    with serial_regime_map():  # conftest.py; the rerun below draws the map on a process pool
        r = invoke("report", plan_file, "--html", out, "--sim-requests", "1500", "-f", "json")
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8")


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.imgs: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.links: list[tuple[str, dict]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag in ("link", "script", "iframe", "source", "video", "audio") or (
            tag == "a" and not a.get("href", "#").startswith("#")
        ):
            self.links.append((tag, a))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parse(text: str) -> Page:
    p = Page()
    p.feed(text)
    p.close()
    return p


# ------------------------------------------------------------------ HTML
def test_html_is_offline_and_self_contained(html_page) -> None:
    assert not re.search(r"https?://", html_page, re.I)
    assert "//" not in re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html_page)
    p = _parse(html_page)
    assert p.links == []  # no external CSS, scripts, fonts or links
    assert "<style>" in html_page


def test_html_has_five_plots_and_plan_tables(html_page, verified) -> None:
    p = _parse(html_page)
    pngs = [s for s in p.imgs if s.startswith("data:image/png;base64,")]
    assert len(pngs) >= 5 and len(pngs) == len(p.imgs)
    for s in pngs:
        data = base64.b64decode(s.split(",", 1)[1], validate=True)
        assert data.startswith(PNG)
        assert b"tIME" not in data and b"tEXt" not in data and b"iTXt" not in data
    for fig in ("ttft_cdf", "prefix_hit", "bathtub", "cost", "line_utilization"):
        assert f'id="fig-{fig}"' in html_page
    heads = [t[0] for t in p.tables]
    assert len(p.tables) >= 6
    fleet = next(t for t in p.tables if t[0][:2] == ["arch", "role"])
    rows = {(r[0], r[1]) for r in fleet[1:]}
    for a, plan in verified["plans"].items():
        for i in plan["instances"]:
            assert (a, i["role"]) in rows
    costs = next(t for t in p.tables if "total $/h" in t[0])
    col = costs[0].index("total $/h")
    totals = {r[0]: r[col] for r in costs[1:]}
    assert totals == {a: f"{pl['cost_per_hour']:,.2f}" for a, pl in verified["plans"].items()}
    assert any(h[:2] == ["item", "value"] for h in heads)  # inputs recap
    lat = next(t for t in p.tables if "simulated p50" in t[0])
    assert any(r[1] == "TTFT s" and r[5] != "-" for r in lat[1:])
    assert any("binding constraints" in h for t in p.tables for h in t[0])


def test_html_is_deterministic_and_plots_folder(plan_file, html_page, tmp_path) -> None:
    out = tmp_path / "again.html"
    png = tmp_path / "png"
    r = invoke(
        "report", plan_file, "--html", out, "--plots", png, "--sim-requests", "1500", "-f", "json"
    )
    assert r.exit_code == 0, r.output
    # byte-identical rerun, its regime map on the report's process pool (the first: serial)
    assert out.read_text(encoding="utf-8") == html_page
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temporary files
    names = sorted(os.listdir(png))
    assert {
        "ttft_cdf.png",
        "prefix_hit.png",
        "bathtub.png",
        "cost.png",
        "line_utilization.png",
    } <= set(names)
    embedded = set(re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html_page))
    for n in names:
        data = (png / n).read_bytes()
        assert data.startswith(PNG) and base64.b64encode(data).decode() in embedded


def test_unverified_plan_report_replays(unverified_html) -> None:
    # conftest.py: `report --html` of the unverified default plan (shared with test_regimes.py)
    text = unverified_html.html
    assert "report replay" in text and "--no-verify" in text
    assert len(re.findall(r'src="data:image/png;base64,', text)) >= 5


# ------------------------------------------------------------------ tables, json, markdown
def test_report_sections_and_formats(plan_file, verified) -> None:
    r = invoke("report", plan_file, "-f", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    keys = [s["key"] for s in d["sections"]]
    assert keys[:5] == ["fleet", "costs", "latency", "routing", "constraints"]
    assert keys[-1] == "inputs"  # what the plans answer, after them
    for s in d["sections"]:
        assert all(len(row) == len(s["columns"]) for row in s["rows"])
    r = invoke("report", plan_file, "-f", "markdown")
    assert r.exit_code == 0 and "## Costs" in r.stdout and "| arch |" in r.stdout
    r = invoke("report", plan_file)
    assert r.exit_code == 0 and "Binding constraints" in r.stdout


def test_report_model(verified) -> None:
    rep = build_report(parse_plan(verified))
    lat = rep.section("latency")
    row = next(r for r in lat.rows if r[0] == "pdd" and r[1] == "TTFT s")
    a = verified["plans"]["pdd"]
    assert (
        row[2] == f"{a['ttft_s']['p50']:,.3f}"
        and row[5] == f"{a['simulated']['ttft_s']['p50']:,.3f}"
    )
    typed = parse_plan(verified)
    c = cost_breakdown(typed.plans["pdd"])
    assert abs(sum(c.values()) - a["cost_per_hour"]) < 0.05
    assert "line" in c and "line" not in cost_breakdown(typed.plans["idc_pd"])
    md = markdown(rep)
    assert md.count("## ") == len(rep.sections)
    assert dist_text({"fixed": 65536.0}) == "fixed 65,536"
    assert dist_text({"histogram": [[0.0, 0.5, 1.0]]}, pct=True) == "histogram 0%-50%: 100%"


def test_infeasible_architecture_is_reported(verified) -> None:
    p = copy.deepcopy(verified)
    del p["plans"]["cdc_pd"]
    p["infeasible"] = {
        "cdc_pd": {"reasons": [{"kind": "sla", "message": "TTFT P99 misses the SLA over the line"}]}
    }
    rep = build_report(parse_plan(p))
    assert any("cdc_pd: infeasible" in s for s in rep.summary)
    rows = rep.section("constraints").rows
    assert any(r[0] == "cdc_pd" and "infeasible" in r[1] for r in rows)
    assert all(r[0] != "cdc_pd" for r in rep.section("costs").rows)


def test_existing_renderers_still_work(plan) -> None:
    buf = io.StringIO()
    render_plan(parse_plan(plan), Console(file=buf, width=150))
    assert "fleet" in buf.getvalue()
    res = {
        "points": [
            {"hit_rate": x / 10, "miss_tokens_per_s": 10.0 - x, "revenue_per_s": 10.0 - x / 2}
            for x in range(10)
        ],
        "hit_price_ratio": 0.1,
        "valley": {"hit_rate": 0.5, "revenue_drop": 0.1},
        "model": "m",
        "instance": "i",
        "input_tokens": 1000,
    }
    a, b = plots.bathtub_png(res), plots.bathtub_png(res)
    assert a.startswith(PNG) and a == b


def test_report_bad_input(plan_file, tmp_path) -> None:
    notplan = tmp_path / "n.yaml"
    notplan.write_text("- 1\n- 2\n")
    cases = [
        ((tmp_path / "missing.yaml",), "file not found"),
        ((notplan,), "not a plan file"),
        ((plan_file, "-f", "yaml"), "unknown format 'yaml'"),
        ((plan_file, "--html", tmp_path / "no" / "r.html"), "folder does not exist"),
        ((plan_file, "--html", tmp_path), "is a folder"),
        ((plan_file, "--sim-requests", "5", "--html", tmp_path / "r.html"), "--sim-requests"),
        ((plan_file, "--plots", plan_file), "not a folder"),
    ]
    for args, needle in cases:
        r = invoke("report", *args)
        assert r.exit_code == 2, (args, r.output)
        assert needle in err_line(r), (needle, r.output)
