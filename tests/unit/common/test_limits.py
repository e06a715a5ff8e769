"""Every size a user controls is bounded before work (issue 11, "Hangs and memory").

Each test asserts the one-line error (exit 2) naming the field or flag, the limit and how to
raise it, not a duration: before these checks the same inputs hung or ran out of memory.
"""

from __future__ import annotations

import copy
import re
import socket
import struct
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from pdd_plan.cli.main import app
from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema import Scenario
from pdd_plan.inputs.schema.io import parse
from pdd_plan.outputs.plan import parse_plan
from tests.cli_helpers import runner

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "pdd_plan" / "data" / "examples" / "pdd-paper.yaml"
TINY = ROOT / "benchmarks" / "scenarios" / "tiny.yaml"
PLAN = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"


def _one_line_error(args: list[str], *words: str) -> str:
    r = runner().invoke(app, args)
    text = (r.stderr if hasattr(r, "stderr") else r.output).strip()
    assert r.exit_code == 2, (r.exit_code, text)
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    assert text.startswith("error: "), text
    for w in words:
        assert w in text, (w, text)
    return text


def _scenario(**edits) -> dict:
    d = yaml.safe_load(EXAMPLE.read_text())
    for path, v in edits.items():
        node = d
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
        node[keys[-1]] = v
    return d


def _parse_error(d: dict) -> str:
    with pytest.raises(InputError) as e:
        parse(Scenario, d, "s.yaml")
    return str(e.value)


# ------------------------------------------------------------------------------ the table
@pytest.mark.unit
def test_docs_list_every_limit_with_its_default_and_variable():
    text = (ROOT / "docs" / "scenario.md").read_text()
    for lim in limits.LIMITS.values():
        row = re.search(rf"^\|\s*`{lim.env}`\s*\|\s*([\d,]+)\s*\|", text, re.M)
        assert row, f"docs/scenario.md's limit table lacks {lim.env}"
        assert int(row.group(1).replace(",", "")) == lim.default, lim.env


@pytest.mark.unit
def test_environment_raises_a_limit_and_a_bad_value_is_named(monkeypatch):
    assert limits.value("REQUESTS") == 10_000_000
    monkeypatch.setenv("PDD_PLAN_MAX_REQUESTS", "50")
    assert limits.value("REQUESTS") == 50
    parse(Scenario, _scenario(workload__samples=50), "s.yaml")
    assert "limit of 50" in _parse_error(_scenario(workload__samples=51))
    monkeypatch.setenv("PDD_PLAN_MAX_REQUESTS", "lots")
    with pytest.raises(InputError, match="PDD_PLAN_MAX_REQUESTS.*not a positive integer"):
        limits.value("REQUESTS")


# ------------------------------------------------------------------------------ scenario keys
@pytest.mark.unit
@pytest.mark.parametrize(
    "edits, field, env",
    [
        ({"link__max_lines": 100000}, "link.max_lines", "PDD_PLAN_MAX_LINES"),
        ({"workload__samples": 2_000_000_000}, "workload.samples", "PDD_PLAN_MAX_REQUESTS"),
        ({"workload__classes": 100_000}, "workload.classes", "PDD_PLAN_MAX_CLASSES"),
        ({"workload__input_tokens": {"fixed": 1e15}}, "workload.input_tokens", "MAX_TOKENS"),
        ({"datacenters__0__gpus": {"h100": 10**9}}, "gpus", "PDD_PLAN_MAX_GPUS"),
        ({"search__max_prefill_extra": 10**9}, "search.max_prefill_extra", "SEARCH_STEPS"),
        ({"search__parallelisms": 10**5}, "search.parallelisms", "SEARCH_STEPS"),
        (
            {"search__utilization_levels": [i / 1000 for i in range(1, 500)]},
            "search.utilization_levels",
            "PDD_PLAN_MAX_SEARCH_STEPS",
        ),
        ({"link__candidates": ["eth-10g"] * 40}, "link.candidates", "LINE_CANDIDATES"),
    ],
)
def test_scenario_sizes_over_their_limit_are_one_line_errors(edits, field, env):
    msg = _parse_error(_scenario(**edits))
    assert field in msg and "over the limit" in msg and env in msg, msg


