"""Read YAML into schema objects, turning every failure into a one-line InputError."""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..atomic import note_input
from ..errors import InputError

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: str | Path) -> Any:
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), None, "file not found", "check the path")
    if p.is_dir():
        raise InputError(str(p), None, "is a directory, not a YAML file", "give a file path")
    note_input(p)  # no output of this command may overwrite it
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(
            str(p), None, f"cannot read: {e}", "give a readable UTF-8 YAML file"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(
            str(p), None, f"YAML syntax error at {where}{problem}", "fix the YAML syntax"
        ) from None


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _submodels(arg)
    return out


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """Valid keys of the mapping at `loc` (the parent of an unknown key)."""
    current = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in current:
            f = m.model_fields.get(part)
            if f is not None:
                nxt += _submodels(f.annotation)
        if nxt:
            current = nxt
    return sorted({k for m in current for k in m.model_fields})


def _format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "CustomLine", "tuple[float, float, float]") or "[" in str(part):
            continue  # union-branch labels pydantic adds; not user keys
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def validation_to_input_error(
    model: type[BaseModel],
    e: ValidationError,
    file: str,
    fix: str = "see the scenario format in README.md",
) -> InputError:
    errs = e.errors()
    # Prefer the most specific error: extra keys first, then our own validators' messages (in a
    # union such as a line name or an inline line, "not a string" says less), then the deepest.
    errs.sort(
        key=lambda x: (x["type"] != "extra_forbidden", x["type"] != "value_error", -len(x["loc"]))
    )
    err = errs[0]
    loc = tuple(err["loc"])
    field = _format_loc(loc)
    if err["type"] == "extra_forbidden":
        key = str(loc[-1])
        valid = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        fix = f"did you mean '{close[0]}'?" if close else f"valid keys here: {', '.join(valid)}"
        return InputError(file, field, "unknown key", fix)
    msg = err["msg"].removeprefix("Value error, ")
    got = err.get("input")
    got_s = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
    return InputError(file, field, msg + got_s, fix)


def parse(
    model: type[M], data: Any, file: str, fix: str = "see the scenario format in README.md"
) -> M:
    if not isinstance(data, dict):
        raise InputError(file, None, "expected a YAML mapping at the top level", "see README.md")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise validation_to_input_error(model, e, file, fix) from None


def load(model: type[M], path: str | Path) -> M:
    return parse(model, read_yaml(path), str(path))
