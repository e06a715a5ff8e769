"""`pdd-plan simulate`: JSON output, byte-identical reruns, plan files, records, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pdd_plan.cli.sim import LazyProgress
from tests.cli_helpers import err_line, invoke

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pdd-paper.yaml"
AZURE = ROOT / "traces" / "azure2023_conv.csv"


@pytest.fixture(scope="module")
def plan_file() -> Path:
    """The default scenario's verified plan: its golden snapshot, byte for byte what
    `optimize examples/pdd-paper.yaml -f yaml` prints (tests/golden/make.py wrote it,
    test_golden.py checks it); simulate only reads it."""
    return ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"


def test_json_has_the_issue_fields() -> None:
    r = invoke("simulate", str(EXAMPLE), "-n", "3000", "-f", "json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    for key in ("ttft_s", "tpot_ms", "kv_transfer_s"):
        assert set(s[key]) >= {"p50", "p90", "p99"}
    for key in ("line_utilization", "route_share", "rld_token_share", "goodput_rps"):
        assert key in s
    assert s["requests"] == 3000 and s["architecture"] == "pdd"
    assert set(s["route_share"]) == {"p_md", "p_rld_md", "p_rld"}


def test_same_seed_same_bytes() -> None:
    args = ("simulate", str(EXAMPLE), "-n", "3000", "-f", "json", "--seed", "7")
    a, b = invoke(*args), invoke(*args)
    assert a.exit_code == 0 and a.stdout.encode() == b.stdout.encode()
    c = invoke("simulate", str(EXAMPLE), "-n", "3000", "-f", "json", "--seed", "8")
    assert c.stdout != a.stdout


def test_same_bytes_across_processes(plan_file: Path) -> None:
    code = "import sys; from pdd_plan.cli import main; sys.argv[0] = 'pdd-plan'; main()"
    args = ["simulate", str(plan_file), "-n", "2000", "-a", "cdc_pd", "-f", "json"]
    outs = [
        subprocess.run([sys.executable, "-c", code, *args], capture_output=True, check=True).stdout
        for _ in range(2)
    ]
    assert outs[0] == outs[1] and json.loads(outs[0])["architecture"] == "cdc_pd"


def test_plan_file_and_records(plan_file: Path, tmp_path: Path) -> None:
    rec = tmp_path / "records.csv"
    r = invoke("simulate", str(plan_file), "-a", "idc_pd", "-n", "1500", "--records", str(rec))
    assert r.exit_code == 0, r.output
    assert "TTFT" in r.stdout and "SLA goodput" in r.stdout
    lines = rec.read_text().splitlines()
    assert len(lines) == 1501 and lines[0].startswith("request,arrival_s,")
    assert not list(tmp_path.glob(".records.csv.*"))  # no temporary left behind


def test_trace_option_replays_the_trace(tmp_path: Path) -> None:
    r = invoke("simulate", str(EXAMPLE), "--trace", str(AZURE), "-n", "800", "-f", "json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["workload"].endswith("azure2023_conv.csv") and s["requests"] == 800


@pytest.mark.parametrize(
    "args, where",
    [
        (("-a", "pd"), "--architecture"),
        (("-n", "0"), "--requests"),
        (("--trace", "/nonexistent/t.jsonl"), "trace file not found"),
        (("--records", "/nonexistent/dir/r.csv"), "folder does not exist"),
        (("--records", "/tmp/r.parquet"), "pyarrow"),
        (("-f", "xml"), "--format"),
    ],
)
def test_bad_options_are_one_line(args, where: str) -> None:
    if "pyarrow" in where:
        pytest.importorskip("pandas")
        try:
            import pyarrow  # noqa: F401

            pytest.skip("pyarrow installed")
        except ImportError:
            pass
    r = invoke("simulate", str(EXAMPLE), "-n", "100", *args)
    assert r.exit_code == 2
    assert where in err_line(r)


def test_bad_files_are_one_line(plan_file: Path, tmp_path: Path) -> None:
    r = invoke("simulate", str(tmp_path / "missing.yaml"))
    assert r.exit_code == 2 and "file not found" in err_line(r)
    data = yaml.safe_load(plan_file.read_text())
    only = {**data, "plans": {"pdd": data["plans"]["pdd"]}}
    p = tmp_path / "only-pdd.yaml"
    p.write_text(yaml.safe_dump(only))
    r = invoke("simulate", str(p), "-a", "idc_pd", "-n", "100")
    assert r.exit_code == 2 and "no 'idc_pd'" in err_line(r)
    bad = {**data}
    bad["plans"] = {"pdd": {**data["plans"]["pdd"]}}
    bad["plans"]["pdd"]["instances"] = [
        {**bad["plans"]["pdd"]["instances"][0], "gpu": "b200"}
    ] + bad["plans"]["pdd"]["instances"][1:]
    p.write_text(yaml.safe_dump(bad))
    r = invoke("simulate", str(p), "-n", "100")
    assert r.exit_code == 2 and "b200" in err_line(r)
    inputs = {**data, "inputs": {**data["inputs"], "sla": {"ttft_p90_s": -1}}}
    p.write_text(yaml.safe_dump(inputs))
    r = invoke("simulate", str(p), "-n", "100")
    assert r.exit_code == 2 and "sla" in err_line(r)


def test_progress_bar_is_lazy_and_quiet_off_a_terminal() -> None:
    off = LazyProgress(enabled=False)
    off("prefill", 1, 10)
    assert off.bar is None
    on = LazyProgress(enabled=True)
    on("prefill", 1, 10)
    assert on.bar is None  # nothing during the first ~2 s
    on.t0 = time.perf_counter() - 3.0
    on("prefill", 5, 10)
    on("line", 1, 10)
    assert on.bar is not None and set(on.tasks) == {"prefill", "line"}
    on.close()
    assert on.bar is None
