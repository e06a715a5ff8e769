"""An optimized fleet over the instance limit is a one-line error through the CLI (the limits
themselves: tests/unit/common/test_limits.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from tests.unit.common.test_limits import EXAMPLE  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


@pytest.mark.integration
def test_optimized_fleet_over_the_instance_limit_is_a_one_line_error(monkeypatch):
    """A rate that needs more instances than PLAN_INSTANCES allows: exit 2 naming the rate and
    the variable, not an internal error from the plan schema. The default plan has 8 (pdd) /
    7 (idc_pd) instances, so a limit of 5 trips it."""
    monkeypatch.setenv("PDD_PLAN_MAX_PLAN_INSTANCES", "5")
    r = CliRunner().invoke(app, ["optimize", str(EXAMPLE), "--no-verify"])
    assert r.exit_code == 2, r.output
    err = r.stderr if r.stderr_bytes is not None else r.output
    assert "workload.rate_rps" in err and "PDD_PLAN_MAX_PLAN_INSTANCES" in err, err
    assert "internal" not in err
    assert len(err.strip().splitlines()) == 1
