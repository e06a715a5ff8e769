"""The parameter counts are memoized per architecture (perf/layers.py `param_counts`): a copy of
a profile that changes only dtypes shares them; one that changes the FFN or a size does not."""

from __future__ import annotations

import pytest

from pdd_plan.inputs import profiles
from pdd_plan.perf import layers

pytestmark = pytest.mark.unit


def test_a_dtype_copy_shares_the_counts_an_architecture_change_does_not():
    m = profiles.model("deepseek-v3")
    base = layers.param_counts(m)
    fp8_kv = layers.with_kv_dtype(m, "fp8" if m.kv_cache.dtype != "fp8" else "bf16")
    assert fp8_kv is not m and layers.param_counts(fp8_kv) is base
    moe = m.ffn.moe
    assert moe is not None
    more = m.model_copy(
        update={
            "ffn": m.ffn.model_copy(
                update={"moe": moe.model_copy(update={"num_experts": 2 * moe.num_experts})}
            )
        }
    )
    twice = layers.param_counts(more)
    # routed experts: MoE layers x experts x 3 h I (hand arithmetic), so twice the experts twice that
    per = 3 * m.hidden_size * moe.moe_intermediate_size
    assert base.routed_experts == (m.num_layers - m.ffn.first_dense_layers) * moe.num_experts * per
    assert twice.routed_experts == 2 * base.routed_experts
    assert twice.attention == base.attention
    deeper = m.model_copy(update={"num_layers": m.num_layers + 1})
    assert layers.param_counts(deeper).routed_experts == base.routed_experts + moe.num_experts * per


def test_an_instances_fixed_cost_is_computed_once_and_is_the_functions():
    from pdd_plan.calibration import fit as cal
    from pdd_plan.perf import fixed_cost
    from pdd_plan.perf.instance import Instance

    inst = Instance(profiles.model("deepseek-v3"), cal.analytic_gpu("h200"), n_gpus=8, tp=8, ep=8)
    assert inst.fixed is inst.fixed
    assert inst.fixed == fixed_cost.fixed_cost(inst)
    assert inst.fixed.kernels_s > 0 and inst.fixed.collectives_s > 0  # TP8: all-reduce floors
