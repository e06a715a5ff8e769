"""docs/scenario.md is generated from the schema: every field is in it with its description,
and the file is what the generator prints now."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.common import limits
from pdd_plan.inputs.schema.reference import scenario_reference
from pdd_plan.inputs.schema.scenario import Scenario

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[3] / "docs" / "scenario.md"


def test_docs_scenario_md_is_the_generated_reference():
    assert DOC.read_text(encoding="utf-8") == scenario_reference(), (
        "docs/scenario.md is stale: python -m pdd_plan.inputs.schema.reference > docs/scenario.md"
    )


def test_every_scenario_field_has_a_description_and_a_row():
    text = scenario_reference()
    for name, f in Scenario.model_fields.items():
        assert f.description, f"Scenario.{name} has no description"
        assert f"| `{name}` |" in text
    # nested fields are written by their dotted path
    assert "| `workload.arrival_cv` | number | `1.0` |" in text
    assert "| `sla.ttft_p99_s` | number | required |" in text
    assert "| `policy.handoff` | `catch_up` \\| `one_shot` | `catch_up` |" in text


def test_the_limit_table_has_every_limit_with_its_default():
    text = scenario_reference()
    for lim in limits.LIMITS.values():
        assert f"| `{lim.env}` | {lim.default:,} |" in text
