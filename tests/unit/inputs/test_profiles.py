"""Bundled GPU, model and line profiles load, are named after their files and agree with the facts."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pydantic
import pytest
import yaml

from pdd_plan.inputs import profiles
from pdd_plan.inputs.profiles import bundled_names, data_dir, example_path, load_profile
from pdd_plan.inputs.schema import GPUProfile, ModelProfile
from pdd_plan.latency.line.transfer import rdma_transfer_s
from pdd_plan.perf import layers

pytestmark = pytest.mark.unit

REQUIRED = {
    "gpus": {"h100", "h200", "h20", "h800", "a100-80g", "b200", "l40s", "mi300x"},
    "models": {
        "deepseek-v4-pro",
        "deepseek-v4-flash",
        "deepseek-v3",
        "deepseek-v3.2",
        "qwen3-235b-a22b",
        "qwen3-32b",
        "llama-3.1-70b",
        "llama-3.1-8b",
        "kimi-k2",
    },
    "lines": {f"eth-{g}g" for g in (1, 10, 20, 25, 40, 100, 400)},
}

ALL = [(kind, name) for kind in REQUIRED for name in bundled_names(kind)]


@pytest.mark.parametrize("kind", sorted(REQUIRED))
def test_bundled_names_cover_required(kind):
    assert REQUIRED[kind] <= set(bundled_names(kind))


@pytest.mark.parametrize(("kind", "name"), ALL, ids=[f"{k}/{n}" for k, n in ALL])
def test_profile_loads_and_name_matches_stem(kind, name):
    p = load_profile(kind, name)
    assert p.name == name
    # Loading by path gives the same object as loading by name.
    path = data_dir() / "profiles" / kind / f"{name}.yaml"
    assert load_profile(kind, str(path)) == p


@pytest.mark.parametrize("name", bundled_names("gpus"))
def test_gpu_fp8_is_twice_bf16(name):
    c = load_profile("gpus", name).compute
    if c.fp8_tflops is None:
        return
    # Dense vendor figures; L40S's datasheet FP8 733 is 1.2 % above 2 x 362.05.
    assert c.fp8_tflops == pytest.approx(2 * c.bf16_tflops, rel=0.015)


def test_a100_has_no_fp8_and_only_blackwell_and_cdna4_have_fp4():
    assert load_profile("gpus", "a100-80g").compute.fp8_tflops is None
    with_fp4 = {n for n in bundled_names("gpus") if load_profile("gpus", n).compute.fp4_tflops}
    assert with_fp4 <= {"b200", "b300", "gb200", "gb300", "mi355x"}  # Blackwell, CDNA4


@pytest.mark.parametrize("name", bundled_names("lines"))
def test_line_cost_per_hour(name):
    line = load_profile("lines", name)
    assert line.cost_per_hour == pytest.approx(line.cost_per_month * 12 / 8760)


@pytest.mark.parametrize("name", bundled_names("models"))
def test_model_compress_ratios_cover_layers(name):
    m = load_profile("models", name)
    if m.attention.kind == "compressed":
        assert len(m.attention.compress_ratios) >= m.num_layers
        assert m.page_size % 128 == 0


def _without(d: dict, *path: str) -> dict:
    """A deep copy of `d` with the key at `path` removed."""
    out = copy.deepcopy(d)
    node = out
    for k in path[:-1]:
        node = node[k]
    del node[path[-1]]
    return out


def test_rdma_latency_is_a_profile_number_with_a_default():
    raw = yaml.safe_load((data_dir() / "profiles" / "gpus" / "h100.yaml").read_text())
    stated = GPUProfile.model_validate(raw).interconnect
    assert stated.rdma_latency_ms == 5.0 and "rdma_latency_ms" in stated.source
    old = GPUProfile.model_validate(_without(raw, "interconnect", "rdma_latency_ms"))
    assert old.interconnect.rdma_latency_s == 0.005  # profiles written before the field
    # callers that do not pass the latency get the profile default, exactly
    assert rdma_transfer_s(0.0, 8, 400.0, 0.7) == old.interconnect.rdma_latency_s


def test_compress_ratios_come_from_the_profile():
    m = load_profile("models", "deepseek-v4-pro")
    a = m.attention
    assert (a.csa_compress_ratio, a.hca_compress_ratio) == (4, 128)
    assert "csa_compress_ratio" in a.source
    raw = m.model_dump()
    # profiles written before the fields (e.g. by an older import-hf) keep DeepSeek-V4's values
    old = ModelProfile.model_validate(_without(raw, "attention", "csa_compress_ratio"))
    assert layers.kv_bytes_per_token(old) == layers.kv_bytes_per_token(m)
    # a model with CSA over 8 tokens per row holds less KV per token than one over 4
    raw8 = {**raw, "attention": {**raw["attention"], "csa_compress_ratio": 8}}
    raw8["attention"]["compress_ratios"] = [8 if r == 4 else r for r in a.compress_ratios]
    m8 = ModelProfile.model_validate(raw8)
    assert layers.kv_bytes_per_token(m8) < layers.kv_bytes_per_token(m)
    t = np.array([1e3, 1e5])
    assert np.all(layers.attention_bytes_per_token(m8, t) < layers.attention_bytes_per_token(m, t))
    with pytest.raises(pydantic.ValidationError, match="must be 0, 4 or 128"):
        ModelProfile.model_validate(
            {**raw, "attention": {**raw["attention"], "compress_ratios": [4, 16] * 40}}
        )


@pytest.mark.unit
def test_a_bundled_example_is_found_by_name_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert profiles.scenario_path(None) == str(profiles.example_path())
    assert profiles.scenario_path("narrow-line") == str(profiles.example_path("narrow-line"))
    assert Path(profiles.scenario_path("narrow-line")).is_file()
    # a file that exists wins over a bundled name; paths and unknown names are left alone
    (tmp_path / "narrow-line").write_text("name: mine\n", encoding="utf-8")
    assert profiles.scenario_path("narrow-line") == "narrow-line"
    assert profiles.scenario_path("nosuch") == "nosuch"
    assert profiles.scenario_path("examples/narrow-line.yaml") == "examples/narrow-line.yaml"
    assert "pdd-paper" in profiles.bundled_examples()


def test_every_field_of_the_default_lines_is_named_in_its_source():
    """Each number of the default scenario's line candidates has its source or says it is an
    assumption: every field is named in the profile's `source:` (a profile of other fields
    only, or a new field nobody sourced, fails)."""
    cands = yaml.safe_load(example_path("pdd-paper").read_text())["link"]["candidates"]
    assert cands and all(c.startswith("shared-") for c in cands)
    for name in cands:
        d = yaml.safe_load((data_dir() / "profiles" / "lines" / f"{name}.yaml").read_text())
        src = d["source"]
        missing = [k for k in d if k not in ("name", "source") and k not in src]
        assert not missing, (name, missing)
        assert src.count("assumption") >= 4, name  # background, RTT, setup, connections, ...
