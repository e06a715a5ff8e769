"""A fourth architecture is one module plus its spec entry: this module is that module.

"PDD with hand-off only" keeps PDD's relay pool for requests whose KV would cross the line
too slowly (p_rld_md), but never lets a short request finish on relay decode (no p_rld).
Nothing else in pdd_plan is edited for it: the optimizer, simulator, plan file, report and
emit all learn it from the spec.
"""

from __future__ import annotations

import pytest
import yaml

from pdd_plan import architectures
from pdd_plan.architectures import Architecture
from pdd_plan.emit import build
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import parse
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.outputs.plan import parse_plan
from pdd_plan.report.sections import build_report

pytestmark = pytest.mark.integration

HANDOFF = Architecture(
    name="pdd_handoff",
    title="PDD-handoff",
    decode_role="main_decode",
    crosses_line=True,
    paths=("p_md", "p_rld_md"),
    color="#9467bd",
    marker="D",
)


@pytest.fixture(scope="module")
def handoff():
    architectures.register(HANDOFF)
    yield HANDOFF
    architectures.unregister(HANDOFF.name)


@pytest.fixture(scope="module")
def plan_and_ctx(handoff):
    path = profiles.example_path().parent / "narrow-line.yaml"
    data = yaml.safe_load(path.read_text())
    data["architectures"] = ["pdd", HANDOFF.name, "cdc_pd"]
    ctx = build_context(parse(Scenario, data, str(path)), str(path))
    return optimize(ctx, verify=False), ctx


def test_spec_is_consistent(handoff):
    assert handoff.relays and not handoff.singular_on_relay
    assert handoff.roles == ("prefill", "relay_decode", "main_decode")
    with pytest.raises(ValueError):
        architectures.register(HANDOFF)  # names are unique
    with pytest.raises(ValueError):  # relay without a line has nothing to hide
        Architecture("bad", "bad", "decode", False, ("p_md", "p_rld_md"))


def test_optimizer_plans_it_and_keeps_it_off_p_rld(plan_and_ctx):
    plan, _ = plan_and_ctx
    assert HANDOFF.name in plan.plans
    p = plan.plans[HANDOFF.name]
    assert p.route_share.p_rld == 0.0
    assert p.routing.singular_max_output_tokens is None
    # PDD may route every request as the hand-off architecture does, so it never costs more
    assert plan.plans["pdd"].cost_per_hour <= p.cost_per_hour + 1e-6
    # and CDC-PD is PDD-handoff with no relay: the hand-off plan never costs more than it
    if "cdc_pd" in plan.plans:
        assert p.cost_per_hour <= plan.plans["cdc_pd"].cost_per_hour + 1e-6


def test_plan_file_round_trips_and_downstream_commands_take_it(plan_and_ctx):
    plan, ctx = plan_and_ctx
    again = parse_plan(yaml.safe_load(plan.to_text("yaml")))
    assert again == plan
    rep = build_report(again)
    assert any(r[0] == HANDOFF.name for r in rep.section("costs").rows)
    dep = build(again, HANDOFF.name, model=ctx.model, gpus=ctx.gpus)
    assert {g.role for g in dep.groups} >= {"prefill", "main_decode"}


def test_simulator_replays_it_without_p_rld(plan_and_ctx):
    from pdd_plan.sim.run import run

    plan, ctx = plan_and_ctx
    res = run(ctx, plan, HANDOFF.name, 3000, 0)
    s = res.summary()
    assert s["route_share"]["p_rld"] == 0.0
    assert s["requests"] == 3000
