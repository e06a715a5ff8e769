"""PDD contains CDC-PD (PDD with no relay decode is CDC-PD's fleet): after verification a PDD
plan worse than CDC-PD's verified one, or none at all, takes CDC-PD's verified fleet and says
so; an equal or better PDD plan, or an unverified one, keeps its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.optimize.contains import take_contained, worse
from pdd_plan.outputs.plan import Infeasible, Reason, load_plan

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "pdd-paper.optimize.yaml"


def _cdc_cost() -> float:
    return load_plan(GOLDEN).plans["cdc_pd"].cost_per_hour


def _plans(pdd_cost: float | None):
    plan = load_plan(GOLDEN)
    c = plan.plans["cdc_pd"]
    assert c.simulated is not None and c.simulated.sla_met
    plans = {"cdc_pd": c, "idc_pd": plan.plans["idc_pd"]}
    if pdd_cost is not None:  # a relay plan the replay left dearer: $40/h for one relay instance
        relay = c.instances[0].model_copy(
            update={"role": "relay_decode", "count": 1, "cost_per_hour": 40.0}
        )
        plans["pdd"] = c.model_copy(
            update={"instances": [*c.instances, relay], "cost_per_hour": pdd_cost}
        )
    raw = {a: object() for a in plans}
    return plans, raw, c


def test_a_dearer_verified_pdd_takes_cdc_pds_fleet():
    plans, raw, c = _plans(_cdc_cost() + 40.0)
    cdc_raw = raw["cdc_pd"]
    take_contained(plans, raw, {}, "bcr", fixed_rate=True)
    p = plans["pdd"]
    assert p.cost_per_hour == c.cost_per_hour  # 40 $/h less than the relay plan
    assert [g.role for g in p.instances] == [g.role for g in c.instances]
    assert all(g.role != "relay_decode" for g in p.instances)
    assert raw["pdd"] is cdc_raw
    note = p.simulated.note
    assert f"${c.cost_per_hour + 40:,.1f}/h" in note and f"${c.cost_per_hour:,.1f}/h" in note
    assert plans["cdc_pd"].simulated.note is None  # CDC-PD's own plan is untouched


def test_an_equal_or_cheaper_pdd_keeps_its_own():
    for extra in (0.0, -40.0):
        plans, raw, c = _plans(_cdc_cost() + extra)
        before = plans["pdd"]
        take_contained(plans, raw, {}, "bcr", fixed_rate=True)
        assert plans["pdd"] is before


def test_an_unverified_pdd_keeps_its_own():
    plans, raw, c = _plans(_cdc_cost() + 40.0)
    plans["pdd"] = plans["pdd"].model_copy(update={"simulated": None})
    before = plans["pdd"]
    take_contained(plans, raw, {}, "bcr", fixed_rate=True)
    assert plans["pdd"] is before


def test_pdd_with_no_verified_plan_runs_cdc_pds():
    plans, raw, c = _plans(None)
    why = Reason(kind="replay_sla", message="the replay misses TTFT P99")
    infeasible = {"pdd": Infeasible(reasons=[why])}
    take_contained(plans, raw, infeasible, "bcr", fixed_rate=True)
    assert plans["pdd"].cost_per_hour == c.cost_per_hour and "pdd" not in infeasible
    assert "found no plan (the replay misses TTFT P99)" in plans["pdd"].simulated.note


def test_worse_reads_the_objective():
    plans, _, c = _plans(None)
    cheap_low = c.model_copy(update={"cost_per_hour": c.cost_per_hour - 1, "bcr": c.bcr / 2})
    assert not worse(cheap_low, c, "bcr", fixed_rate=True)  # a fixed rate: cost decides
    assert worse(cheap_low, c, "bcr", fixed_rate=False)  # a free rate: BCR decides
    more = c.model_copy(update={"goodput_rps": c.goodput_rps * 2})
    assert worse(c, more, "goodput", fixed_rate=False)
