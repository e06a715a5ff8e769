"""docs/scenario.md is generated from the schema: every field is in it with its description,
and the file is what the generator prints now."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from pdd_plan.common import limits
from pdd_plan.inputs.schema.reference import field_description, scenario_reference
from pdd_plan.inputs.schema.scenario import Scenario

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[3] / "docs" / "scenario.md"


def test_docs_scenario_md_is_the_generated_reference():
    assert DOC.read_text(encoding="utf-8") == scenario_reference(), (
        "docs/scenario.md is stale: python -m pdd_plan.inputs.schema.reference > docs/scenario.md"
    )


def test_every_scenario_field_has_a_description_and_a_row():
    text = scenario_reference()
    for name in Scenario.model_fields:
        assert field_description(Scenario, name), f"Scenario.{name} has no description"
        assert f"| `{name}` |" in text
    # nested fields are written by their dotted path
    assert "| `workload.arrival_cv` | number | `1.0` |" in text
    assert "| `sla.ttft_p99_s` | number | required |" in text
    assert "| `policy.handoff` | `catch_up` \\| `one_shot` | `catch_up` |" in text


def test_the_limit_table_has_every_limit_with_its_default():
    text = scenario_reference()
    for lim in limits.LIMITS.values():
        assert f"| `{lim.env}` | {lim.default:,} |" in text


# The same small hierarchy twice: read by `field_description`, and by pydantic's own
# use_attribute_docstrings (the schema no longer sets it: it parses every class at import).
class _Base(BaseModel):
    a: int = 1
    """The a."""
    b: int = 2
    """The b,
    on two lines."""
    c: int = Field(default=3, description="c from Field")
    """not this one"""
    d: int = 4


class _Sub(_Base):
    b: int = 5
    """The sub's b."""
    a: int = 6  # redeclared without a string: no description


class _BaseDoc(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    a: int = 1
    """The a."""
    b: int = 2
    """The b,
    on two lines."""
    c: int = Field(default=3, description="c from Field")
    """not this one"""
    d: int = 4


class _SubDoc(_BaseDoc):
    b: int = 5
    """The sub's b."""
    a: int = 6  # redeclared without a string: no description


@pytest.mark.parametrize(("ours", "pydantics"), [(_Base, _BaseDoc), (_Sub, _SubDoc)])
def test_field_descriptions_are_pydantics_attribute_docstrings(ours, pydantics):
    got = {n: field_description(ours, n) for n in ours.model_fields}
    assert got == {n: f.description for n, f in pydantics.model_fields.items()}
    assert got["c"] == "c from Field"
    assert got["d"] is None
    assert field_description(_Base, "b") == "The b,\non two lines."
