"""The planner relays exactly the low-hit share the router sends (the router by hand:
tests/unit/optimize/test_hit_threshold_router.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan.architectures import P_MD, P_RLD, P_RLD_MD
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.integration


TINY = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios" / "tiny.yaml"


@pytest.mark.integration
def test_planner_relays_exactly_the_low_hit_share():
    d = yaml.safe_load(TINY.read_text())
    shares = {}
    for router in ("plan", "hit_threshold"):
        d["policy"] = {"router": router}
        ctx = build_context(Scenario.model_validate(d), "")
        cls = build_classes(ctx.class_spec)
        rate = float(d["workload"]["rate_rps"])
        p = plan_architecture(problem_of(ctx), "pdd", cls, rate, Caps())
        f = p.solution.flows
        shares[router] = {k: float(v.sum()) / rate for k, v in f.items()}
        if router == "hit_threshold":
            low = float(cls.weight[cls.hit_p <= 0.95].sum())
            relayed = shares[router].get(P_RLD_MD, 0.0) + shares[router].get(P_RLD, 0.0)
            assert relayed == pytest.approx(low, abs=1e-6)
            assert shares[router][P_MD] == pytest.approx(1.0 - low, abs=1e-6)
