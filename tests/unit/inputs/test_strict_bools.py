"""`schema.common.Strict` refuses a YAML boolean where a number belongs, in every field it wraps,
with the validator's signature given to pydantic rather than inspected per field."""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from pdd_plan.inputs.schema.common import Strict


class _Probe(Strict):
    n: int
    rate: float | None = None
    gpus: dict[str, int] = {}
    on: bool = False


@pytest.mark.unit
def test_given_signature_is_the_functions_own():
    f = Strict._no_bool_numbers.__func__
    given = f.__signature__
    del f.__signature__
    try:
        assert inspect.signature(f) == given
        assert list(inspect.signature(Strict._no_bool_numbers).parameters) == ["v", "info"]
    finally:
        f.__signature__ = given


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
