"""Path availability follows the architecture spec: an architecture without p_rld ("PDD with
hand-off only") never routes a request to finish on relay decode, and its plan carries no
singular-output limit; PDD's own path tables keep all three paths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan import architectures
from pdd_plan.architectures import Architecture
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.workload.classes import build_classes

TINY = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios" / "tiny.yaml"

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


@pytest.mark.unit
def test_pdd_tables_offer_every_path(setting):
    ctx, cls, rate = setting
    p = plan_architecture(problem_of(ctx), "pdd", cls, rate, Caps())
    assert _allowed(p) == {"p_md", "p_rld_md", "p_rld"}
    assert p.singular_max_output_tokens == 100000
    assert p.solution.flows["p_rld"].sum() > 0  # with every request singular, PDD uses it


@pytest.mark.unit
def test_without_relay_paths_no_relay_pool(setting):
    ctx, cls, rate = setting
    p = plan_architecture(problem_of(ctx), "idc_pd", cls, rate, Caps())
    assert _allowed(p) == {"p_md"} and not p.tables.rld
    assert np.isinf(p.tables.lines[0].capacity_bytes_s)  # RDMA: no line crossed
