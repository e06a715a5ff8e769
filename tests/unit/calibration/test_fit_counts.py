"""A fit of one GPU frees no more factors than it has measurements, says how many it had for
how many factors and which it held, and warns when a factor ends on its bound."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pdd_plan.calibration import fit
from tests.cli_helpers import invoke

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
CSV = ROOT / "pdd_plan" / "data" / "calibration" / "calibration_measurements.csv"
SGLANG = ROOT / "tests" / "data" / "engine_results" / "sglang_bench_serving.jsonl"


def _rows(gpu: str) -> list:
    return [r for r in fit.read_measurements(CSV) if r.gpu == gpu]


def test_fewer_rows_than_factors_hold_the_rest_at_their_priors():
    rows = _rows("h100")
    prior = fit.analytic_gpu("h100").efficiency
    for n in (1, 2, 3):
        res = fit.fit(rows[:n], fit.analytic_gpu("h100"))
        assert len(res.free) == n and len(res.fixed) == 4 - n
        for k in res.fixed:  # held exactly where the analytic profile has them
            assert res.factors[k] == getattr(prior, k), k
        assert res.summary.startswith(f"{n} measurement(s) for {n} free factor(s)")
        assert all(k in res.summary for k in res.fixed)


def test_four_rows_or_more_fit_all_four_as_before():
    res = fit.fit(_rows("h100"), fit.analytic_gpu("h100"))
    assert res.free == fit.FACTORS and res.fixed == () and res.at_bound == ()
    # the shipped h100 calibration is this fit, rounded as calibration_yaml rounds it
    shipped = {"mfu": 0.5663, "mbu": 0.8594, "step_overhead_ms": 0.851}
    for k, v in shipped.items():
        assert round(res.factors[k], 4 if k != "step_overhead_ms" else 3) == v


def test_the_free_factor_is_the_one_the_row_moves_most():
    rows = _rows("h100")[:1]
    res = fit.fit(rows, fit.analytic_gpu("h100"))
    g = fit.analytic_gpu("h100")
    base = fit.predict(rows[0], g)
    moved = {}
    for k in fit.FACTORS:
        v = getattr(g.efficiency, k)
        step = max(0.05 * abs(v), 0.05 * float(fit.X_SCALE[fit.FACTORS.index(k)]))
        lo, hi = fit.BOUNDS[k]
        x = v + step if v + step <= hi else v - step
        moved[k] = abs(fit.predict(rows[0], fit.with_efficiency(g, **{k: x})) / base - 1)
    assert res.free == (max(moved, key=moved.get),)


def test_an_impossible_throughput_warns_that_the_factor_sits_on_its_bound():
    rows = _rows("h100")
    big = [replace(r, value=r.value * 1000) for r in rows]
    res = fit.fit(big, fit.analytic_gpu("h100"))
    assert res.at_bound and res.warnings
    assert all("bound" in w and "check the measured" in w for w in res.warnings)
    assert "warning:" in fit.calibration_yaml(res, "m.csv", "2026-01-01")


def test_calibrate_from_says_so_on_stderr_and_in_json(tmp_path):
    rec = json.loads(SGLANG.read_text().splitlines()[0])
    f = tmp_path / "big.jsonl"
    f.write_text(json.dumps({**rec, "output_throughput": 1e12}) + "\n")
    args = ("calibrate", "--from", str(f), "-m", "llama-3.1-8b", "-g", "h100", "--gpus", "1")
    r = invoke(*args, "-f", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)[0]
    assert out["fit"].startswith("1 measurement(s) for 1 free factor(s)")
    assert len(out["fixed_factors"]) == 3 and out["warnings"]
    assert "held at their priors" in r.stderr and "warning:" in r.stderr


def test_write_without_out_dir_names_out_dir_and_writes_nothing(tmp_path):
    args = ("calibrate", "--from", str(SGLANG), "-m", "llama-3.1-8b", "-g", "h100", "--gpus", "1")
    shipped = (ROOT / "pdd_plan" / "data" / "calibration" / "h100.yaml").read_bytes()
    r = invoke(*args, "--write")
    assert r.exit_code == 2 and "--out-dir" in r.stderr, r.output
    assert (ROOT / "pdd_plan" / "data" / "calibration" / "h100.yaml").read_bytes() == shipped
    r = invoke(*args, "--out-dir", str(tmp_path))  # --out-dir alone writes (implies --write)
    assert r.exit_code == 0 and (tmp_path / "h100.yaml").is_file(), r.output
    r = invoke(*args, "--out-dir", str(tmp_path / "missing"))
    assert r.exit_code == 2 and "--out-dir" in r.stderr
