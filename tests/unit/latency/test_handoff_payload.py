"""The handoff's payload, priced both ways and chosen per plan (latency.handoff): recompute is
the joined extend, KV is one more transfer on the line's law; `auto` takes the shorter worst
case, as the PDD report chose recompute for its bounded worst case."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pdd_plan.evaluate.fleet import _faster
from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.scenario import Policy
from pdd_plan.latency import handoff
from pdd_plan.latency.line.transfer import LineConfig
from pdd_plan.perf import layers
from pdd_plan.perf.handoff import joined_extend
from pdd_plan.perf.instance import Instance, parallelism_candidates

pytestmark = pytest.mark.unit

CTX = 65_536.0


@pytest.fixture(scope="module")
def md() -> Instance:
    m = profiles.model("deepseek-v4-pro")
    return parallelism_candidates(m, profiles.gpu("h200"), 16, extra_sizes=1)[-1]


def _line(name: str) -> LineConfig:
    return LineConfig(profiles.line(name), 1)


def test_recompute_is_the_joined_extend(md):
    p = handoff.recompute(md, 100, CTX, 64, 8192)
    j = joined_extend(md, 100, CTX, 64, CTX, 8192)
    assert (p.mean_s, p.worst_s) == (pytest.approx(j.mean_s), pytest.approx(j.max_s))


def test_kv_grows_with_the_tokens_and_the_load(md):
    ln = _line("shared-10g")
    few, many = handoff.kv(md, np.array([10.0, 250.0]), ln, 0.2)
    assert many.mean_s > few.mean_s  # more bytes
    assert few.worst_s >= few.mean_s and many.worst_s >= many.mean_s
    busy = handoff.kv(md, 250.0, ln, 0.8)[0]
    assert busy.mean_s > many.mean_s  # a busier line shares less with the payload
    # the payload is the k tokens' KV with the window state: the report's 100-token handoff
    # measured 4,649 KB (pdd-facts.md); pdd-plan's accounting gives 4,114 KB (-12%)
    assert float(layers.kv_bytes(md.model, 100.0)) == pytest.approx(4_649 * 1024, rel=0.15)


@pytest.mark.parametrize(
    ("line", "want"),
    [("eth-10g", "kv"), ("shared-10g", "recompute")],
)
def test_auto_takes_the_shorter_worst_case(md, line, want):
    pol = Policy()
    c = handoff.choose(pol, md, CTX, 64, 8192, _line(line), 0.3)
    worst = {"recompute": c.recompute.worst_s, "kv": c.kv.worst_s}
    assert c.payload == want == min(worst, key=worst.get)
    assert "worst case" in c.why


def test_policy_fixes_the_payload_and_no_line_means_recompute(md):
    ln = _line("eth-10g")
    for p in ("recompute", "kv"):
        c = handoff.choose(Policy(handoff_payload=p), md, CTX, 64, 8192, ln, 0.3)
        assert c.payload == p and p in c.why
    c = handoff.choose(Policy(handoff_payload="kv"), md, CTX, 64, 8192, None, 0.0)
    assert c.payload == "recompute" and c.kv is None


def test_times_follow_the_choice(md):
    ln = _line("shared-10g")
    k = np.array([1.0, 37.0, 256.0])
    ctx = np.full(3, CTX)
    kv = handoff.Choice("kv", "", handoff.recompute(md, 256, CTX, 64, 8192), None)
    got = handoff.times(kv, md, k, ctx, 64, 8192, ln, 0.3, 256)
    direct = [p.mean_s for p in handoff.kv(md, k, ln, 0.3)]
    assert got == pytest.approx(direct, rel=0.02)  # interpolated on the k grid
    rc = handoff.Choice("recompute", "", kv.recompute, None)
    got = handoff.times(rc, md, k, ctx, 64, 8192, ln, 0.3, 256)
    assert got == pytest.approx([handoff.recompute(md, x, CTX, 64, 8192).mean_s for x in k])


def test_recompute_memo_is_the_joined_extend_on_fresh_equal_instances(md):
    """recompute's memo, keyed by the instance's value (perf.handoff.shape_key), gives a fresh
    equal instance exactly the joined extend it would compute, and a faster profile its own."""
    for inst in (md, dataclasses.replace(md), dataclasses.replace(md, gpu=_faster(md.gpu, 1.1))):
        for k, b in ((1.0, 64.0), (37.0, 64.0), (256.0, 100.5)):
            p = handoff.recompute(inst, k, CTX, b, 8192)
            j = joined_extend(inst, k, CTX, b, CTX, 8192)
            assert (p.mean_s, p.worst_s) == (j.mean_s, j.max_s)
