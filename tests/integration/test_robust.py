"""Robust plans out of sample (the small version of benchmarks/robust.py): a Q = 0.9 plan of
a small scenario, planned over a few independent draws, replayed in the simulator under fresh
independent draws (another seed), meets the SLA in at least 85% of them by the models it is
planned on and in the replays (and in the replays at least the binomial floor); a fleet that
already meets the share is kept as it is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pdd_plan.architectures import LOCAL_BASELINE, RELAY_ARCH
from pdd_plan.evaluate import fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import parse
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.uncertainty import block, paired, perturb, replay, robust
from pdd_plan.workload.classes import build_classes
from tests.cli_helpers import invoke, refused

TINY = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios" / "tiny.yaml"
SPEED = {"dist": "lognormal", "median": 1.0, "sigma": 0.06, "source": "assumption"}
INPUTS = {
    "prefill_speed": SPEED,
    "decode_speed": SPEED,
    "line_rate": {"dist": "lognormal", "median": 1.0, "sigma": 0.15, "source": "assumption"},
    "rate": {"dist": "normal", "mean": 1.0, "sd": 0.05, "source": "assumption"},
}


@dataclass(frozen=True)
class OutOfSample:
    plan: object  # the nominal plan
    found: dict  # robust_plans' answer by architecture
    replayed: int  # fresh draws the robust PDD fleet's replays meet the SLA in
    analytic: int  # fresh draws the analytic models say it meets
    draws: int


@pytest.fixture(scope="module")
def out_of_sample() -> OutOfSample:
    """A Q = 0.9 robust plan over 12 design draws, judged on 12 fresh independent draws
    (another seed): by the analytic models and by 1,000-request replays. Computed once."""
    d = yaml.safe_load(TINY.read_text())
    d["uncertainty"] = {"inputs": INPUTS}
    ctx = build_context(parse(Scenario, d, str(TINY)), str(TINY))
    cls = build_classes(ctx.class_spec)
    plan = optimize(ctx, verify=False)
    design, _, _ = block.make_draws(ctx, block.Options(draws=12, iid=True))
    found = robust.robust_plans(ctx, plan, cls, design, 0.9)
    r = found[RELAY_ARCH]
    assert r.plan is not None
    fresh, _, _ = block.make_draws(ctx, block.Options(draws=12, seed=1_000_003, iid=True))
    met = sum(
        replay.replay(ctx, cls, r.plan, RELAY_ARCH, fresh.draw(i), 1000, i).sla_met
        for i in range(len(fresh))
    )
    an = sum(
        robust.meets(
            perturb.apply(paired.pb_of(ctx), cls, fresh.draw(i)),
            fleet.from_plan(ctx, robust._one(ctx, RELAY_ARCH, r.plan), "robust")[RELAY_ARCH],
            r.plan.goodput_rps * fresh.draw(i).get("rate", 1.0),
        )
        for i in range(len(fresh))
    )
    return OutOfSample(plan, found, met, an, len(fresh))


@pytest.mark.slow
def test_q90_plan_meets_the_sla_out_of_sample(out_of_sample):
    o = out_of_sample
    r = o.found[RELAY_ARCH]
    assert r.met >= 11  # ceil(0.9 x 12) of the design draws
    assert r.plan.cost_per_hour >= o.plan.plans[RELAY_ARCH].cost_per_hour - 1e-6
    if r.design_draw is None:  # the nominal fleet met the share: kept, no re-plan
        assert r.plan == o.plan.plans[RELAY_ARCH] and r.steps == 0
    # 85%: the out-of-sample target of benchmarks/robust.py, for the models the plan is made on
    assert o.analytic / o.draws >= 0.85, o.analytic
    # the replays, by chance alone: a fleet that truly meets 90% of draws meets 7 or fewer of
    # 12 with probability 0.4% (binomial), so fewer than 8 is a defect, not the sample
    assert o.replayed >= 8, o.replayed
    assert o.found[LOCAL_BASELINE].plan is not None


@pytest.mark.slow
def test_q90_plan_replays_meet_the_benchmark_target(out_of_sample):
    # the benchmark's 85% (benchmarks/robust.py) held in the replays too
    assert out_of_sample.replayed / out_of_sample.draws >= 0.85, out_of_sample.replayed


@pytest.mark.integration
def test_cli_robust_puts_the_robust_fleet_in_the_plan(tmp_path):
    d = yaml.safe_load(TINY.read_text())
    d["uncertainty"] = {"draws": 4, "inputs": INPUTS}
    d["search"] = {**d.get("search", {}), "robust": 0.75}
    scen = tmp_path / "tiny-robust.yaml"
    scen.write_text(yaml.safe_dump(d))
    r = invoke("optimize", scen, "--no-verify", "-f", "json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    rb = out["uncertainty"]["robust"]
    assert rb["q"] == 0.75 and rb["draws"] == 4
    for a, x in rb["architectures"].items():
        if x["robust_cost_per_hour"] is not None:
            # the plan's fleet is the robust one (emit and simulate read it), never cheaper
            assert out["plans"][a]["cost_per_hour"] == pytest.approx(x["robust_cost_per_hour"])
            assert x["robust_cost_per_hour"] >= x["nominal_cost_per_hour"] - 1e-6
            assert x["met_share"] >= 0.75
    refused("optimize", scen, "--no-verify", "--robust", "1.5", needle=("--robust", "(0, 1)"))
