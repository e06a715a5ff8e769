"""Bad input never reaches the user as a traceback: one `error:` line naming the file and the
field, exit code 2 for bad input, 1 for an SLA no hardware meets, 0 for valid files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pdd_plan.inputs.profiles import data_dir
from tests.cli_helpers import invoke

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pdd-paper.yaml"


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def write(tmp_path: Path, data: dict | str, name: str = "scenario.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return p


def one_error_line(result, code: int) -> str:
    """The command exited with `code` and said exactly one `error:` line on stderr."""
    detail = f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.exit_code == code, detail
    # A SystemExit from typer.Exit is expected; any other exception escaped the CLI's guard.
    assert result.exception is None or isinstance(result.exception, SystemExit), detail
    assert "Traceback" not in result.output, detail
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, detail
    assert lines[0].startswith("error: "), detail
    return lines[0]


# ------------------------------------------------------------------ bad input: exit 2


def test_yaml_syntax_error(tmp_path):
    p = write(tmp_path, "name: x\nmodel: [deepseek-v4-pro\nsla: {}\n")
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg
    assert "YAML syntax error" in msg
    assert "line " in msg  # the position of the problem


def test_unknown_key_suggests_closest(tmp_path):
    d = example()
    d["workload"]["rate_rpss"] = d["workload"].pop("rate_rps")
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg
    assert "workload.rate_rpss" in msg
    assert "unknown key" in msg
    assert "did you mean 'rate_rps'" in msg


def test_unknown_top_level_key_lists_or_suggests(tmp_path):
    d = example()
    d["slaa"] = d.pop("sla")
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert "'slaa'" in msg and "did you mean 'sla'" in msg


def test_wrong_type(tmp_path):
    d = example()
    d["workload"]["rate_rps"] = "fast"
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "workload.rate_rps" in msg
    assert "'fast'" in msg  # says what it got


@pytest.mark.parametrize("rate", [-5, 0, -0.001])
def test_non_positive_rate(tmp_path, rate):
    d = example()
    d["workload"]["rate_rps"] = rate
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "workload.rate_rps" in msg
    assert "greater than 0" in msg


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("workload", "rate_rps"), ".inf"),
        (("prices", "h200"), ".inf"),
        (("sla", "tpot_ms"), ".nan"),
    ],
)
def test_non_finite_numbers_are_input_errors(tmp_path, path, value):
    # regression: .inf / .nan used to pass the schema and crash deep in the optimizer (exit 3)
    d = example()
    d[path[0]][path[1]] = 1.0
    text = yaml.safe_dump(d, sort_keys=False).replace(f"{path[1]}: 1.0", f"{path[1]}: {value}")
    p = write(tmp_path, text)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and ".".join(path) in msg
    assert "finite" in msg


def test_absurd_token_count_is_an_input_error(tmp_path):
    # regression: 1e12 input tokens made the prefill chunk loop run for hours
    d = example()
    d["workload"]["input_tokens"] = {"fixed": 1e12}
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "workload.input_tokens" in msg and "10,000,000" in msg


def test_negative_seed(tmp_path):
    # regression: numpy's generator raised ValueError (exit 3, 'internal')
    d = example()
    d["seed"] = -5
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "field 'seed'" in msg


def test_histogram_shares_not_summing_to_one(tmp_path):
    d = example()
    d["workload"]["prefix_hit"]["histogram"][-1][2] = 0.80  # shares now sum to 0.95
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "workload.prefix_hit" in msg
    assert "0.95" in msg and "sum to 1" in msg


def test_unknown_gpu_suggests_closest(tmp_path):
    d = example()
    d["datacenters"][0]["gpus"] = {"h1000": 512}
    d["prices"] = {"h200": 3.1}
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "datacenters[0].gpus.h1000" in msg
    assert "unknown GPU 'h1000'" in msg and "did you mean 'h100'" in msg


def test_unknown_model(tmp_path):
    d = example()
    d["model"] = "deepseek-v9-pro"
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "field 'model'" in msg
    assert "unknown model 'deepseek-v9-pro'" in msg and "did you mean" in msg


def test_unknown_line_sku(tmp_path):
    d = example()
    d["link"]["candidates"] = ["eth-10g", "eth-11g"]
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "link.candidates[1]" in msg
    assert "unknown line SKU 'eth-11g'" in msg


def test_missing_file(tmp_path):
    p = tmp_path / "nope.yaml"
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "file not found" in msg


def test_directory_instead_of_file(tmp_path):
    msg = one_error_line(invoke("optimize", str(tmp_path)), 2)
    assert str(tmp_path) in msg and "directory" in msg


def test_top_level_not_a_mapping(tmp_path):
    p = write(tmp_path, "- just\n- a list\n")
    msg = one_error_line(invoke("optimize", str(p)), 2)
    assert str(p) in msg and "mapping" in msg


def test_unknown_format():
    msg = one_error_line(invoke("optimize", str(EXAMPLE), "--format", "xml"), 2)
    assert "--format" in msg and "xml" in msg


def test_validate_reports_the_same_errors(tmp_path):
    d = example()
    d["workload"]["rate_rps"] = -1
    p = write(tmp_path, d)
    msg = one_error_line(invoke("validate", str(p)), 2)
    assert str(p) in msg and "workload.rate_rps" in msg


# ------------------------------------------------------------------ infeasible SLA: exit 1


def test_sla_no_hardware_meets(tmp_path):
    d = example()
    d["sla"]["ttft_p90_s"] = 0.01
    d["sla"]["ttft_p99_s"] = 0.01
    p = write(tmp_path, d)
    msg = one_error_line(invoke("optimize", str(p), "--format", "json"), 1)
    assert "TTFT" in msg
    assert "0.01" in msg  # the SLA value it could not meet


# ------------------------------------------------------------------ valid input: exit 0


def test_absurd_price_still_plans(tmp_path):
    # regression: a $1e9/GPU-h price rounded every BCR to 0.0 and the comparison divided by it
    d = example()
    d["workload"]["rate_rps"] = 10
    d["prices"]["h100"] = 1e9
    p = write(tmp_path, d)
    r = invoke("optimize", str(p), "--format", "json")
    assert r.exit_code == 0, r.output
    assert r.stderr == ""


def test_tiny_rate_routes_every_request(tmp_path):
    # regression: with req/s flow variables the MILP lost ~1 % of the demand at 1e-4 req/s
    # (under HiGHS's absolute tolerance); flows are now shares of the fixed rate
    d = example()
    d["workload"]["rate_rps"] = 1e-4
    p = write(tmp_path, d)
    # --draws 0: the regression is the MILP's routing; the draws re-evaluate the finished plan
    r = invoke("optimize", str(p), "--format", "json", "--no-verify", "--draws", "0")
    assert r.exit_code == 0, r.output
    for name, plan in json.loads(r.stdout)["plans"].items():
        # tolerance: 2e-4: each of the 3 route shares is rounded to 4 decimals in the plan (up to
        # 1.5e-4 in their sum)
        assert sum(plan["route_share"].values()) == pytest.approx(1.0, abs=2e-4), name


def test_tinier_rate_is_no_internal_error(tmp_path):
    # regression: at 1e-6 req/s no flow was left and pipeline.ttft_quantiles crashed (exit 3)
    d = example()
    d["workload"]["rate_rps"] = 1e-6
    p = write(tmp_path, d)
    r = invoke("optimize", str(p), "--format", "json", "--no-verify")
    assert r.exit_code in (0, 1, 2), r.output


def test_validate_example_scenario():
    r = invoke("validate", str(EXAMPLE))
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    assert "valid Scenario" in r.stdout


@pytest.mark.parametrize(
    ("kind", "name", "schema"),
    [
        ("gpus", "h100", "GPUProfile"),
        ("models", "llama-3.1-8b", "ModelProfile"),
        ("lines", "eth-10g", "LineSKU"),
    ],
)
def test_validate_profiles(kind, name, schema):
    p = data_dir() / "profiles" / kind / f"{name}.yaml"
    r = invoke("validate", str(p))
    assert r.exit_code == 0, r.output
    assert f"valid {schema}" in r.stdout


def test_validate_bad_gpu_profile(tmp_path):
    g = yaml.safe_load((data_dir() / "profiles" / "gpus" / "h100.yaml").read_text())
    g["efficiency"]["mfu"] = 1.5
    p = write(tmp_path, g, "gpu.yaml")
    msg = one_error_line(invoke("validate", str(p)), 2)
    assert str(p) in msg and "efficiency.mfu" in msg


# ------------------------------------------------------------------ the real console script


def _console_script() -> list[str]:
    exe = shutil.which("pdd-plan") or str(Path(sys.executable).parent / "pdd-plan")
    if not Path(exe).exists():
        pytest.skip("pdd-plan console script is not installed")
    return [exe]


@pytest.mark.parametrize("case", ["unknown_key", "missing_file"])
def test_console_script_stderr_has_no_traceback(tmp_path, case):
    if case == "unknown_key":
        d = example()
        d["workload"]["rate_rpss"] = d["workload"].pop("rate_rps")
        p = write(tmp_path, d)
    else:
        p = tmp_path / "missing.yaml"
    env = {**os.environ, "COLUMNS": "200"}
    r = subprocess.run(
        [*_console_script(), "optimize", str(p)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert str(p) in lines[0]


@pytest.mark.parametrize("command", ["optimize", "evaluate"])
def test_negative_tail_requests_is_one_line(command):
    golden = Path(__file__).resolve().parents[1] / "golden" / "pdd-paper.optimize.yaml"
    target = str(golden if command == "evaluate" else EXAMPLE)
    msg = one_error_line(invoke(command, target, "--tail-requests", "-5"), 2)
    assert "--tail-requests" in msg and "-5" in msg
