"""The PDD report's experiment (studies/pdd-report/) stays runnable, and its one calibrated
number, the fleet's `speed_factor`, does what it says: every pass 1/k as long, the same in
the analytic search and the replays, bounded, and IDC-PD's goodput at the file's value
within a stated tolerance of the report's 9.0 req/s."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import sys
from pathlib import Path

import pytest
import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.evaluate import Options, analytic, evaluate
from pdd_plan.evaluate.fleet import deployed, from_scenario, instance
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.schema import Scenario
from pdd_plan.inputs.schema.io import parse, read_yaml
from pdd_plan.perf import roofline

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "studies" / "pdd-report"
SCENARIO = STUDY / "pdd-report.yaml"
REPORT_IDC_RPS = 9.0
# Tolerance on the calibrated goodput: the simulator verifies rates on a grid of 2% steps
# (evaluate's --step) and the bisection stops within 0.5% of the target, so 3% holds it.
TOL = 0.03
# the calibration's own replay length (evaluate's default, 5,000): at 1,000 requests the
# calibrated IDC-PD fleet reads 9.54 req/s under perf v4 (the short replay's early window is
# lighter than the steady state), so the figure is checked where it was fitted
SMALL = Options()


def _load(path: Path = SCENARIO, archs: list[str] | None = None):
    sc = load_scenario(path)
    if archs is not None:
        sc = sc.model_copy(update={"architectures": archs})
    return from_scenario(build_context(sc, str(path)))


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, STUDY / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # a dataclass in the script looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_study_files_validate_and_share_one_speed_factor():
    ctx, fleets = _load()
    assert set(fleets) == {"pdd", "cdc_pd", "idc_pd"}
    speeds = {fs.speed_factor for fs in fleets.values()}
    assert len(speeds) == 1, "one engine ran both fleets: one speed factor"
    (k,) = speeds
    assert 0.1 < k < 2.0 and k != 1.0  # calibrated, inside the script's bracket
    # the readings the file states: 48 H100 + 32 H200 against 96 H100, instances of 16
    gpus = {
        a: sum(g.count * g.gpus_per_instance for g in fs.instances + fs.unused)
        for a, fs in fleets.items()
    }
    assert gpus == {"pdd": 80, "cdc_pd": 80, "idc_pd": 96}
    assert fleets["pdd"].line is not None and fleets["pdd"].line.count == 1
    # the line's price is the report's ~0.3 GPU-A hour
    assert fleets["pdd"].line.cost_per_hour == pytest.approx(0.3 * 2.5, rel=0.01)


def test_calibrated_idc_goodput_matches_the_report():
    ctx, fleets = _load(archs=["idc_pd"])
    out = evaluate(ctx, fleets, SMALL).as_dict()
    g = out["architectures"]["idc_pd"]["goodput_rps"]
    assert abs(g / REPORT_IDC_RPS - 1) <= TOL, g
    assert out["architectures"]["idc_pd"]["fleet"]["speed_factor"] == fleets["idc_pd"].speed_factor


def test_evaluate_runs_on_every_architecture():
    ctx, fleets = _load()
    out = evaluate(ctx, fleets, Options(simulate=False)).as_dict()
    assert set(out["architectures"]) == {"pdd", "cdc_pd", "idc_pd"}, out["infeasible"]
    a = out["architectures"]
    # PDD may always send every request P -> MD: never below CDC-PD on the same fleet, up to
    # the bisection's tolerance (each goodput is found to within rel_tol below its true value,
    # and PDD's bracket starts higher when decode binds: its rate bound counts relay decode)
    tol = inspect.signature(analytic.search).parameters["rel_tol"].default
    assert a["pdd"]["goodput_rps"] >= a["cdc_pd"]["goodput_rps"] * (1 - tol)


def test_speed_factor_scales_every_pass_exactly():
    ctx, fleets = _load(archs=["idc_pd"])
    fs = fleets["idc_pd"]
    g = fs.instances[0]
    prof = ctx.profiles
    base = instance(deployed(prof, 1.0), ctx.file, g, "x")
    for k in (0.5, 1.7):
        fast = instance(deployed(prof, k), ctx.file, g, "x")
        for t in (
            lambda i: roofline.decode_step(i, 1, 65536).total_s,
            lambda i: roofline.decode_step(i, 48, 60000).total_s,
            lambda i: roofline.prefill_time(i, 65536).total_s,
            lambda i: roofline.prefill_time(i, 3000, 62536).total_s,
        ):
            assert t(fast) == pytest.approx(t(base) / k, rel=1e-9)
        assert fast.kv_pool_bytes == base.kv_pool_bytes  # memory sizes do not move
    assert deployed(prof, 1.0) is prof


def test_speed_factor_moves_goodput_the_right_way():
    ctx, fleets = _load(archs=["idc_pd"])
    fs = fleets["idc_pd"]
    got = []
    for k in (0.4, 0.8, 1.6):
        out = evaluate(
            ctx, {"idc_pd": dataclasses.replace(fs, speed_factor=k)}, Options(False)
        ).as_dict()
        got.append(out["architectures"]["idc_pd"]["goodput_rps"])
    assert got[0] < got[1] < got[2]


@pytest.mark.parametrize("bad", [0, -1, 0.001, 11, "fast"])
def test_bad_speed_factor_is_a_one_line_error(bad):
    data = read_yaml(str(SCENARIO))
    data["fleet"]["idc_pd"]["speed_factor"] = bad
    with pytest.raises(InputError) as e:
        parse(Scenario, data, str(SCENARIO))
    assert "speed_factor" in e.value.field
    assert "\n" not in str(e.value)


def test_calibration_script_finds_the_files_value(monkeypatch):
    """The bisection, with its evaluation replaced by a known increasing curve, lands on the
    curve's root, and the file's recorded value is what the real bisection gives (within one
    bracket width: the test does not rerun the ~12 evaluations)."""
    cal = _script("calibrate_speed")
    monkeypatch.setattr(cal, "idc_goodput", lambda path, s, opt: 14.5 * s**1.4)
    s, g, tried = cal.calibrate(SCENARIO, SMALL, log=lambda *_: None)
    # tolerance: 0.5%: the bisection's stopping bracket (see the docstring), not a model error
    assert g == pytest.approx(9.0, rel=0.005)
    assert s == pytest.approx((9.0 / 14.5) ** (1 / 1.4), rel=0.005)
    monkeypatch.undo()
    real = cal.idc_goodput(SCENARIO, _load()[1]["idc_pd"].speed_factor, SMALL)
    assert abs(real / REPORT_IDC_RPS - 1) <= TOL


def test_write_speed_keeps_comments(tmp_path):
    cal = _script("calibrate_speed")
    p = tmp_path / "s.yaml"
    p.write_text(SCENARIO.read_text())
    cal.write_speed(p, 0.5)
    text = p.read_text()
    assert text.count("speed_factor: 0.500") == 2
    assert text.splitlines()[0] == SCENARIO.read_text().splitlines()[0]


# ------------------------------------------------------------- the reproduction's own figures

DOC = ROOT / "docs" / "reproduction.md"
FIGURES = STUDY / "reproduction.json"
PDD_PLAN_KEYS = {
    "ttft_p90_change_pct",
    "ttft_p99_change_pct",
    "rld_token_share_pct",
    "bcr_gain_pct",
    "goodput_gain_pct",
    "cost_change_pct",
    "kv_transfer_p50_s",
    "kv_transfer_p99_s",
    "cdc_ttft_p50_s",
    "extend_ms",
}


def test_docs_reproduction_is_what_the_script_writes():
    """docs/reproduction.md is `reproduce.py --doc`'s rendering of reproduction.json: a hand
    edit of either fails here (the slow test below reruns the study against the JSON)."""
    rep = _script("reproduce")
    figs = json.loads(FIGURES.read_text())
    assert DOC.read_text() == rep.doc.document(figs), (
        "docs/reproduction.md drifted: python studies/pdd-report/reproduce.py --doc "
        "docs/reproduction.md"
    )
    assert PDD_PLAN_KEYS <= set(figs["pdd_plan"])
    assert all("infeasible" in r for r in figs["architectures"].values())


@pytest.mark.slow
def test_reproduction_figures_do_not_drift():
    """The study, rerun as the document was written (its requests, seed and calibrations),
    gives the stored figures exactly: the simulator and the planner are deterministic."""
    rep = _script("reproduce")
    stored = json.loads(FIGURES.read_text())
    got = json.loads(json.dumps(rep.slim(rep.study(SCENARIO, stored["evaluate"]["sim_requests"]))))
    got["scenario"] = stored["scenario"] = ""
    assert got == stored, "rerun: python studies/pdd-report/reproduce.py --doc docs/reproduction.md"


def test_an_architecture_with_no_sla_goodput_is_a_result(tmp_path):
    """One transfer at 0.2 Gb/s (0.05 Gb/s x 4 lanes): CDC-PD meets the SLA at no rate. The
    study says so, gives its percentiles at the compared load, and keeps every JSON key."""
    rep = _script("reproduce")
    data = read_yaml(str(SCENARIO))
    data["link"]["candidates"][0]["per_connection_gbps"] = 0.05
    p = tmp_path / "slow-line.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    s = rep.study(p, 300, fit_line=False)
    cdc = s["architectures"]["cdc_pd"]
    assert cdc["infeasible"] and cdc["goodput_rps"] is None and cdc["reasons"]
    t = cdc["ttft_s_at_compared_load"]
    sla = data["sla"]  # it misses the SLA at PDD's load, as the analytic search said
    assert t["p90"] > sla["ttft_p90_s"] or t["p99"] > sla["ttft_p99_s"], t
    assert not s["architectures"]["pdd"]["infeasible"]
    assert PDD_PLAN_KEYS <= set(s["pdd_plan"])
    text = rep.printout(s)
    assert "cdc_pd: no SLA goodput" in text
    assert "Architectures with no SLA goodput" in rep.doc.document(rep.slim(s))


def test_line_step_says_when_the_line_is_not_calibrated(tmp_path):
    ls = _script("repro_line_step")
    got = ls.calibrate(tmp_path)
    if ls.available():
        assert got.profile is not None and got.profile.exists(), got.message
        assert got.fitted["gbps"] == 10.0
        beside = yaml.safe_load(got.beside.read_text())
        assert beside["gbps"] == 100.0 and {**beside, "gbps": 10.0} == got.fitted
    else:
        assert got.profile is None and got.message.startswith("NOT CALIBRATED")
