"""benchmarks/tcp_check.py: the TCP path model against the CSV's WAN rows, by hand."""

from __future__ import annotations

import importlib

import pytest

pytestmark = pytest.mark.unit


def _bench():
    return importlib.import_module("benchmarks.tcp_check")


def _check(row: int, streams: int = 1) -> dict:
    return next(c for c in _bench().rows() if c["row"] == row and c["streams"] == streams)


def test_window_limited_flow_is_window_over_rtt():
    # row 125: an 8 kB window over a 170 ms RTT: 8192 B / 0.17 s = 48.2 kB/s, less the 24-byte
    # header per 1 MiB message; the measurement (47 kB/s) is within 3 %
    c = _check(125)
    by_hand = 8192 / 0.170 * 8 / 1e6 * (1 << 20) / ((1 << 20) + 24)
    assert c["predicted_mbps"] == pytest.approx(by_hand, rel=1e-9)
    assert abs(c["error"]) < 0.05
    assert _bench().limit_of(c) == "window"


def test_striped_streams_stop_at_the_line_goodput():
    # row 129 with 3 streams: 3 x 389 Mb/s would exceed the 1 Gb/s line x 0.9 goodput
    c = _check(129, 3)
    assert c["predicted_mbps"] == pytest.approx(900.0, rel=1e-9)
    assert _check(129, 2)["predicted_mbps"] < c["predicted_mbps"]


def test_kv_transfer_is_size_over_nic_bandwidth_plus_the_fixed_latency():
    # row 114: 40 GB over 8 x 400 Gb/s at comm_efficiency 0.7 plus 5 ms
    r = next(c for c in _bench().transfer_rows() if c["row"] == 114)
    t = 40e9 / (8 * 400e9 / 8 * 0.7) + 0.005
    assert r["predicted_gbytes_s"] == pytest.approx(40 / t, rel=1e-9)
    # a small transfer is dominated by the fixed latency: its effective bandwidth is far lower
    small = next(c for c in _bench().transfer_rows() if c["row"] == 110)
    assert small["predicted_gbytes_s"] < 0.2 * r["predicted_gbytes_s"]
