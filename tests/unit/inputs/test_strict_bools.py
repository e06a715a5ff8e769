"""`schema.common.Strict` refuses a YAML boolean where a number belongs, in every field, with one
look over a model's mapping rather than a validator per field: the error names the field and
stands beside the mapping's other errors, as a validator on every field gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pdd_plan.inputs.schema.common import Strict


class _Probe(Strict):
    n: int
    rate: float | None = None
    gpus: dict[str, int] = {}
    on: bool = False


class _Outer(Strict):
    probe: _Probe
    probes: list[_Probe] = []
    k: int = 0


def _schema_types(schema) -> list[str]:
    """Every node's type in a core schema, walked through dicts and lists."""
    if isinstance(schema, dict):
        own = [schema["type"]] if isinstance(schema.get("type"), str) else []
        return own + [t for v in schema.values() for t in _schema_types(v)]
    if isinstance(schema, list):
        return [t for v in schema for t in _schema_types(v)]
    return []


@pytest.mark.unit
def test_the_check_is_one_validator_per_model_not_per_field():
    _Probe.model_rebuild()
    kinds = _schema_types(_Probe.__pydantic_core_schema__)
    # the model's one before-validator; a per-field check would add one per field (four)
    assert kinds.count("function-before") == 1


@pytest.mark.unit
def test_nested_errors_keep_their_place_and_their_siblings():
    with pytest.raises(ValidationError) as e:
        _Outer.model_validate(
            {
                "probe": {"n": True, "extra": 1},
                "probes": [{"n": 1}, {"n": 2, "rate": True}],
                "k": "x",
            }
        )
    got = [(x["type"], x["loc"]) for x in e.value.errors()]
    assert got == [
        ("value_error", ("probe", "n")),
        ("extra_forbidden", ("probe", "extra")),
        ("value_error", ("probes", 1, "rate")),
        ("int_parsing", ("k",)),
    ]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"n": True}, "n"),
        ({"n": 1, "rate": False}, "rate"),
        ({"n": 1, "gpus": {"h100": True}}, "gpus"),
    ],
)
def test_a_boolean_where_a_number_belongs_is_refused(data, field):
    with pytest.raises(ValidationError) as e:
        _Probe.model_validate(data)
    errs = e.value.errors()
    assert [x["loc"] for x in errs] == [(field,)]
    assert "a boolean (true/false) where a number belongs" in errs[0]["msg"]


@pytest.mark.unit
def test_numbers_and_booleans_where_they_belong_pass():
    p = _Probe.model_validate({"n": 3, "rate": 2.5, "gpus": {"h100": 8}, "on": True})
    assert (p.n, p.rate, p.gpus, p.on) == (3, 2.5, {"h100": 8}, True)


@pytest.mark.unit
def test_model_modules_give_pydantic_types_not_strings():
    # see schema/common.py: string annotations cost every import their evaluation
    pkg = Path(__file__).resolve().parents[3] / "pdd_plan"
    inputs, outputs = pkg / "inputs", pkg / "outputs"
    files = [inputs / "calibrated.py", *inputs.glob("schema/*.py"), *outputs.glob("*.py")]
    texts = {m.name: m.read_text() for m in files}
    models = [n for n, t in texts.items() if "(Strict):" in t or "Out):" in t]
    assert {"scenario.py", "plan.py", "calibrated.py", "base.py"} <= set(models)
    assert [n for n in models if "from __future__ import annotations" in texts[n]] == []
