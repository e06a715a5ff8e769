"""A calibration fit says how many measurements it had for how many parameters, and warns when
a fitted factor ends on its bound; `calibrate --write` checks every target before it fits."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pdd_plan.calibration import fit, joint
from pdd_plan.calibration.joint_report import at_bound_warnings, fit_summary, n_parameters
from tests.cli_helpers import invoke

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
CSV = ROOT / "pdd_plan" / "data" / "calibration" / "calibration_measurements.csv"
SGLANG = ROOT / "tests" / "data" / "engine_results" / "sglang_bench_serving.jsonl"


def _rows(gpu: str) -> list:
    return [r for r in fit.read_measurements(CSV) if r.gpu == gpu]


def _joint(rows: list) -> joint.JointFit:
    return joint.fit_joint(rows, {g: fit.analytic_gpu(g) for g in {r.gpu for r in rows}})


def test_the_summary_counts_rows_and_parameters():
    rows = _rows("h100")[:2] + _rows("h200")[:1]
    jf = _joint(rows)
    # 3 factors for each of 2 GPUs, 3 for the population mean and its balance slope, 2 MoE
    # shifts (mfu, mbu)
    assert n_parameters(jf) == 3 * 3 + 1 + 2
    text = fit_summary(jf, "h100")
    assert text.startswith("2 measurement(s) on h100 in a joint fit of 3 rows on 2 GPU(s)")
    assert "for 12 parameters" in text


def test_an_impossible_throughput_warns_that_a_factor_sits_on_its_bound():
    rows = _rows("h100")
    assert not at_bound_warnings(_joint(rows), "h100")  # the published rows fit inside
    big = [replace(r, value=r.value * 1000) for r in rows]
    warns = at_bound_warnings(_joint(big), "h100")
    assert warns and all("bound" in w and "check the measured" in w for w in warns)


def test_calibrate_from_says_so_on_stderr_and_in_json(tmp_path):
    rec = json.loads(SGLANG.read_text().splitlines()[0])
    f = tmp_path / "big.jsonl"
    f.write_text(json.dumps({**rec, "output_throughput": 1e12}) + "\n")
    args = ("calibrate", "--from", str(f), "-m", "llama-3.1-8b", "-g", "h100", "--gpus", "1")
    r = invoke(*args, "-f", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)[0]
    assert out["fit"].startswith("1 measurement(s) on h100 in a joint fit of 1 rows")
    assert out["warnings"]
    assert "joint fit" in r.stderr and "warning:" in r.stderr


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
