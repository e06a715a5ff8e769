"""trace stats, bathtub and optimize-on-a-trace through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdd_plan.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "traces"
runner = CliRunner()

# NaN or overflow in the planner is a bug (a tiny line load once made 0 x inf): fail on it
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("error::RuntimeWarning")]


def run(*args: str):
    return runner.invoke(app, list(args))


def test_trace_stats_mooncake_conversation_matches_sources():
    r = run("trace", "stats", str(TRACES / "mooncake_conversation_trace.jsonl"), "--format", "json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["requests"] == 12031
    bins = {(b["lo"], b["hi"]): b["share"] for b in s["hit_rate_bins"]}
    # traces/SOURCES.md: 0-20 % holds 43.2 % of requests, token-weighted hit 37.4 %
    assert bins[(0.0, 0.2)] == pytest.approx(0.432, abs=0.001)
    assert s["token_weighted_hit_rate"] == pytest.approx(0.374, abs=0.001)
    for k in ("duration_s", "rate_rps", "input_tokens", "output_tokens"):
        assert k in s
    assert set(s["input_tokens"]) >= {"p50", "p90", "p99", "mean"}


def test_trace_stats_finite_cache_lowers_hits():
    f = str(TRACES / "mooncake_conversation_trace.jsonl")
    big = json.loads(run("trace", "stats", f, "--format", "json").stdout)
    small = json.loads(
        run("trace", "stats", f, "--cache-tokens", "2048000", "--format", "json").stdout
    )
    # SOURCES.md: 4,000 blocks (2.0M tokens) of LRU give 8.8 % token-weighted
    assert small["token_weighted_hit_rate"] == pytest.approx(0.088, abs=0.002)
    assert small["token_weighted_hit_rate"] < big["token_weighted_hit_rate"]


def test_trace_stats_azure_has_null_hits():
    r = run("trace", "stats", str(TRACES / "azure2023_conv.csv"), "--format", "json")
    s = json.loads(r.stdout)
    assert s["hit_rate_bins"] is None and s["token_weighted_hit_rate"] is None
    # tolerance: 0.01 req/s: the trace's published rate to two decimals (traces/SOURCES.md)
    assert s["rate_rps"] == pytest.approx(5.53, abs=0.01)


@pytest.mark.parametrize(
    "args", [["nope.jsonl"], [str(TRACES / "azure2023_conv.csv"), "--cache-tokens", "10"]]
)
def test_trace_stats_bad_input(args):
    r = run("trace", "stats", *args)
    assert r.exit_code == 2
    assert r.stderr.startswith("error:") and "Traceback" not in r.output


def _bathtub(model: str, ratio: str = "0.1") -> dict:
    r = run(
        "bathtub",
        "--model",
        model,
        "--gpu",
        "h100",
        "--input-tokens",
        "65536",
        "--hit-price-ratio",
        ratio,
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_bathtub_dense_attention_has_a_valley_between_30_and_90_percent():
    # DeepSeek-V3 (MLA, attention grows with context): miss throughput falls as the hit rate
    # rises, so with cached tokens at 10 % of the price revenue dips below its hit-rate-0 value
    b = _bathtub("deepseek-v3")
    v = b["valley"]
    assert 0.3 <= v["hit_rate"] <= 0.9
    assert v["revenue_drop"] > 0
    pts = b["points"]
    # cached tokens are served x / (1 - x) times as fast as uncached ones
    for p in pts[1::17]:
        x = p["hit_rate"]
        assert p["hit_tokens_per_s"] == pytest.approx(
            p["miss_tokens_per_s"] * x / (1 - x), rel=2e-3
        )
    assert pts[70]["miss_tokens_per_s"] < pts[40]["miss_tokens_per_s"]


def test_bathtub_tail_chunk_dips():
    # DeepSeek-V4-Pro: its compressed attention keeps miss throughput flat, but every chunk
    # boundary still shows a tail-chunk dip: just below x = 1 - k * 8192 / 65536
    b = _bathtub("deepseek-v4-pro")
    miss = {round(p["hit_rate"], 2): p["miss_tokens_per_s"] for p in b["points"]}
    for k in (2, 3, 4, 5):
        edge = 1 - k * 8192 / 65536
        below, at = round(edge - 0.01, 2), round(edge + 0.01, 2)
        assert miss[below] < miss[at]


def test_bathtub_bad_ratio():
    r = run(
        "bathtub",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--input-tokens",
        "1000",
        "--hit-price-ratio",
        "2",
    )
    assert r.exit_code == 2 and "hit-price-ratio" in r.stderr


@pytest.mark.parametrize(
    "trace",
    [
        "mooncake_conversation_trace.jsonl",
        "mooncake_synthetic_trace.jsonl",
        "azure2023_code.csv",
        "azure2023_conv.csv",
    ],
)
def test_optimize_plans_for_each_trace(tmp_path, trace):
    sc = yaml.safe_load((ROOT / "examples" / "pdd-paper.yaml").read_text())
    sc["workload"] = {"trace": str(TRACES / trace), "prefix_hit": {"fixed": 0.9}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    # --draws 0: the rates are the point here; the uncertainty block would add ~10 s per trace
    r = run("optimize", str(p), "--format", "json", "--no-verify", "--draws", "0")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    # the rate comes from the trace's timestamps (traces/SOURCES.md)
    expect = {
        "mooncake_conversation_trace.jsonl": 3.40,
        "mooncake_synthetic_trace.jsonl": 3.91,
        "azure2023_code.csv": 2.57,
        "azure2023_conv.csv": 5.53,
    }[trace]
    # tolerance: 0.01 req/s: the traces' rates to two decimals (traces/SOURCES.md)
    assert plan["rate_rps"] == pytest.approx(expect, abs=0.01)
    for a in ("pdd", "cdc_pd", "idc_pd"):
        assert plan["plans"][a]["goodput_rps"] == pytest.approx(expect, abs=0.01)
