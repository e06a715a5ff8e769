"""Every planning margin (the decode, prefill and line utilization caps) is a scenario input
with a stated range: the plan prices each one it keeps, and the tornado and the flip sentences
move each; the default's verdict holds across every margin's range or the sentence names the
margin that flips it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.plan import load_plan
from pdd_plan.optimize.search.caps import Caps
from pdd_plan.report.uncertainty import margin_lines
from pdd_plan.uncertainty import Options, assess, paired, perturb, sensitivity, sizing
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.fixture(scope="module")
def default():
    path = GOLDEN / "pdd-paper.optimize.yaml"
    plan = load_plan(path)
    ctx = build_context(plan.inputs, str(path))
    return ctx, plan, assess(ctx, plan, Options(draws=4, n_minus_1=False))


def test_each_margin_is_a_scenario_input_the_plan_is_made_under(default):
    ctx, plan, _ = default
    s = ctx.scenario.search
    assert (s.prefill_utilization, s.line_utilization, s.decode_utilization) == (0.97, 0.95, 1.0)
    assert Caps.of(s) == Caps(prefill=0.97, line=0.95, decode=1.0)
    assert set(paired.MARGINS) == set(sensitivity.MARGIN_RANGES) == set(sensitivity.NO_MARGIN)


def test_every_margin_has_a_tornado_bar_over_its_stated_range(default):
    _, _, u = default
    for v in u.comparisons.values():
        rows = {r.input: r for r in v.tornado}
        at_plan = {r.input: r for r in v.nominal_margins}
        for name, (lo, hi, why) in sensitivity.MARGIN_RANGES.items():
            assert why  # the range's source is stated
            assert (rows[name].low, rows[name].high) == (lo, hi)
            assert (at_plan[name].low, at_plan[name].high) == (lo, hi)


def test_the_default_verdict_holds_across_each_margin_or_the_sentence_names_it(default):
    _, plan, u = default
    for base, v in u.comparisons.items():
        head = plan.comparison.model_dump()[f"bcr_gain_vs_{base}"]
        s0 = (head > 1e-9) - (head < -1e-9)
        for r in v.nominal_margins:
            for g in (r.gain_low, r.gain_high):
                s = 0 if g is None else (g > 1e-9) - (g < -1e-9)
                if s != s0:
                    assert sensitivity.label(r.input) in v.flip, (base, r, v.flip)


def test_the_prefill_cap_costs_idc_pd_one_prefill_instance(default):
    """Hand check: IDC-PD's 7 prefill instances at 40 req/s; with 6 the pooled queue runs
    between the 97% cap and 1 (so the cap alone refuses them), and at cap 1 the analytic check
    serves 40 req/s: the cap adds one instance, its price (16 H100 at $2.5: $40/h)."""
    ctx, plan, u = default
    (m,) = [m for m in u.margin_costs if m.margin == "prefill_utilization" and m.instances]
    assert (m.architecture, m.instances, m.cost_per_hour) == ("idc_pd", {"prefill": 1}, 40.0)
    cls = build_classes(ctx.class_spec)
    fs = fleet.from_plan(ctx, plan, "plan")["idc_pd"]
    fewer = sizing._group_moved(fs, "prefill", -1)
    ap = perturb.apply(paired.pb_of(ctx), cls, {})
    rate = plan.rate_rps
    fm = perturb.fleet_model(ap, fewer, Caps(prefill=1.0, line=1.0, decode=1.0))
    rho = rate * fm.mean_service_s / fm.n_prefill
    assert fm.n_prefill == 6 and 0.97 <= rho < 1.0
    assert analytic.at_rate(fm, rate).ok
    text = " ".join(margin_lines(u))
    assert "The 97% prefill utilization cap" in text and "+1 prefill to idc_pd ($40.0/h)" in text
