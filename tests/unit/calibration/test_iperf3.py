"""`pdd-plan line calibrate --iperf3`: line profiles from real iperf3 JSON (tests/data/iperf3,
recorded on the loopback; see its README), checked against hand arithmetic on those files'
numbers, one-line errors for everything that is not a TCP iperf3 run, and (marker iperf3) a
fresh run of the installed iperf3 read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pdd_plan.calibration.iperf3 import calibrate, read_iperf3, to_yaml
from pdd_plan.inputs.schema.line import LineSKU
from tests.cli_helpers import invoke

DATA = Path(__file__).resolve().parents[2] / "data" / "iperf3"
P1, P4 = str(DATA / "loopback-p1.json"), str(DATA / "loopback-p4.json")
P1R, P4R = str(DATA / "loopback-p1-reverse.json"), str(DATA / "loopback-p4-reverse.json")


def raw(path: str) -> dict:
    return json.loads(Path(path).read_text())


def error_line(result) -> str:
    detail = f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.exit_code == 2, detail
    assert result.exception is None or isinstance(result.exception, SystemExit), detail
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), detail
    return lines[0]


# ------------------------------------------------------------------ the numbers


@pytest.mark.unit
def test_single_stream_file_by_hand():
    d = raw(P1)
    sender, receiver = d["end"]["streams"][0]["sender"], d["end"]["streams"][0]["receiver"]
    sku = calibrate([read_iperf3(P1)], "one", 2750)
    # goodput: what the receiver counted, bits/s -> Gb/s
    assert sku.per_connection_gbps == pytest.approx(receiver["bits_per_second"] / 1e9, rel=1e-3)
    assert sku.measured_aggregate_gbps == sku.per_connection_gbps
    assert sku.measured_aggregate_connections == 1
    assert sku.rtt_ms == pytest.approx(sender["mean_rtt"] / 1000, rel=1e-3)  # µs -> ms
    # tolerance: rel 1e-3: the profile keeps 4 significant figures (iperf3._sig)
    assert sku.rtt_min_ms == pytest.approx(sender["min_rtt"] / 1000, rel=1e-3)
    segments = sender["bytes"] / d["start"]["tcp_mss_default"]
    # tolerance: 1%: the profile keeps 3 significant figures of the retransmit rate (iperf3._sig)
    assert sku.retransmit_rate == pytest.approx(sender["retransmits"] / segments, rel=1e-2)
    assert sku.mss_bytes == d["start"]["tcp_mss_default"] == 32768
    assert sku.tcp_congestion == d["end"]["sender_tcp_congestion"]
    # no --gbps: the line rate is the best goodput seen, already net of overheads
    assert sku.gbps == sku.per_connection_gbps and sku.tcp_efficiency == 1.0
    assert sku.cost_per_month == 2750


@pytest.mark.unit
def test_single_and_parallel_files_split_the_roles():
    p1, p4 = raw(P1), raw(P4)
    sku = calibrate([read_iperf3(P4), read_iperf3(P1)], "both", 100)
    one = p1["end"]["sum_received"]["bits_per_second"] / 1e9
    four = p4["end"]["sum_received"]["bits_per_second"] / 1e9
    assert sku.per_connection_gbps == pytest.approx(one, rel=1e-3)  # from the -P 1 file
    assert sku.measured_aggregate_gbps == pytest.approx(four, rel=1e-3)  # from the -P 4 file
    assert sku.measured_aggregate_connections == 4
    # RTT from the run with the fewest streams (least self-inflicted queueing)
    assert sku.rtt_ms == pytest.approx(p1["end"]["streams"][0]["sender"]["mean_rtt"] / 1000)
    # rtt_min_ms: the smallest min_rtt of any forward stream, so never above rtt_ms's samples
    mins = [s["sender"]["min_rtt"] for d in (p1, p4) for s in d["end"]["streams"]]
    assert sku.rtt_min_ms == pytest.approx(min(mins) / 1000, rel=1e-3)
    # retransmits pooled over both files
    retrans = sum(d["end"]["sum_sent"]["retransmits"] for d in (p1, p4))
    sent = sum(d["end"]["sum_sent"]["bytes"] for d in (p1, p4))
    assert sku.retransmit_rate == pytest.approx(retrans * 32768 / sent, rel=1e-2)


@pytest.mark.unit
def test_parallel_only_gives_the_fair_share_and_says_so():
    sku = calibrate([read_iperf3(P4)], "p4", 100)
    # tolerance: rel 1e-3: the profile keeps 4 significant figures (iperf3._sig)
    assert sku.per_connection_gbps == pytest.approx(sku.measured_aggregate_gbps / 4, rel=1e-3)
    assert "lower bound" in sku.source


@pytest.mark.unit
def test_reversed_runs_need_a_forward_run_or_the_rtt():
    r = read_iperf3(P4R)
    assert r.reverse and r.mean_rtt_us == ()  # the -R client reports mean_rtt 0
    assert r.retransmits == raw(P4R)["end"]["sum_sent"]["retransmits"]  # the server's count
    sku = calibrate([r], "rev", 100, rtt_ms=12.5)
    assert sku.rtt_ms == 12.5 and sku.rtt_min_ms is None
    sku = calibrate([r, read_iperf3(P1R), read_iperf3(P1)], "mixed", 100)
    assert sku.rtt_ms == pytest.approx(raw(P1)["end"]["streams"][0]["sender"]["mean_rtt"] / 1000)
    msg = error_line(invoke("line", "calibrate", "--iperf3", P4R, "--cost-per-month", "100"))
    assert "--rtt-ms" in msg and "-R" in msg


@pytest.mark.unit
def test_given_line_rate_keeps_the_default_efficiency():
    sku = calibrate([read_iperf3(P1)], "x", 100, gbps=100)
    assert sku.gbps == 100 and sku.tcp_efficiency == LineSKU.model_fields["tcp_efficiency"].default
    assert sku.per_connection_gbps < sku.gbps


@pytest.mark.unit
def test_source_names_files_version_date_and_derivations():
    sku = calibrate([read_iperf3(p) for p in (P1, P4, P1R, P4R)], "all", 2750)
    for p in (P1, P4, P1R, P4R):
        assert Path(p).name in sku.source
    assert "iperf 3.12" in sku.source and raw(P1)["start"]["timestamp"]["time"] in sku.source
    for field in ("gbps", "per_connection_gbps", "measured_aggregate_gbps", "rtt_ms"):
        assert f"{field} " in sku.source
    assert "retransmit_rate" in sku.source and "mss_bytes" in sku.source


@pytest.mark.unit
def test_cli_writes_a_profile_that_validates_and_round_trips(tmp_path):
    out = tmp_path / "line.yaml"
    args = ["line", "calibrate", "--iperf3", P1, "--iperf3", P4, "--name", "lo"]
    args += ["--cost-per-month", "2750"]
    res = invoke(*args, "--out", str(out))
    assert res.exit_code == 0, res.output
    text = out.read_text()
    data = yaml.safe_load(text)
    assert list(data)[:3] == ["name", "gbps", "cost_per_month"] and list(data)[-1] == "source"
    sku = LineSKU.model_validate(data)
    assert sku == calibrate([read_iperf3(P1), read_iperf3(P4)], "lo", 2750)
    assert text == to_yaml(sku)  # deterministic: same inputs, same bytes
    assert max(len(line) for line in text.splitlines()) <= 100
    assert invoke("validate", str(out)).exit_code == 0
    # stdout without --out: the same YAML
    res = invoke(*args)
    assert res.stdout == text


# ------------------------------------------------------------------ bad input


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "run.json"
    p.write_text(text)
    return str(p)


@pytest.mark.unit
@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: "iperf3: error - unable to connect\n", "not JSON"),
        (lambda: "", "empty file"),
        (lambda: Path(P1).read_text()[:1500], "truncated"),
        (lambda: json.dumps({"streams": []}), "not iperf3 output"),
        (lambda: json.dumps([1, 2]), "not iperf3 output"),
        (lambda: (DATA / "refused-error.json").read_text(), "iperf3 reported an error"),
        (lambda: (DATA / "loopback-udp.json").read_text(), "UDP"),
        (lambda: json.dumps({**raw(P1), "end": {}}), "end.streams"),
    ],
)
def test_not_a_tcp_iperf3_run_is_one_line(tmp_path, make, words):
    f = _write(tmp_path, make())
    msg = error_line(invoke("line", "calibrate", "--iperf3", f, "--cost-per-month", "100"))
    assert words in msg and "run.json" in msg


@pytest.mark.unit
def test_missing_stream_fields_are_one_line(tmp_path):
    d = raw(P1)
    del d["end"]["streams"][0]["sender"]["bytes"]
    msg = error_line(
        invoke(
            "line",
            "calibrate",
            "--iperf3",
            _write(tmp_path, json.dumps(d)),
            "--cost-per-month",
            "1",
        )
    )
    assert "end.streams[0].sender.bytes" in msg


@pytest.mark.unit
@pytest.mark.parametrize(
    "args, words",
    [
        ((), "--cost-per-month"),
        (("--cost-per-month", "0"), "--cost-per-month"),
        (("--cost-per-month", "9", "--gbps", "1"), "--gbps"),  # 1 Gb/s < 10.7 measured
        (("--cost-per-month", "9", "--gbps", "-5"), "--gbps"),
        (("--cost-per-month", "9", "--rtt-ms", "-1"), "--rtt-ms"),
        (("--cost-per-month", "9", "--name", " "), "--name"),
        (("--cost-per-month", "9", "--iperf3", "/nonexistent/run.json"), "file not found"),
    ],
)
def test_bad_options_are_one_line(args, words):
    assert words in error_line(invoke("line", "calibrate", "--iperf3", P1, *args))


@pytest.mark.unit
def test_no_file_is_one_line():
    assert "--iperf3" in error_line(invoke("line", "calibrate", "--cost-per-month", "1"))


# ------------------------------------------------------------------ a fresh run (CI installs iperf3)