@pytest.mark.unit
def test_an_instance_over_the_plan_files_gpu_limit_is_a_one_line_error():
    msg = _parse_error(_scenario(search__max_gpus_per_instance=10**9))
    assert "search.max_gpus_per_instance" in msg and "4096" in msg, msg


@pytest.mark.unit
def test_max_lines_at_the_limit_is_accepted():
    sc = parse(Scenario, _scenario(link__max_lines=limits.value("LINES")), "s.yaml")
    assert sc.link is not None and sc.link.max_lines == 16


# ------------------------------------------------------------------------------ perf / bathtub
PERF = ["perf", "-m", "llama-3.1-8b", "-g", "h100", "-f", "json"]


@pytest.mark.unit
def test_perf_huge_batch_refused_before_allocating():
    tracemalloc.start()
    try:
        _one_line_error(
            [*PERF, "--phase", "decode", "-L", "4096", "--batch", "1000000000"],
            "--batch",
            "PDD_PLAN_MAX_BATCH",
        )
        # under the batch limit but over the KV pool: refused before the decode step is built
        _one_line_error(
            [*PERF, "--phase", "decode", "-L", "4096", "--batch", "900000"], "--batch", "KV"
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200e6, f"{peak / 1e6:.0f} MB allocated on the way to the error"


@pytest.mark.unit
def test_perf_prefill_passes_bounded():
    _one_line_error(
        [*PERF, "--phase", "prefill", "-L", "10000000", "--chunk", "1"],
        "--chunk",
        "prefill passes",
        "use --chunk >= 500",
        "PDD_PLAN_MAX_PREFILL_PASSES",
    )
    _one_line_error(
        [*PERF, "--phase", "prefill", "-L", str(10**15)], "--input-tokens", "PDD_PLAN_MAX_TOKENS"
    )


@pytest.mark.unit
def test_bathtub_passes_bounded():
    from pdd_plan.perf.bathtub import prefill_passes

    # hand count: L=100, chunk 10: new tokens 100, 99, ..., 1 over hit rates 0.00..0.99
    assert prefill_passes(100, 10) == sum(-(-n // 10) for n in range(1, 101))
    _one_line_error(
        ["bathtub", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-tokens", "10000000"],
        "--chunk",
        "PDD_PLAN_MAX_PREFILL_PASSES",
    )


# ------------------------------------------------------------------------------ requests
@pytest.mark.unit
def test_request_counts_bounded():
    _one_line_error(
        ["simulate", str(PLAN), "--requests", "2000000000"], "--requests", "PDD_PLAN_MAX_REQUESTS"
    )
    _one_line_error(
        ["optimize", str(TINY), "--sim-requests", "2000000000"],
        "--sim-requests",
        "PDD_PLAN_MAX_REQUESTS",
    )


# ------------------------------------------------------------------------------ plans
def _plan_data() -> dict:
    return yaml.safe_load(PLAN.read_text())


@pytest.mark.unit
def test_plan_fleet_over_the_instance_limit_refused():
    d = _plan_data()
    parse_plan(copy.deepcopy(d), "p.yaml")  # the golden plan itself is fine
    for g in d["plans"]["pdd"]["instances"]:
        g["count"] = 9_000  # each group under the per-group bound, the fleet over the total
    with pytest.raises(InputError) as e:
        parse_plan(d, "p.yaml")
    msg = str(e.value)
    assert "plans.pdd" in msg and "PDD_PLAN_MAX_PLAN_INSTANCES" in msg, msg


@pytest.mark.unit
def test_plan_line_count_over_the_limit_refused():
    d = _plan_data()
    d["plans"]["pdd"]["line"]["count"] = 1000
    with pytest.raises(InputError, match="PDD_PLAN_MAX_LINES"):
        parse_plan(d, "p.yaml")


# ------------------------------------------------------------------------------ traces
@pytest.mark.unit
def test_trace_token_counts_bounded(tmp_path):
    from pdd_plan.workload.traces import read_trace

    p = tmp_path / "t.csv"
    p.write_text("arrival_s,input_tokens,output_tokens\n0,100,10\n1,1000000000000000,10\n")
    with pytest.raises(InputError) as e:
        read_trace(p)
    msg = str(e.value)
    assert "line 3 input_tokens" in msg and "PDD_PLAN_MAX_TOKENS" in msg, msg


# ------------------------------------------------------------------------------ sweep
@pytest.mark.unit
def test_sweep_grid_bounded():
    _one_line_error(
        ["sweep", str(EXAMPLE), "--vary", "workload.rate_rps=1:9999:1"],
        "--vary workload.rate_rps",
        "9,999 points",
        "PDD_PLAN_MAX_SWEEP_POINTS",
    )


# ------------------------------------------------------------------------------ time limit
@pytest.mark.unit
def test_deadline_nests_and_expires():
    with limits.deadline(60.0, "f", "outer") as outer:
        with limits.deadline(1e-6, "f", "inner") as inner:
            assert inner is outer  # the enclosing deadline stands
        assert limits.solver_seconds(30.0) <= 30.0
    assert limits.solver_seconds(30.0) == 30.0  # none set: the MILP's own limit
    with limits.deadline(1e-6, "s.yaml", "the pdd search"):
        time.sleep(0.01)
        with pytest.raises(InputError, match=r"search.time_limit_s.*the pdd search ran past"):
            limits.solver_seconds(30.0)


@pytest.mark.unit
def test_optimizer_stops_at_its_time_limit(tmp_path):
    d = yaml.safe_load(TINY.read_text())
    d.setdefault("search", {})["time_limit_s"] = 1e-6
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    _one_line_error(["optimize", str(p), "--no-verify"], "search.time_limit_s", "ran past")


# ------------------------------------------------------------------------------ dask
def _server(reply: bytes | None) -> tuple[socket.socket, str]:
    """A plain TCP server on a free port: sends `reply` to each client (None: stays silent)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            if reply is not None:
                c.sendall(reply)
            time.sleep(2)
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, f"tcp://127.0.0.1:{srv.getsockname()[1]}"


@pytest.mark.unit
@pytest.mark.parametrize(
    "reply, words",
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n" * 4, "not as a Dask scheduler"),  # garbage: an 8-byte "length"
        (struct.pack("Q", 0xFFFF_FFFF_FFFF), "not as a Dask scheduler"),  # the 3 EiB allocation
        (None, "no Dask handshake within 0.3 s"),  # says nothing
        (b"", "closed the connection"),
    ],
)
def test_dask_address_of_a_non_dask_server_fails_fast(reply, words):
    pytest.importorskip("distributed")
    from pdd_plan.sweep.executors import probe_dask

    srv, addr = _server(reply if reply != b"" else None)
    if reply == b"":  # accept, then close at once
        srv.close()
        srv, addr = _closing_server()
    try:
        with pytest.raises(InputError, match=re.escape(words)) as e:
            probe_dask(addr, timeout_s=0.3)
        assert e.value.field == "--executor"
    finally:
        srv.close()


def _closing_server() -> tuple[socket.socket, str]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        try:
            c, _ = srv.accept()
            c.close()
        except OSError:
            return

    threading.Thread(target=serve, daemon=True).start()
    return srv, f"tcp://127.0.0.1:{srv.getsockname()[1]}"


@pytest.mark.unit
def test_dask_cli_garbage_server_is_one_line_error():
    pytest.importorskip("distributed")
    srv, addr = _server(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    try:
        _one_line_error(
            [
                "sweep",
                str(EXAMPLE),
                "--vary",
                "workload.rate_rps=20:40:20",
                "--executor",
                "dask://" + addr[len("tcp://") :],
            ],
            "--executor",
            "not as a Dask scheduler",
        )
    finally:
        srv.close()
