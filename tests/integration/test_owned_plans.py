"""Owned capacity planned end to end: sunk GPUs and lines go first, never raise the cost, and
split the spend into owned and new by hand arithmetic (unit side: tests/unit/optimize/test_owned.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rich.console import Console

from pdd_plan.report.sections import build_report
from pdd_plan.report.table import render_plan
from tests.unit.optimize import test_owned
from tests.unit.optimize.test_owned import EXAMPLE, example, plan_of, with_owned  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration
base = test_owned.base  # the unit tests' fixture


PRICE = {"h100": 2.5, "h200": 3.1}  # the example's prices, $/GPU-hour


def fleet(p) -> tuple:
    """What a plan buys: instance groups and line, without costs."""
    inst = sorted((i.role, i.gpu, i.datacenter, i.count, i.gpus_per_instance) for i in p.instances)
    line = (p.line.sku, p.line.count) if p.line else None
    return tuple(inst), line


def gpus_used(p, dc: str, gpu: str) -> int:
    return sum(
        i.count * i.gpus_per_instance for i in p.instances if (i.datacenter, i.gpu) == (dc, gpu)
    )


@pytest.mark.integration
def test_sunk_capacity_covering_the_plan_costs_nothing_new(base):
    """Owning (at 0) more than every architecture's default plan uses: no new spend, and BCR
    (goodput per dollar as counted) no worse than buying it all."""
    d = with_owned(
        [("dc-a", "h100", 192, 0.0), ("dc-b", "h200", 160, 0.0)], [("shared-25g", 4, 0.0)]
    )
    p = plan_of(d)
    assert set(p.plans) == set(base.plans)
    for a, q in p.plans.items():
        assert q.cost_new_per_hour == 0.0, a
        assert q.cost_owned_per_hour == 0.0 and q.cost_per_hour == 0.0, a
        assert q.goodput_rps == base.plans[a].goodput_rps
        assert q.bcr >= base.plans[a].bcr, a


@pytest.mark.integration
def test_partial_owned_split_is_hand_arithmetic(base):
    """48 owned H100 at an amortized $1/GPU-h under a plan of 80+ H100: the plan is the same
    fleet; owned = 48 x $1, new = market cost - 48 x $2.5, and they sum to the total."""
    p = plan_of(with_owned([("dc-a", "h100", 48, 1.0)]))
    for a, q in p.plans.items():
        b = base.plans[a]
        assert fleet(q) == fleet(b), a
        assert gpus_used(q, "dc-a", "h100") >= 48
        assert q.cost_owned_per_hour == pytest.approx(48.0)
        # tolerance: $0.011: each group's cost is rounded to the cent in the plan (one rounding
        # plus float)
        assert q.cost_new_per_hour == pytest.approx(b.cost_per_hour - 48 * 2.5, abs=0.011)
        assert q.cost_per_hour == pytest.approx(b.cost_per_hour - 48 * 1.5, abs=0.011)
        assert q.cost_owned_per_hour + q.cost_new_per_hour == pytest.approx(
            q.cost_per_hour, abs=0.011
        )
        # tolerance: rel 1e-3: a bound above the plan's rounding (goodput to 6 significant digits,
        # cost to the cent)
        assert q.bcr == pytest.approx(q.goodput_rps * 3600 / q.cost_per_hour, rel=1e-3)


@pytest.mark.integration
def test_owned_lines_first(base):
    """One sunk shared-25g, the one line the plan leases: the line costs nothing new."""
    p = plan_of(with_owned(lines=[("shared-25g", 1, 0.0)]))
    b = base.plans["pdd"]
    assert b.line is not None and (b.line.sku, b.line.count) == ("shared-25g", 1)
    q = p.plans["pdd"]
    one = b.line.cost_per_hour
    assert q.cost_per_hour <= b.cost_per_hour - one + 0.011
    if fleet(q) == fleet(b):
        assert q.cost_owned_per_hour == 0.0
        # tolerance: $0.011: one cent of rounding per figure
        assert q.cost_new_per_hour == pytest.approx(b.cost_per_hour - one, abs=0.011)


@pytest.mark.integration
def test_owned_at_market_price_is_no_owned(base):
    """Owned GPUs and lines at exactly the market price change nothing but the split."""
    d = with_owned([("dc-a", "h100", 64, 2.5), ("dc-b", "h200", 16, 3.1)])
    p = plan_of(d)
    for a, q in p.plans.items():
        b = base.plans[a]
        assert fleet(q) == fleet(b), a
        assert q.cost_per_hour == b.cost_per_hour
        # tolerance: $0.011: one cent of rounding per figure
        assert q.cost_owned_per_hour == pytest.approx(
            sum(
                min(gpus_used(b, dc, g), n) * PRICE[g]
                for dc, g, n in [("dc-a", "h100", 64), ("dc-b", "h200", 16)]
            ),
            abs=0.011,
        )


@pytest.mark.integration
def test_useless_owned_capacity_is_ignored(base):
    """Sunk L40S (8 x 48 GB cannot hold DeepSeek-V4-Pro) and sunk H200 in dc-b, which IDC-PD
    never uses: those plans do not change, and their owned spend is 0."""
    d = example()
    d["datacenters"][0]["gpus"]["l40s"] = 8
    d = with_owned([("dc-a", "l40s", 8, 0.0), ("dc-b", "h200", 16, 0.0)], base=d)
    p = plan_of(d)
    assert fleet(p.plans["idc_pd"]) == fleet(base.plans["idc_pd"])
    assert p.plans["idc_pd"].cost_per_hour == base.plans["idc_pd"].cost_per_hour
    assert p.plans["idc_pd"].cost_owned_per_hour == 0.0
    for q in p.plans.values():
        assert gpus_used(q, "dc-a", "l40s") == 0


@pytest.mark.integration
def test_owned_above_market_is_used_first(base):
    """Owned H100 amortized at $4 (> $2.5 market) still go first: 96 owned under IDC-PD's 112
    H100, so it pays 96 x $4 owned and the remaining GPUs at market."""
    p = plan_of(with_owned([("dc-a", "h100", 96, 4.0)]))
    q, b = p.plans["idc_pd"], base.plans["idc_pd"]
    used = gpus_used(q, "dc-a", "h100")
    assert used >= 96
    assert q.cost_owned_per_hour == pytest.approx(96 * 4.0)
    # tolerance: $0.011: one cent of rounding per figure
    assert q.cost_new_per_hour == pytest.approx((used - 96) * 2.5, abs=0.011)
    assert q.cost_per_hour >= b.cost_per_hour


@pytest.mark.integration
@pytest.mark.parametrize("seed", range(3))
def test_owned_never_raises_cost(base, seed):
    """Property: owned capacity priced at or below market never raises any architecture's
    cost (random counts and prices; the plan without it stays feasible)."""
    rng = np.random.default_rng(seed)
    gpus = [
        ("dc-a", "h100", int(rng.integers(0, 160)), float(rng.uniform(0, 2.5))),
        ("dc-b", "h200", int(rng.integers(0, 48)), float(rng.uniform(0, 3.1))),
    ]
    lines = [(str(rng.choice(["shared-10g", "shared-25g"])), int(rng.integers(0, 3)), 0.0)]
    p = plan_of(with_owned(gpus, lines))
    for a, b in base.plans.items():
        assert p.plans[a].cost_per_hour <= b.cost_per_hour + 1e-6, (a, gpus, lines)


@pytest.mark.integration
def test_rate_free_with_sunk_capacity_has_finite_bcr():
    """Objective bcr with the rate free and everything owned at 0: Dinkelbach stops at the
    zero-spend plan, and BCR is finite (spend floored at $0.01/h)."""
    d = with_owned([("dc-a", "h100", 64, 0.0), ("dc-b", "h200", 32, 0.0)], [("shared-25g", 4, 0.0)])
    del d["workload"]["rate_rps"]
    d["architectures"] = ["idc_pd"]
    q = plan_of(d).plans["idc_pd"]
    assert q.cost_per_hour == 0.0 and q.goodput_rps > 0
    assert math.isfinite(q.bcr) and q.bcr == pytest.approx(q.goodput_rps * 3600 / 0.01, rel=1e-5)


@pytest.mark.integration
def test_report_lists_owned_and_new_spend():
    p = plan_of(with_owned([("dc-a", "h100", 48, 1.0)]))
    costs = build_report(p).section("costs")
    i_owned, i_new = costs.columns.index("owned $/h"), costs.columns.index("new $/h")
    i_total = costs.columns.index("total $/h")
    for row in costs.rows:
        assert row[i_owned] == "48.00"
        # tolerance: $0.011: the report prints each figure to the cent
        assert float(row[i_owned]) + float(row[i_new]) == pytest.approx(
            float(row[i_total]), abs=0.011
        )
    assert "marginal" in costs.note
    console = Console(record=True, width=120)
    render_plan(p, console)
    text = console.export_text()
    assert "owned $/h" in text and "new $/h" in text
