"""`calibrate --from` reads serving clients' runs as serving runs: the concurrency, the
lengths actually drawn and the engine, predicted through the serve phase."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.calibration import engine_results as er
from pdd_plan.calibration import fit as cal
from pdd_plan.calibration.serving_runs import ServingMeasurement, lengths_of, predict_serving
from pdd_plan.common.errors import InputError
from pdd_plan.perf.serve import Load, serve
from pdd_plan.perf.serve_engine import serve_engine

pytestmark = pytest.mark.unit
DATA = Path(__file__).resolve().parents[2] / "data" / "engine_results"


def _read(name: str, **kw):
    rows, notes = er.read_results([str(DATA / name)], er.Defaults(**kw))
    return rows


def test_bench_serving_closed_loop_is_a_serving_measurement():
    rows = _read(
        "sglang_bench_serving_closed_loop.jsonl", model="deepseek-v3", gpu="h200", gpus=8,
        dtype="fp8",
    )  # fmt: skip
    assert [type(r) for r in rows] == [ServingMeasurement, ServingMeasurement]
    r8, r64 = rows
    assert (r8.concurrency, r64.concurrency) == (8, 64)
    assert (r8.num_prompts, r8.range_ratio, r8.serve_engine) == (80, 0.8, "sglang")
    # the lengths drawn: the file's totals over its completed requests
    assert r8.isl == 922 and r8.osl == 922  # round(73,720 / 80)
    isl, _ = lengths_of(r8)
    # U[0.8 L, L] with mean 921.5 -> L = 1024 (bench_serving's stated length)
    assert (isl.low, isl.high) == (819, 1024)


def test_serving_row_is_predicted_by_the_serve_phase():
    (r,) = _read("vllm_bench_serve_closed_loop.json", dtype="fp8", kv_dtype="fp8")
    assert (r.gpu, r.tp, r.concurrency, r.serve_engine) == ("b200", 4, 64, "vllm")
    gpu = cal.analytic_gpu("b200")
    got = cal.predict(r, gpu)
    inst = cal.instance_of(r, gpu)
    isl, osl = lengths_of(r)
    want = serve(inst, serve_engine("vllm", 180), Load(isl, osl, 64, None, 128))
    assert got == pytest.approx(want.output_tokens_per_s, rel=1e-9)
    assert predict_serving(r, inst) == pytest.approx(got, rel=1e-9)


def test_a_rate_inf_run_without_a_cap_is_as_wide_as_the_run():
    rows = _read("sglang_bench_serving.jsonl", model="llama-3.1-8b", gpu="h100", gpus=1)
    assert rows[0].concurrency == rows[0].num_prompts == 1000


def test_malformed_serving_record_is_one_line(tmp_path):
    bad = tmp_path / "r.jsonl"
    bad.write_text(
        '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
        '"max_concurrency": 8, "completed": 10, "total_input_tokens": 100, '
        '"total_output_tokens": 100, "output_throughput": 5.0, "random_range_ratio": 1.7}\n'
    )
    with pytest.raises(InputError, match="random_range_ratio") as e:
        _read(str(bad), model="llama-3.1-8b", gpu="h100", gpus=1)
    assert "\n" not in str(e.value)


def test_aiperf_export_is_a_closed_loop_serving_run():
    (r,) = _read("aiperf_profile_export.json", gpu="h100", gpus=1)
    assert isinstance(r, ServingMeasurement)
    assert (r.model, r.concurrency, r.num_prompts) == ("llama-3.1-8b", 16, 160)
    assert (r.isl, r.osl, r.value) == (921, 922, pytest.approx(1032.6))


def test_aiperf_export_without_a_load_is_one_line(tmp_path):
    bad = tmp_path / "profile_export_aiperf.json"
    bad.write_text('{"records": {"output_token_throughput": {"avg": 5}}, "input_config": {}}')
    with pytest.raises(InputError, match="neither concurrency nor request_rate"):
        _read(str(bad), model="llama-3.1-8b", gpu="h100", gpus=1)
