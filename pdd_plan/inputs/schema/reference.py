"""The scenario format as Markdown, generated from the schema itself: every field with its type,
default and description (the string under the field), and the limit table. `docs/scenario.md`
is this text; a test keeps them equal (`python -m pdd_plan.inputs.schema.reference` prints it)."""

from __future__ import annotations

import ast
import inspect
import sys
import types
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pdd_plan.common import limits
from pdd_plan.inputs.schema.scenario import Scenario

HEADER = """# Scenario format

Every field a scenario file (YAML) may hold, generated from the schema
(`pdd_plan/inputs/schema/`; regenerate with `python -m pdd_plan.inputs.schema.reference >
docs/scenario.md`). Unknown keys are errors, with the closest valid key suggested. The bundled
default is `examples/pdd-paper.yaml`; `pdd-plan validate FILE` checks a file without planning.
"""


@cache
def _class_nodes(module: str) -> dict[str, ast.ClassDef]:
    """Every class statement of a module by its qualified name (one parse per module)."""
    found: dict[str, ast.ClassDef] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found[prefix + node.name] = node
                walk(node.body, f"{prefix}{node.name}.")

    walk(ast.parse(inspect.getsource(sys.modules[module])).body, "")
    return found


@cache
def _docstrings(cls: type) -> dict[str, str]:
    """The string under each annotated field of a class's own body (a field's description; read
    here rather than by pydantic's use_attribute_docstrings, which parses every class at import)."""
    node = _class_nodes(cls.__module__).get(cls.__qualname__)
    if node is None:
        return {}
    out = {}
    for stmt, after in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            out[stmt.target.id] = inspect.cleandoc(after.value.value)
    return out


def field_description(model: type[BaseModel], name: str) -> str | None:
    """A field's description: `Field(description=...)`, else the string under the field in the
    class that declares it last (a subclass's own declaration replaces the inherited one)."""
    f = model.model_fields[name]
    if f.description is not None:
        return f.description
    for cls in model.__mro__:
        if name in cls.__dict__.get("__annotations__", {}):
            return _docstrings(cls).get(name)
    return None


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds (inside lists, dicts, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _type_text(annotation: Any) -> str:
    """A short, user-facing spelling of a field's type."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        text = " or ".join(dict.fromkeys(_type_text(a) for a in args))
        return text + (" or null" if type(None) in typing.get_args(annotation) else "")
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin in (list, tuple):
        return "list"
    if origin is dict:
        return "mapping"
    names = {int: "integer", float: "number", str: "text", bool: "true/false"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default_text(f: FieldInfo) -> str:
    if f.is_required():
        return "required"
    v = f.get_default(call_default_factory=True)
    if isinstance(v, BaseModel):
        return "see below" if v.model_fields_set else "defaults"
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"`{v}`" if not isinstance(v, list | dict) or v else "empty"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    out = []
    for name, f in model.model_fields.items():
        path = f"{prefix}{name}"
        desc = " ".join((field_description(model, name) or "").split())
        out.append(f"| `{path}` | {_type_text(f.annotation)} | {_default_text(f)} | {desc} |")
    return out


def _paths(model: type[BaseModel], prefix: str, found: dict[type, list[str]]) -> None:
    """Every place each sub-model appears, depth first (a model used twice is one table)."""
    for name, f in model.model_fields.items():
        origin = typing.get_origin(f.annotation)
        key = f"{prefix}{name}" + ("[]" if origin is list else "")
        key += ".<name>" if "dict[" in str(f.annotation) and _models(f.annotation) else ""
        for sub in _models(f.annotation):
            first = sub not in found
            found.setdefault(sub, []).append(key)
            if first:
                _paths(sub, key + ".", found)


def _sections(model: type[BaseModel]) -> list[tuple[str, list[str]]]:
    """One table per model: the scenario's own fields, then each sub-mapping in file order."""
    found: dict[type, list[str]] = {}
    _paths(model, "", found)
    out = [("Top level", _rows(model, ""))]
    for sub, keys in found.items():
        title = f"`{keys[0]}`" + (
            f" (also {', '.join(f'`{k}`' for k in keys[1:])})" if len(keys) > 1 else ""
        )
        out.append((title, _rows(sub, keys[0] + ".")))
    return out


def limit_rows() -> list[str]:
    rows = ["| limit (environment variable) | default | bounds | why |", "|---|---:|---|---|"]
    for lim in limits.LIMITS.values():
        rows.append(f"| `{lim.env}` | {lim.default:,} | {lim.applies_to} | {lim.why} |")
    return rows


def scenario_reference() -> str:
    parts = [HEADER]
    for title, rows in _sections(Scenario):
        parts.append(f"## {title}\n")
        parts.append("| field | type | default | what it is |\n|---|---|---|---|")
        parts.append("\n".join(rows) + "\n")
    parts.append(
        "## Limits\n\nEvery size a user controls is bounded and checked before any work: a value"
        " over a limit is a one-line error (exit 2) naming the field or flag, the limit and the"
        " variable that raises it (set it to a positive integer, e.g."
        " `PDD_PLAN_MAX_REQUESTS=50000000 pdd-plan simulate ...`).\n"
    )
    parts.append("\n".join(limit_rows()) + "\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(scenario_reference(), end="")
