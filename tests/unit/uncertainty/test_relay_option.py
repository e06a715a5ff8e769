"""A PDD plan without relay decode may add one relay instance under a draw where none of its own
types helps (PDD contains CDC-PD): the instance is the cheapest that fits the model in the relay
datacenter (on the default, 16 H100s at $2.5/GPU-hour: $40/h), and with it PDD's verdict fleet
never costs more than CDC-PD's; read as CDC-PD alone, a slow line left it no fleet at all."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pdd_plan.evaluate import fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.outputs.plan import load_plan
from pdd_plan.uncertainty import paired, sizing
from pdd_plan.uncertainty.block import plan_caps
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "pdd-paper.optimize.yaml"


@pytest.fixture(scope="module")
def default():
    plan = load_plan(GOLDEN)
    ctx = build_context(plan.inputs, str(GOLDEN))
    fleets = fleet.from_plan(ctx, plan, "plan")
    assert not any(g.role == "relay_decode" for g in fleets["pdd"].instances)  # the premise
    return plan, ctx, fleets


def test_the_relay_option_is_the_cheapest_fitting_instance(default):
    _, ctx, fleets = default
    fs = sizing.relay_option(fleets["pdd"], paired.pb_of(ctx), ctx.relay_dc)
    (g,) = fs.addable
    assert (g.role, g.gpu, g.datacenter, g.count) == ("relay_decode", "h100", "dc-a", 1)
    assert g.gpus_per_instance == 16 and g.cost_per_hour == pytest.approx(16 * 2.5)
    assert fs.instances == fleets["pdd"].instances  # nothing bought until a draw needs it
    assert fs.cost_per_hour == fleets["pdd"].cost_per_hour
    # a fleet that runs relay decode already gets no option
    have = dataclasses.replace(fs, instances=[*fs.instances, g], addable=())
    assert sizing.relay_option(have, paired.pb_of(ctx), ctx.relay_dc).addable == ()


def _evaluator(plan, ctx, fleets):
    planned = {a: float(p.goodput_rps) for a, p in plan.plans.items()}
    return paired.Evaluator(
        ctx, build_classes(ctx.class_spec), fleets, planned, plan_caps(ctx, plan)
    )


def test_pdd_never_costs_more_than_cdc_pd_under_a_draw(default):
    plan, ctx, fleets = default
    with_option = {
        **fleets,
        "pdd": sizing.relay_option(fleets["pdd"], paired.pb_of(ctx), ctx.relay_dc),
    }
    ev = _evaluator(plan, ctx, with_option)
    slow = {"prefill_speed": ctx.speed, "decode_speed": ctx.speed, "line_rate": 0.726}
    pdd, cdc = ev.sized(slow, "pdd"), ev.sized(slow, "cdc_pd")
    assert pdd is not None and any(g.role == "relay_decode" for g in pdd.instances)
    assert ev.planned_cost(slow, "pdd") <= ev.planned_cost(slow, "cdc_pd")
    for k in (0.85, 1.0, 1.2):  # and wherever CDC-PD finds a fleet, PDD's is no dearer
        v = {**slow, "line_rate": k}
        assert ev.planned_cost(v, "pdd") <= ev.planned_cost(v, "cdc_pd") + 1e-9, k
    # without the option the slow line leaves PDD (as CDC-PD) no fleet: the -100% bar it was
    bare = _evaluator(plan, ctx, fleets)
    assert bare.sized(slow, "pdd") is None and cdc is None
