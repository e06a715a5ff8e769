"""Plans without the p_rld path when the spec lacks it (the paths by hand:
tests/unit/optimize/test_relay_paths.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan import architectures
from pdd_plan.architectures import Architecture
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.search.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.integration


TINY = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios" / "tiny.yaml"


HANDOFF_ONLY = Architecture(
    name="pdd_handoff_only_paths_test",
    title="PDD-handoff (paths test)",
    decode_role="main_decode",
    crosses_line=True,
    paths=("p_md", "p_rld_md"),
)


@pytest.fixture(scope="module")
def setting():
    architectures.register(HANDOFF_ONLY)
    d = yaml.safe_load(TINY.read_text())
    d["policy"] = {"singular_max_output_tokens": 100000}  # every request would be singular
    ctx = build_context(Scenario.model_validate(d), "")
    yield ctx, build_classes(ctx.class_spec), float(d["workload"]["rate_rps"])
    architectures.unregister(HANDOFF_ONLY.name)


def _allowed(p) -> set[str]:
    return {path for pt in p.tables.paths for path in pt.allowed}


@pytest.mark.integration
@pytest.mark.parametrize("free_rate", [False, True])
def test_no_p_rld_when_the_spec_lacks_it(setting, free_rate):
    ctx, cls, rate = setting
    p = plan_architecture(
        problem_of(ctx),
        HANDOFF_ONLY.name,
        cls,
        None if free_rate else rate,
        Caps(),
        objective="goodput" if free_rate else "cost",
    )
    assert _allowed(p) == {"p_md", "p_rld_md"}  # relay hand-off stays, singular finish does not
    assert "p_rld" not in p.solution.flows
    assert p.singular_max_output_tokens is None
    assert any(c.role == "relay_decode" for c in p.tables.rld)  # the relay pool is planned
