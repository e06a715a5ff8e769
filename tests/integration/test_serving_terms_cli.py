"""`perf --format json` shows each serving term and the family basis (the terms:
tests/unit/perf/test_serving_terms.py)."""

from __future__ import annotations

import pytest

from pdd_plan.perf import moe_terms
from tests.unit.perf.test_serving_terms import _v3  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


@pytest.mark.integration
def test_perf_json_shows_each_term_and_the_family_basis():
    import json

    from typer.testing import CliRunner

    from pdd_plan.cli.main import app

    args = ["perf", "-m", "deepseek-v3", "-g", "h800", "--gpus", "16", "--dp-attention"]
    args += ["--phase", "decode", "-L", "2000", "-B", "16", "-f", "json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    t = res["terms"]
    inst = _v3("h800", 16, 16, 16)
    assert t["deepep_fixed_s"] == pytest.approx(moe_terms.deepep_fixed_seconds(inst, "decode"))
    assert t["expert_imbalance"] == pytest.approx(moe_terms.expert_imbalance(inst, 16))
    assert 0 < t["grouped_gemm_efficiency"] < 0.05  # ~1 token per expert copy: far from peak
    assert t["grouped_gemm_bandwidth_fraction"] > 0.95  # ... and weight-bound
    assert t["attention_compute_fraction"] == pytest.approx(0.586)
    assert res["efficiency_family"] == "moe" and res["efficiency_basis"]
    assert "mean_signed_error" in res["error_band"]
