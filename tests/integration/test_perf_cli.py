"""`pdd-plan perf`, `calibrate` and `import-hf` through the CLI: JSON and tables, and bad
input as one line (the models: tests/unit/perf/test_perf.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from pdd_plan.calibration import fit
from pdd_plan.inputs.schema import ModelProfile
from pdd_plan.perf import layers
from tests.cli_helpers import invoke
from tests.unit.perf.test_perf import CSV, HF  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


@pytest.mark.integration
def test_import_hf_command(tmp_path):
    out = tmp_path / "q.yaml"
    r = invoke("profiles", "import-hf", HF / "Qwen3-32B.json", "--name", "q", "--out", out)
    assert r.exit_code == 0, r.output
    prof = ModelProfile.model_validate(yaml.safe_load(out.read_text()))
    assert layers.kv_bytes_per_token(prof) == 262_144
    assert [p.name for p in tmp_path.iterdir()] == ["q.yaml"]  # no temporary left behind
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"architectures": ["MambaForCausalLM"]}))
    r = invoke("profiles", "import-hf", bad, "--name", "x")
    assert r.exit_code == 2 and "unsupported architecture" in r.stderr


@pytest.mark.integration
@pytest.mark.parametrize("phase", ["prefill", "decode", "extend", "offline"])
def test_perf_command_json(phase):
    r = invoke(
        "perf", "--model", "llama-3.1-8b", "--gpu", "h100", "--phase", phase,
        "--input-tokens", 2048, "--output-tokens", 256, "--batch", 4, "--format", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("latency_s", "throughput_tokens_per_s", "batch", "bound", "kv_capacity_tokens"):
        assert k in d
    assert d["mode"] == "calibrated" and d["bound"] in ("compute", "memory", "communication")
    assert d["latency_s"] > 0 and d["throughput_tokens_per_s"] > 0
    assert set(d["breakdown_s"]) == {"compute", "memory", "exposed_communication", "overhead"}
    if phase != "offline":  # the breakdown adds up to the pass time
        assert sum(d["breakdown_s"].values()) == pytest.approx(d["latency_s"])


@pytest.mark.integration
def test_perf_command_table_and_moe_defaults():
    r = invoke("perf", "-m", "deepseek-v3", "-g", "h200", "--phase", "decode", "-L", 4096, "-B", 64)
    assert r.exit_code == 0, r.output
    assert "communication" in r.stdout and "overhead" in r.stdout
    r = invoke(
        "perf", "-m", "deepseek-v3", "-g", "h200", "--gpus", 8, "--dp-attention",
        "--phase", "decode", "-L", 4096, "-f", "json",
    )  # fmt: skip
    d = json.loads(r.stdout)["instance"]
    assert (d["tp"], d["ep"], d["dp"]) == (8, 8, 8)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-m", "llama-3.1-7b", "-g", "h100"], "unknown model"),
        (["-m", "llama-3.1-8b", "-g", "h1000"], "unknown GPU"),
        (["-m", "llama-3.1-70b", "-g", "h100", "--gpus", 3], "does not divide"),
        (["-m", "llama-3.1-70b", "-g", "h100", "--gpus", 1], "does not fit"),
        (["-m", "llama-3.1-8b", "-g", "h100", "--dtype", "int4"], "dtype"),
        (["-m", "llama-3.1-8b", "-g", "h100", "-B", 100000], "KV"),
        (["-m", "llama-3.1-8b", "-g", "h100", "--kv-dtype", "fp4"], "field '--kv-dtype'"),
    ],
)
def test_perf_command_bad_input(args, needle):
    r = invoke("perf", *args, "--phase", "decode", "--input-tokens", 4096)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


@pytest.mark.integration
def test_calibrate_command_writes_yaml(tmp_path):
    r = invoke("calibrate", CSV, "--gpu", "h200", "--write", "--out-dir", tmp_path, "-f", "json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res[0]["gpu"] == "h200"
    assert res[0]["median_abs_error_calibrated"] < res[0]["median_abs_error_analytic"]
    data = yaml.safe_load((tmp_path / "h200.yaml").read_text())
    cf = fit.CalibrationFile.model_validate(data)
    assert cf.fit["rows"][:4] == [5, 6, 7, 8] and "jointly" in cf.efficiency.source
    assert cf.moe is not None and cf.moe.mfu < cf.efficiency.mfu  # MoE below dense
    # tolerance: 1e-4: the calibration file stores the factors to 4 decimals
    assert np.isclose(cf.efficiency.mfu, res[0]["factors"]["mfu"], atol=1e-4)
    r = invoke("calibrate", CSV, "--gpu", "l40s")
    assert r.exit_code == 2 and "no rows" in r.stderr
