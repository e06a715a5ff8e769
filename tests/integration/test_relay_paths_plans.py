"""Plans without the p_rld path when the spec lacks it (the paths by hand:
tests/unit/optimize/test_relay_paths.py)."""

from __future__ import annotations

import pytest

from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from tests.unit.optimize import test_relay_paths
from tests.unit.optimize.test_relay_paths import HANDOFF_ONLY, _allowed  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration
setting = test_relay_paths.setting  # the unit tests' fixture


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
