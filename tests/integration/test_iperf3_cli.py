"""A fresh iperf3 run on the loopback read by `calibrate` (the reader on the stored files:
tests/unit/calibration/test_iperf3.py)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest
import yaml

from pdd_plan.inputs.schema.line import LineSKU
from tests.cli_helpers import invoke

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _client(port: int, *extra: str) -> dict:
    """`iperf3 -c -J` against our server; retried while the server is still starting."""
    for _ in range(40):
        cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J", "-t", "1", *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        data = json.loads(done.stdout)
        if "refused" not in str(data.get("error", "")):
            return data
        time.sleep(0.25)
    raise AssertionError(f"iperf3 server on port {port} never accepted: {data}")


@pytest.mark.integration
@pytest.mark.iperf3
def test_fresh_iperf3_run_is_read(tmp_path):
    if shutil.which("iperf3") is None:
        # .ci/run installs it where it can (root or sudo with apt); a CI machine without a
        # package registry must still pass, so absence skips, loudly, rather than fails
        pytest.skip("iperf3 not installed (apt-get install iperf3); .ci/run installs it")
    port = _free_port()
    server = subprocess.Popen(
        ["iperf3", "-s", "-p", str(port), "-B", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        files = []
        for extra in ((), ("-P", "2")):
            data = _client(port, *extra)
            assert "error" not in data, data
            files.append(tmp_path / f"fresh-p{len(files) + 1}.json")
            files[-1].write_text(json.dumps(data))
    finally:
        server.terminate()
        server.wait(timeout=10)
    out = tmp_path / "fresh.yaml"
    res = invoke(
        "line",
        "calibrate",
        "--iperf3",
        str(files[0]),
        "--iperf3",
        str(files[1]),
        "--cost-per-month",
        "1",
        "--out",
        str(out),
    )
    assert res.exit_code == 0, res.output
    sku = LineSKU.model_validate(yaml.safe_load(out.read_text()))
    assert sku.measured_aggregate_connections == 2 and sku.per_connection_gbps > 0
    assert sku.rtt_ms > 0 and sku.mss_bytes and sku.retransmit_rate is not None
