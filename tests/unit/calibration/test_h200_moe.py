"""The MoE kernel timings' plan and counts (benchmarks/moe_shapes.py) by hand, and their
comparison with the perf model's laws (benchmarks/h200_moe_rows.py) on a hand-made moe.json:
the device script itself needs torch and a GPU, so it is checked with --dry-run where torch is."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks import h200_moe_rows as R
from benchmarks import moe_shapes as S
from pdd_plan.perf.comm import serving

pytestmark = pytest.mark.unit

CEIL = {"bf16_gemm_tflops": 100.0, "fp8_gemm_tflops": 200.0, "read_tbps": 2.0}


def test_grouped_gemm_counts_by_hand():
    # 2 experts, 4 tokens each, hidden 8, inter 4: gate/up 2*4*8*8, down 2*4*4*8, x 2 experts
    assert S.grouped_gemm_flops(2, 4, 8, 4) == 2 * 2 * 4 * (8 * 8 + 4 * 8)
    # bf16: weights 2*3*8*4*2 = 384, inputs 2*4*(8+4)*2 = 192, outputs 2*4*(8+8)*2 = 256
    assert S.grouped_gemm_bytes(2, 4, "bf16", 8, 4) == 384 + 192 + 256
    # fp8 halves the weights and inputs only: 192 + 96 + 256
    assert S.grouped_gemm_bytes(2, 4, "fp8", 8, 4) == 192 + 96 + 256


def test_tokens_per_expert_at_balanced_routing():
    # 128 tokens x 8 copies on each of 8 GPUs over 256 experts: 32 a GPU's expert sees
    assert S.tokens_per_expert(128, 8) == 32
    assert S.tokens_per_expert(4, 32) == 4
    assert [S.tokens_per_expert(b, 8) for b in S.LAYER_BATCH] == [1, 8, 32, 64]


def test_mla_counts_by_hand():
    # 2 requests, 4 heads, 10 cached tokens, latent 6 (kv_lora 4): scores 2*2*4*10*6, values
    # 2*2*4*10*4; the cache read once 2*10*6*2, queries and outputs 2*4*(6+4)*2
    assert S.mla_flops(2, 4, 10, 6, 4) == 2 * 2 * 4 * 10 * (6 + 4)
    assert S.mla_bytes(2, 4, 10, 6, 4) == 2 * 10 * 6 * 2 + 2 * 4 * 10 * 2


def test_mla_plan_keeps_a_batch_within_one_gpus_cache():
    plan = S.mla_plan()
    assert all(b * c <= S.MLA_MAX_TOKENS for _, b, c in plan)
    # per head count: batch 1, 4, 16 and 64 reach 128K (64 x 128K = 2^23), 256 stops at 32K
    assert len(plan) == 2 * (4 * 7 + 5)
    assert (128, 256, 32768) in plan and (128, 256, 65536) not in plan


def _gg(seconds: float, m: int = 64) -> dict:
    return {"piece": "grouped_gemm", "dtype": "bf16", "experts": 2, "tokens": m,
            "hidden": 7168, "inter": 2048, "seconds": seconds}  # fmt: skip


def test_grouped_gemm_against_the_rounded_roofline_by_hand():
    flops = S.grouped_gemm_flops(2, 64)
    nbytes = S.grouped_gemm_bytes(2, 64, "bf16")
    c, m = flops / 100e12, nbytes / 2e12
    p = serving().gemm_roofline.sharpness
    law = max(c, m) * (1 + (min(c, m) / max(c, m)) ** p) ** (1 / p)
    r = R.grouped_gemm_row(_gg(2 * law), CEIL)
    assert r["law_s"] == pytest.approx(law, rel=1e-12)
    assert r["ratio"] == pytest.approx(2.0, rel=1e-12)
    assert r["flop_fraction"] == pytest.approx(c / (2 * law))
    assert r["byte_fraction"] == pytest.approx(m / (2 * law))
    # bf16 weights give about M FLOPs a byte: 64 is past this device's ridge (100e12 / 2e12 =
    # 50 FLOP/B), so compute-bound
    assert c > m


def test_mla_against_the_latent_attention_law_by_hand():
    rec = {"piece": "mla_decode", "heads": 128, "batch": 4, "context": 8192, "latent": 576,
           "kv_lora": 512, "seconds": 1e-3}  # fmt: skip
    flops, nbytes = 2 * 4 * 128 * 8192 * (576 + 512), 4 * 8192 * 576 * 2 + 4 * 128 * 1088 * 2
    k = serving().attention_kernels
    c = flops / (100e12 * k.compute_fraction)
    m = nbytes / (2e12 * k.memory_fraction)
    r = R.mla_row(rec, CEIL)
    assert r["law_s"] == pytest.approx(max(c, m), rel=1e-12)
    assert r["bound"] == ("compute" if c >= m else "memory")
    assert r["ratio"] == pytest.approx(1e-3 / max(c, m), rel=1e-12)
    assert r["byte_fraction"] == pytest.approx(nbytes / 2e12 / 1e-3)


def test_rows_skip_errors_and_summarise_each_curve(tmp_path):
    runs = [_gg(1e-4, 16), _gg(2e-4, 64), {**_gg(1.0, 256), "error": "OutOfMemoryError: x"}]
    runs.append({"piece": "layer", "batch": 32, "context": 4096, "ep": 8, "tokens_per_expert": 8,
                 "seconds": 4e-4, "attention_s": 1e-4, "experts_s": 2e-4})  # fmt: skip
    out = R.rows({"ceilings": CEIL, "runs": runs})
    assert [r["tokens"] for r in out["grouped_gemm"]] == [16, 64]
    assert out["layer"][0]["attention_share"] == 0.25 and out["layer"][0]["experts_share"] == 0.5
    (line,) = R.shape_summary(out)
    a, b = (r["ratio"] for r in out["grouped_gemm"])
    assert (
        line.startswith("grouped GEMM bf16 E=2") and f"spread {max(a, b) / min(a, b):.2f}x" in line
    )
    assert "| bf16 | 2 | 16 |" in R.markdown(out)
    assert math.isnan(R.spread([]))


def test_a_dry_run_file_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    f = tmp_path / "moe.json"
    f.write_text(json.dumps({"environment": {}, "ceilings": {}, "runs": []}))
    monkeypatch.setattr("sys.argv", ["h200_moe_rows", str(f)])
    with pytest.raises(SystemExit, match="no ceilings"):
        R.main()


@pytest.mark.parametrize(
    "text, says",
    [
        ("{not json", "cannot read it as moe.json"),
        ('{"runs": 3}', "no 'runs' list"),
        ('{"ceilings": {"bf16_gemm_tflops": 1, "fp8_gemm_tflops": 1, "read_tbps": 1},'
         ' "runs": [{"piece": "layer", "batch": 1}]}', "a run lacks field"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line(tmp_path, monkeypatch, text, says):
    f = tmp_path / "moe.json"
    f.write_text(text)
    monkeypatch.setattr("sys.argv", ["h200_moe_rows", str(f)])
    with pytest.raises(SystemExit, match=says):
        R.main()


def test_markdown_tables_have_a_cell_per_header():
    out = R.rows({"ceilings": CEIL, "runs": [_gg(1e-4, 16)]})
    out["layer"] = [R.layer_row({"batch": 32, "context": 4096, "ep": 8, "tokens_per_expert": 8,
                                 "seconds": 4e-4, "attention_s": 1e-4, "experts_s": 2e-4})]  # fmt: skip
    tables = R.markdown(out).split("\n\n")
    assert len(tables) == 3
    for t in tables:
        widths = {line.count("|") for line in t.splitlines()}
        assert len(widths) == 1, t
    assert "| 32 | 4096 | 8 | 8 | 400.0 | 25% | 50% |" in tables[2]
