"""Hostile values in every field of the JSON readers: iperf3 runs, SGLang / vLLM / trtllm-bench
result files and HF configs. One table per reader: each field gets the families a careless or
hostile file holds (negative, NaN, inf, 1e300, zero, a fraction where a count goes, a string
where a number goes, a list where a string goes); every one ends in exit 2 and one `error:`
line naming the file and that field, nothing written. A hypothesis test per reader then puts
arbitrary JSON values in the numeric fields and asks for a clean error or a clean profile."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdd_plan.calibration.engine_formats import read_runs
from pdd_plan.calibration.hf_import import profile_from_hf
from pdd_plan.calibration.iperf3 import read_iperf3
from pdd_plan.common.errors import InputError
from tests.cli_helpers import refused

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"
IPERF = DATA / "iperf3" / "loopback-p1.json"
SGLANG = DATA / "engine_results" / "sglang_bench_serving.jsonl"
VLLM = DATA / "engine_results" / "vllm_bench_serve_metadata.json"
TRT_JSON = DATA / "engine_results" / "trtllm_bench_report.json"
TRT_TEXT = DATA / "engine_results" / "trtllm_bench_report.txt"
HF = DATA / "hf_configs"

NAN, INF = float("nan"), float("inf")


def _put(d: dict, path: str, value) -> dict:
    d = copy.deepcopy(d)
    *head, last = path.split(".")
    cur = d
    for k in head:
        cur = cur[int(k)] if isinstance(cur, list) else cur[k]
    if isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value
    return d


def _dump(path: Path, doc, lines: bool = False) -> str:
    # allow_nan: the engines' own json.dump writes NaN and Infinity, so the readers must see them
    path.write_text(json.dumps(doc, allow_nan=True) + ("\n" if lines else ""), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------ iperf3

SENDER = "end.streams.0.sender"
IPERF_CASES = [
    (f"{SENDER}.bytes", v)
    for v in (-5, NAN, INF, 1e300, 2.5, "many", [1], None)
] + [
    (f"{SENDER}.mean_rtt", v) for v in (-3, NAN, INF, 1e300, "fast", [775])
] + [
    (f"{SENDER}.min_rtt", v) for v in (-1, NAN, "low")
] + [
    (f"{SENDER}.retransmits", v) for v in (-1, 1.5, "none", NAN)
] + [
    ("end.sum_received.bits_per_second", v) for v in (-1, 0, NAN, INF, 1e300, "10G", [1], None)
] + [
    ("end.sum_received.seconds", v) for v in (-2, NAN, "2s")
] + [
    ("start.test_start.num_streams", v) for v in (0, -1, 1.5, "1", 1e300, NAN)
] + [
    ("start.test_start.reverse", v) for v in (2, -1, "yes", 0.5)
] + [
    ("start.tcp_mss_default", v) for v in (-1, 1.5, "big", 1e300)
] + [
    ("start.version", v) for v in (["iperf 3.12"], 3.12, "iperf\x1b[31m")
] + [
    ("start.connecting_to.host", v) for v in ([], {"a": 1}, "a\nb")
] + [
    ("end.sender_tcp_congestion", v) for v in (["cubic"], 1)
]  # fmt: skip


def _field_name(path: str) -> str:
    return path.replace(".0.", "[0].").replace("streams[0]", "streams[0]")


@pytest.mark.parametrize(("path", "value"), IPERF_CASES)
def test_iperf3_fields(tmp_path, path, value):
    doc = _put(json.loads(IPERF.read_text()), path, value)
    f = _dump(tmp_path / "run.json", doc)
    out = tmp_path / "line.yaml"
    field = path.replace("streams.0.", "streams[0].")
    refused(
        "line", "calibrate", "--iperf3", f, "--cost-per-month", "100", "--out", str(out),
        needle=("run.json", field),
    )  # fmt: skip
    assert not out.exists()


NUMBERS = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    path=st.sampled_from([p for p, _ in IPERF_CASES if "version" not in p]),
    value=NUMBERS,
)
def test_iperf3_any_value_is_an_answer_or_an_input_error(tmp_path, path, value):
    doc = _put(json.loads(IPERF.read_text()), path, value)
    f = _dump(tmp_path / "any.json", doc)
    try:
        run = read_iperf3(f)
    except InputError:
        return
    assert math.isfinite(run.goodput_gbps) and run.goodput_gbps > 0
    assert all(math.isfinite(x) and x >= 0 for x in (*run.mean_rtt_us, *run.min_rtt_us))
    assert run.sent_bytes >= 0 and run.streams >= 1


def test_iperf3_inputs_are_never_outputs(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(IPERF.read_text())
    before = f.read_bytes()
    refused("line", "calibrate", "--iperf3", str(f), "--cost-per-month", "1", "--out", str(f),
            needle=("r.json", "input"))  # fmt: skip
    g = tmp_path / "g.json"
    g.write_text(IPERF.read_text())
    refused("line", "calibrate", "--iperf3", str(f), "--iperf3", str(g), "--cost-per-month",
            "1", "--out", str(g), needle=("g.json", "input"))  # fmt: skip
    assert f.read_bytes() == before and g.read_bytes() == before


# ------------------------------------------------------------------ SGLang, vLLM, trtllm-bench

SERVING_NUMBERS = (
    "completed", "total_input_tokens", "total_output_tokens", "output_throughput",
    "request_rate", "request_throughput", "max_concurrency",
)  # fmt: skip
BAD_NUMBERS = (-5, NAN, -INF, 1e300, "fast", [1], 2.5)
SGLANG_CASES = [
    (k, v)
    for k in SERVING_NUMBERS
    for v in BAD_NUMBERS
    # a fractional request rate or throughput is a real figure; only counts must be whole
    if not (v == 2.5 and k in ("output_throughput", "request_rate", "request_throughput"))
] + [("output_throughput", 0), ("completed", 0), ("total_output_tokens", 0)]
VLLM_CASES = [
    *SGLANG_CASES,
    *[(k, v) for k in ("tp", "ep") for v in ("eight", -8, 0, 2.5, "8.5", [8], 1e300, NAN)],
    *[("dp_attention", v) for v in ("maybe", [True], 2.5)],
    *[(k, v) for k in ("model_id", "gpu") for v in (["a"], 5, {"a": 1}, "x\x1b[2J")],
]


def _sglang_record() -> dict:
    return json.loads(SGLANG.read_text().splitlines()[0])


@pytest.mark.parametrize(("key", "value"), SGLANG_CASES)
def test_sglang_fields(tmp_path, key, value):
    f = _dump(tmp_path / "sg.jsonl", {**_sglang_record(), key: value}, lines=True)
    needle = ("sg.jsonl", key)
    refused("calibrate", "--from", f, "-m", "llama-3.1-8b", "-g", "h100", "--gpus", "1",
            needle=needle)  # fmt: skip


@pytest.mark.parametrize(("key", "value"), VLLM_CASES)
def test_vllm_fields(tmp_path, key, value):
    f = _dump(tmp_path / "v.json", {**json.loads(VLLM.read_text()), key: value})
    refused("calibrate", "--from", f, needle=("v.json", key))


TRT_CASES = [
    (f"world_info.{k}", v) for k in ("tp_size", "pp_size", "ep_size")
    for v in (0, -1, 2.5, "two", [1], 1e300, NAN)
] + [
    (f"request_info.{k}", v) for k in ("avg_input_length", "avg_output_length")
    for v in (0, -1, NAN, INF, 1e300, "long", [1])
] + [
    ("performance.system_output_throughput_tok_s", v) for v in (0, -1, NAN, INF, 1e300, "x")
] + [
    (f"engine.{k}", v) for k in ("model", "quantization", "kv_cache_dtype") for v in ([1], 7)
] + [("machine.name", v) for v in (["H100"], 100)]  # fmt: skip


@pytest.mark.parametrize(("path", "value"), TRT_CASES)
def test_trtllm_json_fields(tmp_path, path, value):
    f = _dump(tmp_path / "t.json", _put(json.loads(TRT_JSON.read_text()), path, value))
    refused("calibrate", "--from", f, needle=("t.json", path))


TRT_TEXT_CASES = [
    ("TP Size", v) for v in ("0", "-1", "2.5", "eight", "nan", "1e300")
] + [
    ("Average Input Length (tokens)", v) for v in ("0", "-1", "nan", "inf", "1e300", "long")
] + [
    ("Total Output Throughput (tokens/sec)", v) for v in ("0", "-1", "nan", "inf", "1e300", "x")
]  # fmt: skip


@pytest.mark.parametrize(("label", "value"), TRT_TEXT_CASES)
def test_trtllm_text_fields(tmp_path, label, value):
    lines = []
    for line in TRT_TEXT.read_text().splitlines():
        if line.partition(":")[0].strip() == label:
            line = f"{label}: {value}"
        lines.append(line)
    f = tmp_path / "t.txt"
    f.write_text("\n".join(lines) + "\n")
    refused("calibrate", "--from", str(f), needle=("t.txt", label))


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(key=st.sampled_from(SERVING_NUMBERS + ("tp", "ep", "dp_attention")), value=NUMBERS)
def test_vllm_any_value_is_a_run_or_an_input_error(tmp_path, key, value):
    f = _dump(tmp_path / "any.json", {**json.loads(VLLM.read_text()), key: value})
    try:
        runs = read_runs(f)
    except InputError:
        return
    for r in runs:
        assert math.isfinite(r.output_tps) and r.output_tps > 0
        assert r.isl >= 1 and r.osl >= 1
        assert r.tp is None or (isinstance(r.tp, int) and r.tp >= 1)


# ------------------------------------------------------------------ HF config.json

LLAMA = HF / "Meta-Llama-3.1-8B.json"
V3 = HF / "DeepSeek-V3.json"
GQA_KEYS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "vocab_size", "head_dim",
)  # fmt: skip
MLA_KEYS = (
    "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank",
    "first_k_dense_replace",
)  # fmt: skip
HF_BAD = (-1, NAN, INF, 1e300, 2.5, "big", [1], True)
HF_CASES = [(LLAMA, k, v) for k in GQA_KEYS for v in (*HF_BAD, 0)] + [
    (V3, k, v) for k in MLA_KEYS for v in HF_BAD
] + [
    (LLAMA, "architectures", v) for v in ({"a": 1}, "LlamaForCausalLM", [1], [], ["Gpt2"])
] + [
    (LLAMA, "tie_word_embeddings", v) for v in ("yes", 1, [True])
] + [
    (LLAMA, "quantization_config", v) for v in ([1], "fp8")
]  # fmt: skip


@pytest.mark.parametrize(("config", "key", "value"), HF_CASES)
def test_import_hf_fields(tmp_path, config, key, value):
    cfg = json.loads(config.read_text())
    cfg[key] = value
    f = _dump(tmp_path / "config.json", cfg)
    out = tmp_path / "m.yaml"
    refused("profiles", "import-hf", f, "--name", "t", "--out", str(out),
            needle=("config.json", key))  # fmt: skip
    assert not out.exists()


@pytest.mark.parametrize(
    ("config", "edit", "key"),
    [
        (LLAMA, {"num_key_value_heads": 64}, "num_key_value_heads"),  # more KV than query heads
        (LLAMA, {"num_key_value_heads": 5}, "num_key_value_heads"),  # 32 heads in groups of 6.4
        (LLAMA, {"head_dim": None, "hidden_size": 4100}, "hidden_size"),  # 4100 / 32 heads
        (V3, {"num_experts_per_tok": 300}, "num_experts_per_tok"),  # 300 of 256 experts
        (V3, {"first_k_dense_replace": 1000}, "first_dense_layers"),  # above the 61 layers
    ],
)
def test_import_hf_impossible_shapes(tmp_path, config, edit, key):
    cfg = {**json.loads(config.read_text()), **edit}
    cfg = {k: v for k, v in cfg.items() if v is not None}
    f = _dump(tmp_path / "config.json", cfg)
    refused("profiles", "import-hf", f, "--name", "t", needle=("config.json", key))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(key=st.sampled_from(GQA_KEYS), value=NUMBERS)
def test_import_hf_any_value_is_a_profile_or_an_input_error(key, value):
    cfg = {**json.loads(LLAMA.read_text()), key: value}
    try:
        prof = profile_from_hf(cfg, "t")
    except InputError:
        return
    a = prof.attention
    assert a.num_kv_heads <= a.num_heads and a.num_heads % a.num_kv_heads == 0


# ------------------------------------------------------------------ not a file, an input


@pytest.mark.parametrize(
    "args",
    [
        ("line", "calibrate", "--cost-per-month", "1", "--iperf3", "{}"),
        ("calibrate", "--from", "{}"),
        ("calibrate", "{}"),
        ("profiles", "import-hf", "{}", "--name", "t"),
        ("validate", "{}"),
        ("trace", "stats", "{}"),
        ("evaluate", "{}"),
    ],
)
def test_a_device_is_not_a_regular_file_and_a_folder_is_a_folder(tmp_path, args):
    refused(*(a.replace("{}", "/dev/zero") for a in args), needle=("/dev/zero", "regular file"))
    refused(*(a.replace("{}", str(tmp_path)) for a in args), needle=(str(tmp_path), "folder"))
    missing = str(tmp_path / "missing.json")
    refused(*(a.replace("{}", missing) for a in args), needle=(missing, "not found"))
