"""`pdd-plan perf --phase serve`: the JSON a script reads, and bad loads refused in one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app

pytestmark = pytest.mark.integration
BASE = ["perf", "-m", "llama-3.1-8b", "-g", "h100", "--phase", "serve", "-L", "1024", "-O", "256"]


def test_serve_json_has_the_benchmark_figures():
    r = CliRunner().invoke(
        app, [*BASE, "--concurrency", "16", "--num-prompts", "96", "--range-ratio", "0.8",
              "--engine", "vllm", "-f", "json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["engine"] == "vllm" and d["schedule"] == "mixed"
    for k in ("ttft_s", "tpot_ms"):
        assert set(d[k]) == {"mean", "p50", "p90", "p99"}
        assert d[k]["p50"] <= d[k]["p90"] <= d[k]["p99"]
    # output tokens over the run's duration; total adds the prompts (mean 921.5 in, 230.5 out)
    ratio = d["total_tokens_per_s"] / d["throughput_tokens_per_s"]
    assert ratio == pytest.approx((921.5 + 230.5) / 230.5, rel=0.01)
    assert 0 < d["in_flight_mean"] <= 16
    # the serve phase's held-out error on published runs, with the TTFT records of its band
    assert d["error_band"]["figures"]["throughput"]["rows"] >= 20
    lo, hi = d["error_band"]["ttft_records_here"]["concurrency"]
    assert lo <= round(d["in_flight_mean"]) <= hi
    assert "held out on published serving runs" in d["error_band_note"]
    r = CliRunner().invoke(app, [*BASE, "--concurrency", "16", "--num-prompts", "96"])
    assert r.exit_code == 0 and "error band (held-out)" in r.output


@pytest.mark.parametrize("prompts", [None, 200, 1_000_000])
def test_open_loop_json_below_capacity_serves_the_offered_rate(prompts):
    """An open loop at 2 requests/s of 256 outputs, far below what one H100 serves: endless,
    finite (followed as it unfolds) and a million prompts (many lifetimes long: the steady
    state) all give JSON; the endless and the long runs serve the offered 512 tokens/s, the
    200-prompt run less (its last completions come after its last arrival)."""
    extra = [] if prompts is None else ["--num-prompts", str(prompts)]
    r = CliRunner().invoke(app, [*BASE, "--rate", "2", *extra, "--engine", "vllm", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    # 2 req/s x 256 tokens = 512 tokens/s by hand; tolerance 0.1 %: the steady state's
    # rounding (the offered rate is served exactly below capacity). The 200-prompt run ends
    # after its last arrival (100 s of arrivals, its last outputs after): under 512, and within
    # 10 % of it (a few seconds of drain over a 100 s run)
    if prompts == 200:
        assert 0.9 * 512 < d["throughput_tokens_per_s"] < 512
    else:
        assert d["throughput_tokens_per_s"] == pytest.approx(512, rel=0.001)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((), "--concurrency"),  # neither a concurrency nor a rate
        (("--concurrency", "8", "--rate", "2"), "--concurrency"),
        (("--concurrency", "0"), "--concurrency"),
        (("--rate", "-1"), "--rate"),
        (("--concurrency", "8", "--range-ratio", "1.5"), "--range-ratio"),
        (("--concurrency", "8", "--engine", "tgi"), "--engine"),
        (("--concurrency", "8", "--num-prompts", "0"), "--num-prompts"),
    ],
)
def test_bad_serving_loads_are_one_line_errors(args, needle):
    r = CliRunner().invoke(app, [*BASE, *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


def test_a_datasets_lengths_are_its_histogram(tmp_path):
    f = tmp_path / "lengths.csv"
    f.write_text("input_tokens,output_tokens\n1000,200\n3000,100\n500,400\n")
    r = CliRunner().invoke(app, [*BASE, "--concurrency", "8", "--lengths", str(f), "-f", "json"])
    assert r.exit_code == 0, r.output
    load = json.loads(r.output)["load"]
    assert load["input_tokens"] == {"mean": 1500.0, "low": 500.0, "high": 3000.0}
    assert load["output_tokens"]["mean"] == pytest.approx(700 / 3)
    f.write_text("1000,200\n3000,x\n")
    r = CliRunner().invoke(app, [*BASE, "--concurrency", "8", "--lengths", str(f)])
    assert r.exit_code == 2 and "line 2" in r.output, r.output


def test_prefill_graphs_flag_removes_the_eager_floor_and_only_serve_takes_it():
    # Llama-3.1-8B on one H100: 32 layers of 5 + 4 kernels and 4 per pass, no collectives
    # (TP1): 292 launches x 44.2 us = 12.9 ms, longer than a 64-token prompt's GPU pass
    short = ["perf", "-m", "llama-3.1-8b", "-g", "h100", "--phase", "serve", "-L", "64",
             "-O", "64", "--concurrency", "1", "-f", "json"]  # fmt: skip
    runs = {}
    for flag in ("--eager-prefill", "--prefill-graphs"):
        r = CliRunner().invoke(app, [*short, flag])
        assert r.exit_code == 0, r.output
        runs[flag] = json.loads(r.output)
    eager, graphs = runs["--eager-prefill"], runs["--prefill-graphs"]
    assert eager["eager_prompt_step_s"] == pytest.approx(292 * 44.2e-6)
    assert graphs["eager_prompt_step_s"] == 0.0
    # one request alone: its TTFT is its prompt step, the host's when eager
    assert eager["ttft_s"]["mean"] >= eager["eager_prompt_step_s"] > graphs["ttft_s"]["mean"]
    assert eager["tpot_ms"]["mean"] == pytest.approx(graphs["tpot_ms"]["mean"], rel=1e-6)
    r = CliRunner().invoke(
        app, ["perf", "-m", "llama-3.1-8b", "-g", "h100", "--phase", "decode", "-L", "64",
              "--prefill-graphs"],
    )  # fmt: skip
    assert r.exit_code == 2 and "--prefill-graphs" in r.output and "Traceback" not in r.output
