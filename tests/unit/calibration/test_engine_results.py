"""`calibrate --from`: engine result files (SGLang bench_serving JSONL, vLLM bench serve JSON,
trtllm-bench report JSON and text) read as calibration measurements, by hand arithmetic on
sample files laid out as the tools write them (tests/data/engine_results/README.md), and
malformed or foreign files turned into one-line errors naming the file."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path

import pytest

from pdd_plan.calibration import engine_results as er
from pdd_plan.calibration import fit
from pdd_plan.common.errors import InputError
from pdd_plan.perf.offline import ENGINES, TRTLLM_BENCH

DATA = Path(__file__).resolve().parents[2] / "data" / "engine_results"
SGL = DATA / "sglang_bench_serving.jsonl"
VLLM = DATA / "vllm_bench_serve.json"
VLLM_META = DATA / "vllm_bench_serve_metadata.json"
TRT = DATA / "trtllm_bench_report.json"
TRT_TXT = DATA / "trtllm_bench_report.txt"
CSV = fit.calibration_dir() / "calibration_measurements.csv"
H100_8B = er.Defaults(model="llama-3.1-8b", gpu="h100", gpus=1)


# ================================================================ SGLang bench_serving


@pytest.mark.unit
def test_sglang_jsonl_runs_by_hand():
    runs = er.read_runs(SGL)
    assert [r.fmt for r in runs] == [er.SGLANG] * 3 and [r.record for r in runs] == [1, 2, 3]
    first, kept_up, behind = runs
    # 1000 requests of 1024 in / 1024 out in 148.4 s, all sent at t=0
    assert (first.isl, first.osl) == (1024, 1024)
    assert first.output_tps == pytest.approx(1_024_000 / 148.4)
    assert first.note is None and first.max_concurrency is None
    assert first.model is None and first.tp is None  # SGLang's result names neither
    # 4 req/s offered, 1000 / 250.3 = 3.995 req/s served: the offered load, not capacity
    assert kept_up.note and "offered load" in kept_up.note and "4 req/s" in kept_up.note
    # 16 req/s offered, 1000 / 155.0 = 6.45 served (< 0.9 x 16): the server ran at capacity
    assert behind.note is None and behind.max_concurrency == 256


@pytest.mark.unit
def test_sglang_measurements_take_flags_for_what_the_file_omits():
    rows, notes = er.read_results([str(SGL)], H100_8B)
    assert len(rows) == 2 and len(notes) == 1 and "record" not in notes[0]
    a, b = rows
    assert (a.row, b.row) == (1, 2)
    assert (a.gpu, a.n_gpus, a.tp, a.model) == ("h100", 1, 1, "llama-3.1-8b")
    assert a.value == pytest.approx(1_024_000 / 148.4)
    assert b.value == pytest.approx(1_024_000 / 155.0)
    assert a.engine == ENGINES["sglang"]
    # the run's --max-concurrency caps the predicted batch
    assert b.engine.max_batch == 256 and b.engine.limits == "fixed"
    assert "sglang_bench_serving.jsonl record 3" in b.source


@pytest.mark.unit
@pytest.mark.parametrize(
    ("drop", "field", "problem"),
    [
        ("model", "model", "do not name the model"),
        ("gpu", "gpu", "do not name the GPU"),
        ("gpus", "gpus", "do not give the GPU count"),
    ],
)
def test_sglang_missing_items_name_the_field(drop, field, problem):
    d = er.Defaults(**{k: v for k, v in vars(H100_8B).items() if k != drop})
    with pytest.raises(InputError) as e:
        er.read_results([str(SGL)], d)
    assert e.value.file == str(SGL) and e.value.field == field and problem in e.value.problem


# ================================================================ vLLM bench serve


@pytest.mark.unit
def test_vllm_json_by_hand():
    (run,) = er.read_runs(VLLM)
    assert run.fmt == er.VLLM and run.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert (run.isl, run.osl) == (2048, 512)  # 2000 prompts, 4,096,000 in / 1,024,000 out
    assert run.output_tps == pytest.approx(1_024_000 / 269.5)
    assert run.note is None  # request_rate "inf": all sent at t=0
    (row,), _ = er.read_results([str(VLLM)], er.Defaults(gpu="h100", gpus=1))
    assert row.model == "llama-3.1-8b" and row.engine.max_batch == 512


@pytest.mark.unit
def test_vllm_metadata_gives_gpu_and_parallelism():
    (run,) = er.read_runs(VLLM_META)
    assert (run.gpu_name, run.tp, run.ep, run.dp_attention) == ("h200", 8, 8, True)
    (row,), _ = er.read_results([str(VLLM_META)])
    # DeepSeek-R1 has DeepSeek-V3's architecture
    assert (row.model, row.gpu, row.n_gpus, row.tp) == ("deepseek-v3", "h200", 8, 8)
    assert (row.isl, row.osl) == (2000, 1000)
    names = {f.name for f in fields(fit.Measurement)}
    if "ep" in names:  # a Measurement that carries expert parallelism gets it
        assert row.ep == 8


# ================================================================ trtllm-bench


@pytest.mark.unit
def test_trtllm_report_is_the_published_csv_row():
    """The sample report restates CSV row 1 (perf overview, Llama-3.1-8B FP8 on one H100,
    128/2048, 22,714 tok/s): read from either file, it is the same measurement."""
    (ref,) = [r for r in fit.read_measurements(CSV) if r.row == 1]
    for path in (TRT, TRT_TXT):
        (row,), notes = er.read_results([str(path)])
        assert notes == []
        got = (row.gpu, row.n_gpus, row.tp, row.model, row.dtype, row.kv_dtype)
        assert got == (ref.gpu, ref.n_gpus, ref.tp, ref.model, ref.dtype, ref.kv_dtype)
        assert (row.isl, row.osl, row.value) == (ref.isl, ref.osl, ref.value)
        assert row.engine == TRTLLM_BENCH == ref.engine


@pytest.mark.unit
def test_trtllm_text_and_json_agree():
    a, b = er.read_runs(TRT)[0], er.read_runs(TRT_TXT)[0]
    keep = ("model", "gpu_name", "tp", "ep", "pp", "isl", "osl", "output_tps", "dtype", "kv_dtype")
    assert {k: getattr(a, k) for k in keep} == {k: getattr(b, k) for k in keep}
    assert a.gpu_name == "NVIDIA H100 80GB HBM3"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("defaults", "field"),
    [
        (er.Defaults(tp=2), "tp"),
        (er.Defaults(gpus=4), "gpus"),
        (er.Defaults(model="qwen3-32b"), "model"),
    ],
)
def test_flags_that_contradict_the_file_are_refused(defaults, field):
    with pytest.raises(InputError) as e:
        er.read_results([str(TRT)], defaults)
    assert e.value.field == field and e.value.file == str(TRT)


@pytest.mark.unit
def test_pipeline_parallel_runs_are_refused(tmp_path):
    rep = json.loads(TRT.read_text())
    rep["world_info"]["pp_size"] = 2
    p = tmp_path / "pp.json"
    p.write_text(json.dumps(rep))
    with pytest.raises(InputError, match="pipeline parallel"):
        er.read_results([str(p)])


# ================================================================ names


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("/models/Llama-3.1-8B-Instruct/", "llama-3.1-8b"),
        ("nvidia/Llama-3.3-70B-Instruct-FP8", "llama-3.1-70b"),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3.2"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"),
        ("Qwen/Qwen3-32B", "qwen3-32b"),
        ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),  # profile added for MLPerf rows
        ("meta-llama/Llama-3.1-80B", None),
    ],
)
def test_model_names_map_to_profiles(raw, name):
    assert er.model_profile_name(raw) == name


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H20", "h20"),
        ("NVIDIA H800", "h800"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA A100-SXM4-80GB", "a100-80g"),
        ("Tesla V100-SXM2-32GB", None),
    ],
)
def test_gpu_names_map_to_profiles(raw, name):
    assert er.gpu_profile_name(raw) == name


# ================================================================ malformed and foreign files


def _err(path: Path, defaults: er.Defaults = H100_8B) -> InputError:
    with pytest.raises(InputError) as e:
        er.read_results([str(path)], defaults)
    assert e.value.file == str(path)
    return e.value


@pytest.mark.unit
def test_truncated_jsonl_names_the_line(tmp_path):
    lines = SGL.read_text().splitlines()
    p = tmp_path / "cut.jsonl"
    p.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2] + "\n")
    e = _err(p)
    assert e.field == "line 2" and "truncated" in e.problem


@pytest.mark.unit
def test_truncated_json_document(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text(TRT.read_text()[:500])
    assert "not JSON" in _err(p).problem


@pytest.mark.unit
@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}),  # a config.json
        json.dumps([1, 2, 3]),
        json.dumps({"results": {"mmlu": 0.7}}) + "\n",  # another tool's JSON lines
    ],
)
def test_json_of_another_tool_is_foreign(tmp_path, content):
    p = tmp_path / "other.json"
    p.write_text(content)
    e = _err(p)
    assert "not a benchmark result" in e.problem and "output_throughput" in e.problem


@pytest.mark.unit
def test_not_json_at_all(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("throughput was great\n")
    assert "not JSON" in _err(p).problem
    p.write_text("")
    assert "empty" in _err(p).problem
    assert "not found" in _err(tmp_path / "missing.json").problem


@pytest.mark.unit
def test_missing_keys_are_named(tmp_path):
    rec = json.loads(SGL.read_text().splitlines()[0])
    del rec["total_output_tokens"]
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    assert _err(p).field == "line 1: total_output_tokens"
    rec = json.loads(TRT.read_text())
    del rec["request_info"]["avg_output_length"]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(rec))
    assert _err(p).field == "request_info.avg_output_length"
    rec["request_info"] = "n/a"
    p.write_text(json.dumps(rec))
    assert _err(p).field == "request_info"
    text = TRT_TXT.read_text().replace("Total Output Throughput", "Output Thru")
    p = tmp_path / "t.txt"
    p.write_text(text)
    assert "Total Output Throughput" in _err(p).field


@pytest.mark.unit
def test_only_offered_load_runs_is_an_error(tmp_path):
    rec = json.loads(SGL.read_text().splitlines()[1])
    p = tmp_path / "slow.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    e = _err(p)
    assert "no capacity runs" in e.problem and "offered load" in e.fix


@pytest.mark.unit
def test_infinite_rate_spelt_either_way(tmp_path):
    rec = json.loads(SGL.read_text().splitlines()[0])
    assert math.isinf(rec["request_rate"])  # SGLang writes the token Infinity
    rec["request_rate"] = "inf"  # vLLM writes the string
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(rec))
    assert er.read_runs(p)[0].note is None


# ================================================================ the command
