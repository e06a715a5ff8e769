"""An engine's ROCm build is its own engine in the joint fit: a row of SGLang on an AMD GPU
(its ROCm images) gets the `sglang-rocm` scheduling offset, a CUDA GPU's the reference engine's,
and a calibrated AMD profile carries the ROCm build's offset (what the planner deploys there).
The InferenceX rows read the same runs' KV dtype in both row files."""

from __future__ import annotations

import csv
import re

import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration.joint import JointFit
from pdd_plan.calibration.measurements import engine_build
from pdd_plan.calibration.serving_rows import load_serving_rows, serving_measurements
from pdd_plan.calibration.serving_runs import engine_of

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def rows():
    return cal.read_rows(str(cal.calibration_dir() / "calibration_measurements.csv"))[0]


def test_build_by_gpu() -> None:
    assert engine_build("sglang", "mi300x") == "sglang-rocm"
    assert engine_build("sglang", "mi355x") == "sglang-rocm"
    assert engine_build("sglang", "h200") == "sglang"
    assert engine_build("atom", "mi355x") == "atom"  # AMD's own engine: ROCm only already
    assert engine_build("tensorrt-llm", "b200") == "tensorrt-llm"


def test_rows_take_their_build(rows) -> None:
    by = {r.row: r.engine_name for r in rows}
    assert by[77] == "sglang-rocm"  # SGLang v0.4.10 on ROCm 6.3, MI300X
    assert by[97] == "sglang-rocm"  # lmsysorg/sglang:v0.5.12-rocm700-mi30x
    assert by[90] == "sglang"  # H200
    assert by[101] == "atom"


def test_profile_default_is_the_deployed_build() -> None:
    fit = JointFit(
        gpus={},
        population={"mfu": 0.5, "mbu": 0.8, "step_overhead_ms": 1.0},
        shift={"mfu": 0.0, "mbu": 0.0},
        counts={},
        rows=[],
        errors=[],
        success=True,
        message="",
        engine_overhead={"sglang-rocm": 3.0, "vllm": 0.5},
    )
    amd, nv = cal.analytic_gpu("mi300x"), cal.analytic_gpu("h200")
    assert fit.profile(amd).efficiency.step_overhead_ms == pytest.approx(4.0)  # 1 + 3
    assert fit.profile(nv).efficiency.step_overhead_ms == pytest.approx(1.0)
    assert fit.profile(nv, "vllm").efficiency.step_overhead_ms == pytest.approx(1.5)
    assert fit.profile(amd, "sglang").efficiency.step_overhead_ms == pytest.approx(1.0)


def test_rows_and_serving_rows_agree_on_kv(rows) -> None:
    serving = load_serving_rows().rows
    both = [r for r in rows if r.row in serving and "InferenceX-app" in r.source]
    assert len(both) >= 20
    for r in both:
        assert r.kv_dtype == serving[r.row].kv_dtype, r.row
        assert r.gpu == serving[r.row].gpu


def test_noted_ttfts_are_the_records_of_non_ttft_rows() -> None:
    """The evidence TTFTs restate what each serving row's record says beside its TPOT or
    throughput (the CSV row's notes, read here independently); a TTFT row's record is not
    repeated, and no statistic reads them."""
    data = load_serving_rows()
    assert len(data.noted_ttft_ms) >= 40
    with open(cal.calibration_dir() / "calibration_measurements.csv", encoding="utf-8") as f:
        notes = {i: r["notes"] for i, r in enumerate(csv.DictReader(f), start=1)}
    for row, ms in data.noted_ttft_ms.items():
        r = data.rows[row]
        assert r.figure != "ttft_ms" and r.concurrency is not None, row
        m = re.search(r"TTFT[^0-9]*([\d.,]+) ?(ms|s)\b", notes[row])
        assert m, row
        stated = float(m.group(1).replace(",", "")) * (1000.0 if m.group(2) == "s" else 1.0)
        assert ms == pytest.approx(stated), row
    ttft_rows = {k for k, r in data.rows.items() if r.figure == "ttft_ms"}
    assert not ttft_rows & set(data.noted_ttft_ms)


def test_serving_rows_prefill_batch_is_the_launch_scripts() -> None:
    """InferenceX's SGLang launch scripts set the prefill batch (the smaller of
    --chunked-prefill-size and --max-prefill-tokens): 32,768 for the FP8 checkpoint on B200,
    B300 and H200, 16,384 for the FP4 one on B200, 131,072 on MI300X and MI325X, 196,608 on
    MI355X; the serve phase's engine takes it, not the engine's default."""
    want = {"h200": 32768, "b300": 32768, "mi300x": 131072, "mi325x": 131072, "mi355x": 196608}
    data = load_serving_rows()
    sglang = {
        k: r for k, r in data.rows.items() if r.document == "inferencex" and r.engine == "sglang"
    }
    assert len(sglang) >= 20
    for k, r in sglang.items():
        fp4 = r.expert_dtype == "fp4"
        expected = (16384 if fp4 else 32768) if r.gpu == "b200" else want[r.gpu]
        assert r.prefill_tokens == expected, k
    m = next(m for m in serving_measurements() if m.row == 98)
    inst = cal.instance_of(m, cal.analytic_gpu(m.gpu))
    assert engine_of(m, inst).step_tokens == 131072
    m = next(m for m in serving_measurements() if m.row == 91)  # TensorRT-LLM: its default
    assert engine_of(m, cal.instance_of(m, cal.analytic_gpu(m.gpu))).step_tokens == 8192


def test_serving_rows_prefill_graphs_are_the_launch_scripts() -> None:
    """InferenceX's dsr1_fp4_b200_trt.sh turns TensorRT-LLM's piecewise prefill CUDA graphs on
    at ISL 1,024 / OSL 1,024 with TP8 and EP8, and no other script of these rows does: exactly
    those rows say so, and their engine pays no eager launch floor while the others do."""
    data = load_serving_rows()
    for k, r in data.rows.items():
        rule = (
            r.document == "inferencex"
            and r.engine == "trtllm"
            and r.gpu == "b200"
            and r.expert_dtype == "fp4"
            and (r.isl, r.osl, r.tp, r.ep) == (1024, 1024, 8, 8)
        )
        assert bool(r.prefill_graphs) == rule, k
    rows = {m.row: m for m in serving_measurements()}
    for row, floor in ((94, False), (95, True), (93, True)):
        m = rows[row]
        eng = engine_of(m, cal.instance_of(m, cal.analytic_gpu(m.gpu)))
        assert (eng.eager_launch_s > 0) == floor, row
