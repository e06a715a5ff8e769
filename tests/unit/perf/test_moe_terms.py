"""Perf model v2 (issue 12): overlap, redundant experts, interconnect, cached-prefix MLA,
row readings and the leave-one-source-out accuracy harness."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration.readings import load_readings
from pdd_plan.cli.main import app
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.perf import comm, overlap, roofline
from pdd_plan.perf import layers as perf_layers
from pdd_plan.perf.instance import Instance

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def v3():
    return profiles.model("deepseek-v3")


# ------------------------------------------------------------------ overlap


COVERS = {
    "attention_prep": 0.2,
    "attention_core": 0.5,
    "attention": 0.7,
    "shared_experts": 0.1,
    "routed_experts": 0.9,
    "routed_down": 0.3,
}


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_exposed_between_zero_and_comm_and_monotone(phase):
    inst = Instance(v3(), profiles.gpu("h100"), 32, tp=32, ep=32, dp=32)
    prev = 0.0
    for m in [0.0, 0.1, 0.5, 0.9, 1.0, 1.5, 3.0, 10.0]:
        e = overlap.exposed_two_batch(inst, m / 3, 2 * m / 3, COVERS, phase)
        assert 0.0 <= e <= m + 1e-12
        assert e >= prev - 1e-12  # monotone in communication
        prev = e
    nothing = dict.fromkeys(COVERS, 0.0)
    assert overlap.exposed_two_batch(inst, 1.0, 2.0, nothing, phase) == pytest.approx(3.0)


def test_prefill_overlap_steals_sms():
    # the normal kernels take ~18 % of SMs: a small all-to-all still costs s*M
    inst = Instance(v3(), profiles.gpu("h100"), 32, tp=32, ep=32, dp=32)
    s = comm.serving().deepep.normal_sm_fraction
    big = {k: 100.0 for k in COVERS}
    assert overlap.exposed_two_batch(inst, 0.1, 0.2, big, "prefill") == pytest.approx(s * 0.3)
    assert overlap.exposed_two_batch(inst, 0.1, 0.2, big, "decode") == 0.0


def test_decode_stages_by_hand():
    # SGLang's decode schedule: dispatch under shared experts + attention prep, combine under
    # the attention kernel stage; the expert GEMMs hide nothing
    inst = Instance(v3(), profiles.gpu("h100"), 32, tp=32, ep=32, dp=32)
    d, c = 0.6, 1.2
    want = max(0.0, d - 0.1 - 0.2) + max(0.0, c - 0.5)
    assert overlap.exposed_two_batch(inst, d, c, COVERS, "decode") == pytest.approx(want)
    more_experts = {**COVERS, "routed_experts": 50.0, "routed_down": 50.0 / 3}
    assert overlap.exposed_two_batch(inst, d, c, more_experts, "decode") == pytest.approx(want)
    # single-batch overlap: dispatch exposed, combine under down GEMM + shared experts
    sbo = overlap.exposed_single_batch(inst, d, c, COVERS, "decode")
    assert sbo == pytest.approx(d + max(0.0, c - 0.3 - 0.1))


def test_cover_classes_add_up():
    inst = Instance(v3(), profiles.gpu("h100"), 32, tp=32, ep=32, dp=32)
    w = roofline._token_work(inst, 4096.0)
    rates = (1e-15, 2e-15, 0.01)
    cv = overlap.cover_seconds(inst, w.tokens, w.gemm_other, w.gemm_routed, rates)
    assert cv["attention"] == pytest.approx(cv["attention_prep"] + cv["attention_core"])
    assert cv["routed_down"] == pytest.approx(cv["routed_experts"] / 3)
    assert cv["routed_experts"] == pytest.approx(w.gemm_routed * 2e-15)
    p = inst.params  # shared experts: 2 FLOPs per parameter and token
    assert cv["shared_experts"] == pytest.approx(2 * p.shared_experts * 4096 * 1e-15)


def test_decode_tbo_gain_near_published():
    # lm-sys blog 2025-05-05 (large-scale EP), TBO ablation: decode on 72 H100 (EP72), 256
    # requests per GPU at 2,000 tokens: +25.5 % with two-batch overlap (22,310 tok/s per node).
    # Whole-pass overlap would predict ~+68 %; the stage schedule hides far less.
    g = cal.analytic_gpu("h100")
    m = perf_layers.with_kv_dtype(v3(), "bf16")
    t = {}
    for tbo in (True, False):
        inst = Instance(
            m, g, 72, tp=72, ep=72, dp=72, dtype="fp8", redundant_experts=32, two_batch_overlap=tbo
        )
        t[tbo] = roofline.decode_step(inst, 256 * 72, 2000).total_s
    assert 0.15 < t[False] / t[True] - 1 < 0.40


def test_tbo_default_and_off_switch():
    g = profiles.gpu("h100")
    on = Instance(v3(), g, 32, tp=32, ep=32, dp=32)
    off = Instance(v3(), g, 32, tp=32, ep=32, dp=32, two_batch_overlap=False)
    assert on.tbo and not off.tbo
    assert not Instance(v3(), g, 8, tp=8, ep=8, dp=1).tbo  # no DP attention: engine default off
    a = roofline.batch_prefill_time(on, 128, 4096, 0, 16384)
    b = roofline.batch_prefill_time(off, 128, 4096, 0, 16384)
    assert a.hidden_communication_s > 0 and b.hidden_communication_s == 0
    assert a.total_s < b.total_s
    assert a.communication_s == pytest.approx(b.communication_s)


def test_tbo_auto_takes_the_faster_per_pass():
    # decode on one node: tiny all-to-all, a second weight read would cost more than it hides
    g = profiles.gpu("h200")
    kw = dict(tp=8, ep=8, dp=8)
    auto = Instance(v3(), g, 8, **kw)
    on = Instance(v3(), g, 8, two_batch_overlap=True, **kw)
    off = Instance(v3(), g, 8, two_batch_overlap=False, **kw)
    for batch in (64, 1024):
        t = {k: roofline.decode_step(i, batch, 4000).total_s for k, i in
             (("auto", auto), ("on", on), ("off", off))}  # fmt: skip
        assert t["auto"] == pytest.approx(min(t["on"], t["off"]))


# ------------------------------------------------------------------ all-to-all bytes


def test_a2a_bytes_of_one_layer_by_hand():
    # EP32 over 4 nodes of 8, 16,384 tokens per GPU, top-8, hidden 7168, FP8 dispatch +
    # BF16 combine = 3 bytes per element.
    g = profiles.gpu("h100")
    inst = Instance(v3(), g, 32, tp=32, ep=32, dp=32)
    tokens = 16384 * 32
    nvl, rdma = comm.a2a_bytes(inst, tokens, "prefill")
    layers = inst.params.moe_layers
    assert layers == 58
    # normal kernels: one RDMA copy per remote node reached: 3 * (1 - (3/4)^8) = 2.6996
    remote_nodes = 3 * (1 - 0.75**8)
    assert rdma / layers == pytest.approx(16384 * remote_nodes * 7168 * 3)
    # NVLink: 8 * 7/32 local copies + 8 * 24/32 forwarded = 7.75 copies
    assert nvl / layers == pytest.approx(16384 * 7.75 * 7168 * 3)
    # low-latency kernels (decode): every remote copy on the wire, 8 * 24/32 = 6 over RDMA
    nvl_d, rdma_d = comm.a2a_bytes(inst, tokens, "decode")
    assert rdma_d / layers == pytest.approx(16384 * 6 * 7168 * 3)
    assert nvl_d / layers == pytest.approx(16384 * 1.75 * 7168 * 3)


def test_intra_vs_inter_node():
    h100 = profiles.gpu("h100")
    one_node = Instance(v3(), h100, 8, tp=8, ep=8, dp=8)
    assert comm.a2a_bytes(one_node, 8192, "decode")[1] == 0.0  # all over NVLink
    # the same EP32 on a 72-GPU NVLink domain (GB200 NVL72) never touches RDMA
    gb = profiles.gpu("gb200")
    assert gb.interconnect.domain_gpus == 72
    nvl72 = Instance(v3(), gb, 32, tp=32, ep=32, dp=32)
    assert comm.a2a_bytes(nvl72, 32768, "prefill")[1] == 0.0
    h = Instance(v3(), h100, 32, tp=32, ep=32, dp=32)
    assert comm.a2a_bytes(h, 32768, "prefill")[1] > 0.0
    # H800's NVLink (400 GB/s) is narrower than H100's (900): intra-node a2a takes longer
    h800 = Instance(v3(), profiles.gpu("h800"), 8, tp=8, ep=8, dp=8)
    assert comm.a2a_seconds(h800, 65536, "prefill") > comm.a2a_seconds(one_node, 65536, "prefill")
    ratio = comm.a2a_seconds(h800, 65536, "prefill") / comm.a2a_seconds(one_node, 65536, "prefill")
    assert ratio == pytest.approx(900 / 400)


# ------------------------------------------------------------------ redundant experts


def test_ep72_needs_redundant_experts_and_counts_memory():
    g = profiles.gpu("h100")
    with pytest.raises(InputError, match="does not divide 256"):
        Instance(v3(), g, 72, tp=72, ep=72, dp=72)
    inst = Instance(v3(), g, 72, tp=72, ep=72, dp=72, redundant_experts=32)
    assert inst.expert_slots == 288
    w = inst.weights
    attn = inst.params.attention * perf_layers.DTYPE_BYTES[inst.compute_dtype]
    expect = attn + (w["dense"] - attn) / 72 + w["experts"] * 288 / 256 / 72
    assert inst.weight_bytes_per_gpu == pytest.approx(expect)
    # 4 expert copies (of ~44 MB each) per layer and GPU: 288/72
    per_layer = w["expert_bytes"] * 288 / 72
    assert w["experts"] * 288 / 256 / 72 == pytest.approx(per_layer * inst.params.moe_layers)
    # EPLB: less imbalance than without
    load = comm.serving().expert_load
    assert inst.expert_imbalance == load.imbalance_with_eplb < load.imbalance_without_eplb


def test_imbalance_slows_moe_only():
    g = profiles.gpu("h100")
    bal = Instance(v3(), g, 32, tp=32, ep=32, dp=32, expert_load=1.0)
    imb = Instance(v3(), g, 32, tp=32, ep=32, dp=32, expert_load=1.5)
    assert (
        roofline.decode_step(imb, 4096, 2000).total_s
        > roofline.decode_step(bal, 4096, 2000).total_s
    )
    dense = Instance(profiles.model("llama-3.1-8b"), g, 1, tp=1, ep=1)
    assert dense.expert_imbalance == 1.0
    with pytest.raises(InputError):
        Instance(profiles.model("llama-3.1-8b"), g, 1, tp=1, ep=1, redundant_experts=4)


# ------------------------------------------------------------------ cached-prefix MLA


def test_mla_prefix_takes_cheaper_of_expansion_and_absorbed():
    m = v3()
    a = m.attention
    # a long chunk over a cached prefix expands the latent (a GEMM per cached token)
    attn, expand = perf_layers.prefill_attention_flops(m, 8192, 8192)
    per_cached = 2 * a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
    assert expand == pytest.approx(per_cached * 8192 * m.num_layers)
    # a short extend attends absorbed, no expansion
    attn_s, expand_s = perf_layers.prefill_attention_flops(m, 16, 8192)
    assert expand_s == 0.0
    absorbed = float(perf_layers.attention_flops_per_token(m, 8192, "decode")) * 16
    assert attn_s >= absorbed
    # no cache: plain causal prefill
    assert perf_layers.prefill_attention_flops(m, 4096, 0)[1] == 0.0


# ------------------------------------------------------------------ done-when commands


def test_done_when_prefill_exposed_under_30_percent():
    r = CliRunner().invoke(
        app,
        [
            "perf", "--model", "deepseek-v3", "--gpu", "h100", "--gpus", "32", "--ep", "32",
            "--dp-attention", "--phase", "prefill", "-L", "4096", "-B", "128", "--chunk",
            "16384", "--format", "json",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    b = d["breakdown_s"]
    assert b["exposed_communication"] <= 0.30 * d["latency_s"]
    assert sum(b.values()) == pytest.approx(d["latency_s"])
    assert d["communication_s"]["total"] >= b["exposed_communication"]


def test_done_when_ep72_redundant_decode_runs():
    r = CliRunner().invoke(
        app,
        [
            "perf", "--model", "deepseek-v3", "--gpu", "h100", "--gpus", "72", "--ep", "72",
            "--redundant-experts", "32", "--dp-attention", "--phase", "decode", "-L", "2000",
            "--batch", "18432",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "ep72+32" in r.stdout and "exposed communication" in r.stdout


def test_redundant_experts_flag_errors():
    r = CliRunner().invoke(
        app,
        [
            "perf", "--model", "deepseek-v3", "--gpu", "h100", "--gpus", "72", "--ep", "72",
            "--redundant-experts", "30", "--phase", "decode", "-L", "2000",
        ],
    )  # fmt: skip
    assert r.exit_code == 2
    assert "does not divide 256 + 30 redundant experts" in r.output


# ------------------------------------------------------------------ readings and accuracy


def test_every_row_predicted_or_set_aside():
    path = cal.calibration_dir() / "calibration_measurements.csv"
    rows, aside = cal.read_rows(path)
    with path.open(newline="", encoding="utf-8") as fh:
        n_csv = sum(1 for _ in csv.DictReader(fh))
    assert n_csv == 229 and len(rows) + len(aside) == n_csv
    # every row has its own reading (none falls back to parsing the CSV text silently)
    readings = load_readings(path)
    assert sorted(readings.rows) == list(range(1, n_csv + 1))
    assert {a.use for a in aside} <= {"simulate", "out"}
    assert all(a.reading for a in aside) and all(r.document for r in rows)
    assert {r.family for r in rows} == {"dense", "moe"}


def _load_accuracy():
    return importlib.import_module("benchmarks.accuracy")


def test_accuracy_harness_on_three_rows(tmp_path, capsys):
    src = cal.calibration_dir() / "calibration_measurements.csv"
    lines = src.read_text(encoding="utf-8").splitlines()
    # rows 1, 3 and 10 (TensorRT-LLM overview, H100), parsed from the CSV text (no readings)
    small = tmp_path / "m.csv"
    small.write_text("\n".join([lines[0], lines[1], lines[3], lines[10]]) + "\n")
    acc = _load_accuracy()
    band = tmp_path / "band.yaml"
    acc.main([str(small), "--write-band", "--band-path", str(band)])
    out = capsys.readouterr().out
    assert "leave-one-source-out" in out and "family dense" in out
    text = band.read_text()
    assert "dense:" in text and "median_abs_error" in text and "moe:" not in text
    entries = acc.evaluate(cal.read_rows(small)[0])
    assert len(entries) == 3
    # one document: held out, no GPU has training rows left, so held-out equals analytic,
    # while in-sample fits those very rows and is closer
    for e in entries:
        assert e["err"]["held_out"] == pytest.approx(e["err"]["analytic"])
    med = acc.summary(entries, "in_sample")["median_abs_error"]
    assert med < acc.summary(entries, "analytic")["median_abs_error"]
