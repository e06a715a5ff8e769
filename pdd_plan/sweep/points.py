"""The points of a sweep: scenario data with dotted keys set, validated before anything solves.

Every point is the scenario's dict, deep-copied, with its keys set, validated through the
Scenario schema and resolved, so a bad key or value fails at once as one InputError naming
`--vary KEY` (the flag the keys come from; cli/sweep_grid.py parses it).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import parse, validation_to_input_error
from pdd_plan.inputs.schema.scenario import Scenario


@dataclass(frozen=True)
class Vary:
    """One axis of the grid: a dotted scenario key and the values it takes, in order."""

    key: str
    start: float
    stop: float
    step: float
    values: tuple[float, ...]

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "start": self.start,
            "stop": self.stop,
            "step": self.step,
            "values": list(self.values),
        }


def grid(varies: Sequence[Vary]) -> list[tuple]:
    """The Cartesian product of the values, the first axis outermost."""
    keys = [v.key for v in varies]
    if len(set(keys)) != len(keys):  # the command line says which; here it is a caller's bug
        raise ValueError(f"each key once per sweep (got {', '.join(keys)})")
    return list(itertools.product(*(v.values for v in varies)))


def _not_index(key: str, where: list[str], part: str) -> InputError:
    return InputError(
        None,
        f"--vary {key}",
        f"'{'.'.join(where)}' is a list; '{part}' is not an index",
        f"index it with a number, e.g. {'.'.join([*where, '0'])}",
    )


def _step(node: Any, part: str, key: str, where: list[str]) -> tuple[Any, Any]:
    """The container to set `part` in, and the index or key of `part` there."""
    if isinstance(node, list):
        if not part.isdigit():
            raise _not_index(key, where, part)
        idx = int(part)
        if idx >= len(node):
            raise InputError(
                None,
                f"--vary {key}",
                f"'{'.'.join(where)}' has {len(node)} entries, no index {idx}",
                f"use an index below {len(node)}",
            )
        return node, idx
    if isinstance(node, dict):
        return node, part
    raise InputError(
        None,
        f"--vary {key}",
        f"'{'.'.join(where)}' is a value ({node!r}), not a mapping",
        f"vary '{'.'.join(where)}' itself",
    )


def set_key(data: dict, key: str, value: Any) -> dict:
    """A deep copy of `data` with the dotted `key` set to `value`.

    Missing mappings along the path are created (the schema then says whether they are
    allowed); numeric parts index lists. The path may not run through a value.
    """
    out = copy.deepcopy(data)
    node: Any = out
    parts = key.split(".")
    for i, part in enumerate(parts):
        holder, at = _step(node, part, key, parts[:i])
        if i == len(parts) - 1:
            holder[at] = value
        else:
            if isinstance(holder, dict) and holder.get(at) is None:
                holder[at] = {}
            node = holder[at]
    return out


def _check(data: dict, file: str, keys: Sequence[str], values: Sequence) -> None:
    """Validate and resolve one point; a failure names the --vary keys and their values."""

    at = ", ".join(f"{k}={v}" for k, v in zip(keys, values))
    field = "--vary " + ", ".join(keys)

    def wrapped(inner: InputError) -> InputError:
        where = inner.field or inner.file
        prefix = f"{where}: " if where and where not in keys else ""
        return InputError(None, field, f"{at}: {prefix}{inner.problem}", inner.fix)

    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        raise wrapped(validation_to_input_error(Scenario, e, file)) from None
    try:
        build_context(sc, file)
    except InputError as inner:
        raise wrapped(inner) from None


def grid_scenarios(data: dict, file: str, varies: Sequence[Vary]) -> list[dict]:
    """The validated scenario dict of every grid point, in grid order.

    A point that fails validation is retried with each of its --vary alone, so the error names
    the one key at fault; a clash only the combination makes (a P90 above the P99) names all.
    """

    build_context(parse(Scenario, data, file), file)  # the base scenario's own errors name the file
    keys = [v.key for v in varies]
    out = []
    for values in grid(varies):
        d = data
        for k, x in zip(keys, values):
            d = set_key(d, k, x)
        try:
            _check(d, file, keys, values)
        except InputError:
            for k, x in zip(keys, values):
                _check(set_key(data, k, x), file, [k], [x])
            raise
        out.append(d)
    return out


__all__ = ["Vary", "grid", "set_key", "grid_scenarios"]
