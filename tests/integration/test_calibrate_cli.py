"""`pdd-plan calibrate` on engine result files and CSVs, together and from every format,
and its one-line errors (the readers' unit tests: tests/unit/calibration/test_engine_results.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pdd_plan.calibration import fit
from tests.cli_helpers import invoke
from tests.unit.calibration.test_engine_results import CSV, SGL, TRT, TRT_TXT, VLLM  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


DATA = Path(__file__).resolve().parents[1] / "data" / "engine_results"


@pytest.mark.integration
def test_calibrate_from_every_format(tmp_path):
    r = invoke(
        "calibrate", "--from", TRT, TRT_TXT, VLLM, "--from", SGL, "--model", "llama-3.1-8b",
        "--gpu", "h100", "--gpus", 1, "--write", "--out-dir", tmp_path, "-f", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    (res,) = json.loads(r.stdout)
    assert res["gpu"] == "h100" and res["rows"] == [1, 2, 3, 4, 5]
    assert "offered load" in r.stderr  # the 4 req/s SGLang run, left out, said so
    data = yaml.safe_load((tmp_path / "h100.yaml").read_text())
    cf = fit.CalibrationFile.model_validate(data)
    assert "sglang_bench_serving.jsonl" in cf.efficiency.source
    assert "trtllm_bench_report.json" in cf.efficiency.source


@pytest.mark.integration
def test_calibrate_csv_and_engine_files_together():
    r = invoke("calibrate", CSV, "--from", TRT, "--gpu", "h100", "-f", "json")
    assert r.exit_code == 0, r.output
    (res,) = json.loads(r.stdout)
    # the CSV's predicted H100 rows, then the report, numbered in reading order
    csv_rows = fit.read_measurements(CSV)
    h100 = [m.row for m in csv_rows if m.gpu == "h100"]
    assert len(res["rows"]) == len(h100) + 1
    assert res["rows"] == sorted(res["rows"]) and res["rows"][-1] == len(csv_rows) + 1


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            [SGL, "--gpu", "h100", "--gpus", 1],
            ["sglang_bench_serving.jsonl", "'--model'", "name the model"],
        ),
        ([SGL, "--model", "llama-3.1-8b", "--gpus", 1], ["'--gpu'", "name the GPU"]),
        ([SGL, "--model", "llama-3.1-8b", "--gpu", "h100"], ["'--gpus'", "GPU count"]),
        ([TRT, "--tp", 2], ["trtllm_bench_report.json", "'--tp'"]),
        ([TRT, "--gpu", "h1000"], ["unknown GPU"]),
        ([TRT, "--dtype", "int4"], ["'--dtype'"]),
        ([DATA / "README.md"], ["README.md", "not JSON"]),
    ],
)
def test_calibrate_from_bad_input_is_one_line(args, needles):
    r = invoke("calibrate", "--from", *args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0]


@pytest.mark.integration
def test_calibrate_needs_a_file():
    r = invoke("calibrate")
    assert r.exit_code == 2 and "no measurements given" in r.stderr
