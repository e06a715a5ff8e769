"""The per-request state (`kv_cache.per_request_state_bytes`): bytes a request carries whatever
its length, on the line and in decode memory, checked by hand arithmetic; a bad value in a
model profile is a one-line error."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.latency.line import transfer
from pdd_plan.perf import layers
from pdd_plan.perf.instance import Instance

pytestmark = pytest.mark.unit

# docs/kv-bytes.md: 30 CSA x (584/4 + 132/4) + 31 HCA x 584/128, the window 128 x 584 x 61,
# and the fp32 compressor rings (c4 8 x 2 x 2 x 512 x 4 B, its indexer 8 x 2 x 2 x 128 x 4 B,
# c128 128 x 2 x 512 x 4 B per layer)
V4_PER_TOKEN = 30 * (584 / 4 + 132 / 4) + 31 * 584 / 128  # 5,511.4375
V4_WINDOW = 128 * 584 * 61  # 4,559,872
V4_RINGS = 30 * 8 * 2 * 2 * 512 * 4 + 30 * 8 * 2 * 2 * 128 * 4 + 31 * 128 * 2 * 512 * 4


def _with_state(name: str, state: float):
    m = profiles.model(name)
    kv = m.kv_cache.model_copy(update={"per_request_state_bytes": state})
    return m.model_copy(update={"kv_cache": kv})


def test_the_audits_ring_total():
    assert V4_RINGS == 18_710_528  # 1,966,080 + 491,520 + 16,252,928 (docs/kv-bytes.md)


def test_shipped_profiles_leave_the_state_at_zero():
    # the nominal leaves the compressor states out (not verified that a PD transfer sends them)
    for name in profiles.bundled_names("models"):
        assert profiles.model(name).kv_cache.per_request_state_bytes == 0.0, name
    assert layers.kv_fixed_bytes_per_request(profiles.model("deepseek-v4-pro")) == V4_WINDOW


def test_line_bytes_with_state_by_hand():
    m = _with_state("deepseek-v4-pro", V4_RINGS)
    t, hit = np.array([65_536.0]), np.array([0.9])
    # DRC: MD holds 90% of the context, so 6,553.6 tokens cross, plus window and state
    got = transfer.line_bytes(m, t, hit, drc=True)[0]
    assert got == pytest.approx(6_553.6 * V4_PER_TOKEN + V4_WINDOW + 18_710_528, rel=1e-12)
    # without DRC the whole context crosses, and the state still once
    got = transfer.line_bytes(m, t, hit, drc=False)[0]
    assert got == pytest.approx(65_536 * V4_PER_TOKEN + V4_WINDOW + 18_710_528, rel=1e-12)
    assert layers.kv_fixed_bytes_per_request(m) == V4_WINDOW + V4_RINGS
    # a GQA model has no window: line bytes are tokens x 2 x 32 layers x 8 heads x 128 x 2 B
    g = _with_state("llama-3.1-8b", 1e6)
    got = transfer.line_bytes(g, np.array([1000.0]), np.array([0.0]), drc=False)[0]
    assert got == 1000 * 131_072 + 1_000_000


def test_decode_memory_counts_the_state():
    """A request of 8,192 tokens of Llama-3.1-8B (BF16) holds 8,192 x 131,072 B; with 50 MB of
    state per request the pool (which the state does not change) holds fewer of them."""
    g = profiles.gpu("h100")
    plain = Instance(profiles.model("llama-3.1-8b"), g, 1, tp=1, ep=1)
    more = Instance(_with_state("llama-3.1-8b", 50e6), g, 1, tp=1, ep=1)
    pool = plain.kv_pool_bytes
    assert more.kv_pool_bytes == pool > 0
    assert plain.max_batch(8192) == math.floor(pool / (8192 * 131_072))
    assert more.max_batch(8192) == math.floor(pool / (8192 * 131_072 + 50e6))
    assert more.max_batch(8192) < plain.max_batch(8192)
    # the per-token capacity (what a prefix cache holds) is the tokens' alone
    assert more.kv_capacity_tokens == plain.kv_capacity_tokens


@pytest.mark.parametrize("bad, word", [(-1, "greater than or equal"), (5e12, "less than or equal")])
def test_bad_state_in_a_model_profile_is_one_line(tmp_path, bad, word):
    src = profiles.data_dir() / "profiles" / "models" / "llama-3.1-8b.yaml"
    d = yaml.safe_load(src.read_text())
    d["kv_cache"]["per_request_state_bytes"] = bad
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError) as e:
        profiles.model(str(f))
    msg = str(e.value)
    assert "\n" not in msg and "kv_cache.per_request_state_bytes" in msg and word in msg, msg
