"""Shared pydantic base: unknown keys are errors, numbers are finite and never booleans, fields
are validated once.

The modules that define models have no `from __future__ import annotations`: a field's
annotation is then the type itself, which pydantic reads at class creation, not a string it
compiles and evaluates (~550 of them at every import, ~15 ms; tests/unit/inputs/test_strict_bools.py
checks it). A method's own class in its annotations is quoted."""

from __future__ import annotations

import typing
import unicodedata
from functools import cache
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ValidationInfo,
    field_validator,
    model_validator,
)

# Upper bounds on money and line rates: far above any real price, low enough that costs
# (count x GPUs x price) stay finite; the MILP solver refuses NaN/inf coefficients.
MAX_USD_PER_GPU_HOUR = 1e9  # $/GPU-hour
MAX_LINE_USD_PER_MONTH = 1e12
MAX_LINE_GBPS = 1e7  # 10 Pb/s
MAX_BUDGET_PER_HOUR = 1e15


@cache
def _admits_bool(annotation: Any) -> bool:
    """Whether a field's type takes a bool anywhere (`drc: bool`, `ok: bool | None`) or holds
    sub-models, which check their own fields."""
    if annotation is bool or annotation is Any:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_admits_bool(a) for a in typing.get_args(annotation) if not isinstance(a, str))


def _find_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, dict):
        return any(_find_bool(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_find_bool(v) for v in value)
    return False


def _bool_where_number(model: type[BaseModel], name: Any, v: Any) -> bool:
    """Whether `v`, given for field `name`, is (or holds) a boolean where the field's type
    takes none."""
    if not isinstance(v, bool | dict | list | tuple):
        return False
    field = model.model_fields.get(name) if isinstance(name, str) else None
    return field is not None and not _admits_bool(field.annotation) and _find_bool(v)  # type: ignore[arg-type]


def _field_check(cls: type[BaseModel], v: Any, info: ValidationInfo) -> Any:
    if info.field_name is not None and _bool_where_number(cls, info.field_name, v):
        raise ValueError("a boolean (true/false) where a number belongs")
    return v


_CHECKED: dict[type, type] = {}  # a model -> its twin that checks every field (see Strict)
_TWINS: set[type] = set()


class Strict(BaseModel):
    # A string under a field is its description: `reference.py` reads them from the source for
    # docs/scenario.md (pydantic's use_attribute_docstrings would parse every class's source at
    # every import, ~0.1 s). Validators are built when a model is first used, not at import
    # (defer_build): a command builds the few it validates, not all ~90.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        # pydantic's lax mode reads `rate_rps: true` as 1 and `gpus: {h100: yes}` as 1 GPU:
        # a YAML boolean where a number belongs is a mistake, not a count. One look over the
        # mapping (after a model's own before-validators), not a validator on every field:
        # pydantic builds each wrapped field's schema apart (~580 fields in a plan's models,
        # ~0.05 s of every command's start-up). Only where a boolean is found does the model's
        # twin validate the mapping, a validator on every field, for exactly the errors (each
        # under its field, beside the others) that those validators give.
        if cls in _TWINS or not isinstance(data, dict):
            return data
        if any(_bool_where_number(cls, k, v) for k, v in data.items()):
            _checked(cls).model_validate(data)  # raises: a field holds the boolean
        return data


def _checked(model: type[Strict]) -> type[Strict]:
    """`model` with the boolean check on every field (built on first use: an error path)."""
    twin = _CHECKED.get(model)
    if twin is None:
        check = field_validator("*", mode="before")(classmethod(_field_check))
        twin = type(model.__name__, (model,), {"__module__": model.__module__, "_check": check})
        _CHECKED[model] = twin
        _TWINS.add(twin)
    return twin


MAX_NAME_CHARS = 200


def control_character(s: str) -> str | None:
    """The first control character in `s` (C0, DEL, C1: newline, an ANSI escape) or format
    character (Unicode Cf: a right-to-left override, a zero-width space, which print one name
    as another), or None."""
    return next(
        (c for c in s if ord(c) < 32 or 127 <= ord(c) < 160 or unicodedata.category(c) == "Cf"),
        None,
    )


def _check_name(v: str) -> str:
    """A name is printed in tables, messages and file names: it is not empty, holds no control
    character (a newline or an ANSI escape would rewrite the terminal) and is not a page long."""
    if not v.strip():
        raise ValueError("must not be empty")
    bad = control_character(v)
    if bad is not None:
        raise ValueError(f"holds the control character {bad!r}; use printable characters")
    if len(v) > MAX_NAME_CHARS:
        raise ValueError(f"is {len(v)} characters long; use at most {MAX_NAME_CHARS}")
    return v


Name = Annotated[str, AfterValidator(_check_name)]
