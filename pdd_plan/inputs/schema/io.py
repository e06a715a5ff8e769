"""Read YAML into schema objects, turning every failure into a one-line InputError."""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import check_size, max_bytes, require_file

M = TypeVar("M", bound=BaseModel)


# Scenario, plan and profile files are kilobytes; a cap keeps a stray multi-GB file from
# being read and parsed at all (a 52 MB scenario took minutes and GBs). Raise it with the
# environment variable.
MAX_YAML_MB_ENV = "PDD_PLAN_MAX_YAML_MB"
DEFAULT_MAX_YAML_MB = 8.0


def max_yaml_bytes() -> int:
    return max_bytes(MAX_YAML_MB_ENV, DEFAULT_MAX_YAML_MB, "e.g. 64")


# libyaml's C parser when PyYAML was built with it (~10x faster, far less memory on big files)
_SAFE_LOADER: type = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


class DuplicateKeyError(yaml.YAMLError):  # type: ignore[misc]
    def __init__(self, key: Any, first: int, mark: Any):
        self.problem = f"key '{key}' given twice (first on line {first})"
        self.problem_mark = mark
        super().__init__(self.problem)


class UniqueKeyLoader(_SAFE_LOADER):  # type: ignore[misc]
    """The safe loader, refusing a key given twice in one mapping (PyYAML keeps the last
    one silently, so a typo'd second `rate_rps:` would win unnoticed)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges are meant to be overridden
            key = self.construct_object(key_node, deep=deep)
            try:
                if key in seen:
                    raise DuplicateKeyError(key, seen[key], key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
            except TypeError:  # unhashable key: the base constructor says so
                pass
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _read_text(p: Path) -> str:
    # /dev/zero, a FIFO: reading would never end; noted: no output may overwrite it
    require_file(p, "give the path of a YAML file")
    check_size(p, max_yaml_bytes(), "YAML", MAX_YAML_MB_ENV)
    return p.read_text(encoding="utf-8")


def read_yaml(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = _read_text(p)
    except (OSError, UnicodeDecodeError) as e:  # e.g. a name longer than the OS allows
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise InputError(
            _short(str(p)), None, f"cannot read: {why}", "give a readable UTF-8 YAML file"
        ) from None
    return parse_yaml_text(text, str(p))


# What a YAML input may hold (limits YAML_DEPTH and YAML_NODES) is checked on the event stream
# before any node is built: nesting, and the size with every alias expanded.
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _refuse_shape(file: str, mark: Any, problem: str, fix: str) -> InputError:
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return InputError(file, None, f"{where}{problem}", fix)


def _expansion_error(file: str, ev: Any, anchor: str | None, lines: dict[str, int]) -> InputError:
    """The nodes limit is passed: name the anchor whose alias took it over (and its line)."""
    what = "once its aliases (*name) are expanded"
    if anchor is not None:
        where = f" (defined on line {lines[anchor]})" if anchor in lines else ""
        what = f"once alias *{anchor} of anchor &{anchor}{where} is expanded"
    return _refuse_shape(
        file,
        ev.start_mark,
        f"expands to more than {limits.value('YAML_NODES'):,} values {what}",
        "write the values out instead of nesting anchors and aliases, or "
        + limits.raise_hint("YAML_NODES"),
    )


def check_yaml_shape(text: str, file: str) -> None:
    """Refuse YAML nested deeper than the YAML_DEPTH limit or larger than YAML_NODES values once
    its aliases are expanded; one pass over the parser's events, no node built."""
    max_depth, max_nodes = limits.value("YAML_DEPTH"), limits.value("YAML_NODES")
    sizes: dict[str, int] = {}  # anchor -> nodes under it, aliases expanded
    lines: dict[str, int] = {}  # anchor -> the line it is defined on
    stack: list[list[Any]] = [[None, 0]]  # [anchor, nodes so far] per open collection
    last_alias: str | None = None  # the alias that grew the document last
    for ev in yaml.parse(text, Loader=_SAFE_LOADER):
        if getattr(ev, "anchor", None) is not None and not isinstance(ev, yaml.AliasEvent):
            lines.setdefault(ev.anchor, ev.start_mark.line + 1)
        if isinstance(ev, _OPEN):
            stack.append([ev.anchor, 1])
            if len(stack) > max_depth:
                raise _refuse_shape(
                    file,
                    ev.start_mark,
                    f"nested more than {max_depth} levels deep",
                    "flatten the lists and mappings, or " + limits.raise_hint("YAML_DEPTH"),
                )
            continue
        if isinstance(ev, _CLOSE):
            anchor, n = stack.pop()
        elif isinstance(ev, yaml.ScalarEvent):
            anchor, n = ev.anchor, 1
        elif isinstance(ev, yaml.AliasEvent):
            anchor, n = None, sizes.get(ev.anchor, 1)
            if n > 1:
                last_alias = ev.anchor
        else:
            continue
        if anchor is not None:
            sizes[anchor] = n
        stack[-1][1] += n
        if stack[-1][1] > max_nodes:
            raise _expansion_error(file, ev, last_alias, lines)


def parse_yaml_text(text: str, file: str) -> Any:
    """Parse YAML with the unique-key safe loader; every failure is a one-line InputError."""
    try:
        check_yaml_shape(text, file)
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(
            file, None, f"YAML syntax error at {where}{problem}", "fix the YAML syntax"
        ) from None
    except RecursionError:
        raise InputError(
            file, None, "YAML nested too deeply to read", "flatten the lists and mappings"
        ) from None


def _short(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[: n // 2] + "..." + s[-n // 2 :]


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _submodels(arg)
    return out


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
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


def _format_loc(loc: tuple[Any, ...]) -> str:
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
    field = _format_loc(loc) if loc else None  # cross-field checks name their fields
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
