"""`simulate --trace` replays the trace as recorded (the plan's rate does not rescale it);
`--rate` rescales it, said in the output; a pool the replay overloads is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli_helpers import invoke, refused

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "examples" / "traces" / "mooncake_conversation_trace.jsonl"
N = 1500


def _recorded_rate(n: int | None) -> float:
    """The trace's first n requests' (None: all) mean rate, from its timestamps (ms), by hand."""
    ts = sorted(json.loads(line)["timestamp"] for line in TRACE.read_text().splitlines() if line)
    a = np.asarray(ts[:n], float) / 1e3
    return (len(a) - 1) / (a[-1] - a[0])


def _run(*args) -> dict:
    r = invoke("simulate", "--trace", str(TRACE), "-n", N, "-f", "json", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_trace_as_recorded_unless_rescaled_and_overload_flagged():
    s = _run()
    assert s["arrivals"] == "as recorded"
    # the default plan's 40 req/s does not touch the trace's own arrivals; the figures are over
    # the requests kept after the warm-up, so the rate is that of a (leading-trimmed) window
    assert s["offered_rps"] == pytest.approx(_recorded_rate(N), rel=0.1)
    assert s["overloaded"] == []
    hot = _run("--rate", 200)
    assert hot["arrivals"] == "rescaled to 200 req/s (--rate)"
    # the whole trace is rescaled to 200 req/s on average: its first N keep their own ratio
    assert hot["offered_rps"] == pytest.approx(
        200 * _recorded_rate(N) / _recorded_rate(None), rel=0.02
    )
    assert hot["overloaded"] and hot["overloaded"][0].startswith("prefill (offered")


def test_rate_needs_a_trace_and_a_positive_value():
    refused("simulate", "--rate", 3, needle=("--rate", "give --trace"))
    refused("simulate", "--trace", str(TRACE), "--rate", 0, needle=("--rate", "(0,"))
