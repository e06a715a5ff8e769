"""The held-out error band through `perf --format json`: carried with its note, `null` without
the file, a malformed file a one-line error (reading it: tests/unit/calibration/test_error_band.py)."""

from __future__ import annotations

import json

import pytest

from pdd_plan.cli.main import app
from pdd_plan.inputs import error_band
from tests.cli_helpers import runner
from tests.unit.calibration.test_error_band import BAND, _write  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


PERF = ["perf", "-m", "llama-3.1-8b", "-g", "h100", "--phase", "decode", "-L", "2048", "-B", "8"]


@pytest.mark.integration
def test_perf_json_carries_the_band(tmp_path, monkeypatch):
    p = _write(tmp_path, BAND)
    monkeypatch.setattr(error_band, "band_path", lambda: p)
    r = runner().invoke(app, [*PERF, "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["error_band"]["family"] == "dense" and d["error_band"]["max_abs_error"] == 0.22
    assert d["error_band"]["basis"] == "leave-one-source-out"
    r = runner().invoke(app, PERF)
    assert r.exit_code == 0 and "error band" in r.stdout and "median 7%" in r.stdout


@pytest.mark.integration
def test_perf_json_without_a_band_file_says_null(tmp_path, monkeypatch):
    monkeypatch.setattr(error_band, "band_path", lambda: tmp_path / "absent.yaml")
    r = runner().invoke(app, [*PERF, "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["error_band"] is None and "not there" in d["error_band_note"]


@pytest.mark.integration
def test_perf_with_a_broken_band_file_is_one_line(tmp_path, monkeypatch):
    p = _write(tmp_path, {"families": {"moe": {"median": 0.1}}})
    monkeypatch.setattr(error_band, "band_path", lambda: p)
    r = runner().invoke(
        app, ["perf", "-m", "deepseek-v3", "-g", "h200", "--phase", "decode", "-L", "4096"]
    )
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "error_band.yaml" in lines[0] and "moe.max" in lines[0]
