"""The three objectives: min cost at a rate, most goodput within a budget, best BCR (Dinkelbach)."""

from __future__ import annotations

import pytest
import yaml

from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.profiles import example_path
from pdd_plan.inputs.schema import Scenario
from pdd_plan.optimize import optimize

pytestmark = pytest.mark.integration


def _plan(**changes) -> dict:
    d = yaml.safe_load(example_path().read_text())
    d["architectures"] = ["idc_pd"]  # one architecture keeps these fast
    for k, v in changes.items():
        if v is None:
            d["workload"].pop(k, None)
        elif k in ("objective", "budget_per_hour"):
            d[k] = v
        else:
            d["workload"][k] = v
    sc = Scenario.model_validate(d)
    return optimize(build_context(sc, str(example_path())), verify=False).dump()["plans"]["idc_pd"]


def test_goodput_within_budget_grows_with_budget():
    small = _plan(objective="goodput", budget_per_hour=200, rate_rps=None)
    big = _plan(objective="goodput", budget_per_hour=400, rate_rps=None)
    assert small["cost_per_hour"] <= 200 + 1e-6
    assert big["cost_per_hour"] <= 400 + 1e-6
    assert big["goodput_rps"] >= small["goodput_rps"] > 0


def test_goodput_is_capped_by_a_given_rate():
    p = _plan(objective="goodput", budget_per_hour=10_000, rate_rps=12)
    assert p["goodput_rps"] == pytest.approx(12.0)


def test_bcr_with_a_free_rate_is_proven_by_dinkelbach():
    p = _plan(rate_rps=None)
    s = p["solver"]
    assert s["dinkelbach_iterations"] >= 2
    assert s["optimality_gap"] <= 1e-6
    # tolerance: rel 1e-3: a bound above the plan file's rounding (goodput to 6 significant digits,
    # cost to the cent)
    assert p["bcr"] == pytest.approx(p["goodput_rps"] * 3600 / p["cost_per_hour"], rel=1e-3)
    # the best ratio is at least as good as the min-cost plan at the rate it picked (up to the
    # rounding of the reported rate and BCR): the fixed-rate search's space is in the answer's
    # the reported rate is rounded to 1e-3 req/s; where the ratio's best fleet fills every GPU
    # (the default's 512 H100s under perf v4) the rounded-up rate is just past what it serves,
    # so the fixed-rate plan is asked for the rate less half that rounding step
    fixed = _plan(rate_rps=p["goodput_rps"] - 5e-4)
    assert p["bcr"] >= fixed["bcr"] * (1 - 1e-5)
