"""The planner's perf caches are keyed by what the perf model reads: a GPU copied with another
price (a scenario's price override, a regime map's every cell) shares their entries, a GPU with
other efficiency factors does not, and either way the answer is the uncached one."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.latency.prefill import pool
from pdd_plan.optimize import tables
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance, gpu_perf_key
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.unit


def _copies():
    h200 = profiles.gpu("h200")
    cheaper = h200.model_copy(
        update={"price": h200.price.model_copy(update={"usd_per_gpu_hour": 1.0})}
    )
    e = h200.efficiency  # a dense model below: the dense factors are the ones it reads
    eff = e.model_copy(update={"mfu": e.mfu * 0.5, "mbu": e.mbu * 0.5})
    slower = h200.model_copy(update={"efficiency": eff})
    return h200, cheaper, slower


def test_the_key_ignores_price_not_efficiency():
    h200, cheaper, slower = _copies()
    assert cheaper is not h200 and cheaper.price != h200.price
    assert gpu_perf_key(cheaper) == gpu_perf_key(h200)
    assert gpu_perf_key(slower) != gpu_perf_key(h200)


def test_decode_batch_cap_shared_across_price_copies(monkeypatch):
    h200, cheaper, slower = _copies()
    dense = profiles.model("llama-3.1-70b")
    calls = []
    real = roofline.max_batch_for_tpot

    def counted(*a):
        calls.append(a)
        return real(*a)

    monkeypatch.setattr(roofline, "max_batch_for_tpot", counted)
    tables._BATCH_CACHE.clear()
    ctx, tpot = 3000.0 + np.pi, 0.06  # a context no other test asks for
    a = tables._max_batch(Instance(dense, h200, 4, tp=4, ep=1), ctx, tpot)
    b = tables._max_batch(Instance(dense, cheaper, 4, tp=4, ep=1), ctx, tpot)
    assert b == a and len(calls) == 1  # the price copy is a hit
    c = tables._max_batch(Instance(dense, slower, 4, tp=4, ep=1), ctx, tpot)
    assert len(calls) == 2  # other factors: computed
    # half the efficiency: a step takes longer, so fewer requests fit under the TPOT target
    assert c[0] < a[0]
    assert c == real(Instance(dense, slower, 4, tp=4, ep=1), ctx, tpot)


def test_prefill_service_shared_across_equal_strata_and_price_copies():
    h200, cheaper, slower = _copies()
    dense = profiles.model("llama-3.1-70b")
    path = profiles.example_path("pdd-paper")
    spec = build_context(load_scenario(path), str(path)).class_spec
    one, two = build_classes(spec), build_classes(spec)  # equal strata, distinct objects
    assert one.fine is not two.fine
    pool._SERVICE_CACHE.clear()
    a = pool.prefill_strata_service_s(Instance(dense, h200, 4, tp=4, ep=1), one, 8192)
    b = pool.prefill_strata_service_s(Instance(dense, cheaper, 4, tp=4, ep=1), two, 8192)
    assert b is a and len(pool._SERVICE_CACHE) == 1
    c = pool.prefill_strata_service_s(Instance(dense, slower, 4, tp=4, ep=1), two, 8192)
    assert len(pool._SERVICE_CACHE) == 2 and np.all(c >= a) and np.any(c > a)
