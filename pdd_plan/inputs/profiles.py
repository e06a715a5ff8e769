"""Find and load bundled and user profiles (GPU, model, line) by name or path."""

from __future__ import annotations

import difflib
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TypeVar, cast

from pydantic import BaseModel

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.calibrated import apply_calibration
from pdd_plan.inputs.schema import GPUProfile, LineSKU, ModelProfile
from pdd_plan.inputs.schema.io import load

KINDS: dict[str, type[BaseModel]] = {"gpus": GPUProfile, "models": ModelProfile, "lines": LineSKU}
M = TypeVar("M", bound=BaseModel)


def data_dir() -> Path:
    return Path(str(resources.files("pdd_plan") / "data"))


def bundled_names(kind: str) -> list[str]:
    return sorted(p.stem for p in (data_dir() / "profiles" / kind).glob("*.yaml"))


@lru_cache(maxsize=256)
def _load_cached(kind: str, path: str) -> BaseModel:
    obj = load(KINDS[kind], path)
    if kind == "gpus":  # fitted efficiency factors (data/calibration/<gpu>.yaml), if any
        obj = apply_calibration(cast(GPUProfile, obj))
    return obj


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:  # a name longer than the file system allows is no file either
        return False


def _shown(name: str, n: int = 80) -> str:
    return name if len(name) <= n else f"{name[: n // 2]}...{name[-n // 4 :]} ({len(name)} chars)"


def load_profile(
    kind: str, name_or_path: str, field: str | None = None, file: str | None = None
) -> BaseModel:
    """A bundled profile by name, or a YAML file by path; unknown names get the closest match."""
    what = {"gpus": "GPU", "models": "model", "lines": "line SKU"}[kind]
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not _is_file(p):
            raise InputError(
                file, field, f"no {what} profile file '{_shown(name_or_path)}'", "check the path"
            )
        return _load_cached(kind, str(p))
    bundled = data_dir() / "profiles" / kind / f"{name_or_path}.yaml"
    if _is_file(bundled):
        return _load_cached(kind, str(bundled))
    names = bundled_names(kind)
    close = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.4)
    fix = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(names)}"
    raise InputError(file, field, f"unknown {what} '{_shown(name_or_path)}'", fix)


def gpu(name: str, field: str | None = None, file: str | None = None) -> GPUProfile:
    return cast(GPUProfile, load_profile("gpus", name, field, file))


def model(name: str, field: str | None = None, file: str | None = None) -> ModelProfile:
    return cast(ModelProfile, load_profile("models", name, field, file))


def line(name: str, field: str | None = None, file: str | None = None) -> LineSKU:
    return cast(LineSKU, load_profile("lines", name, field, file))


def example_path(name: str = "pdd-paper") -> Path:
    return data_dir() / "examples" / f"{name}.yaml"


def bundled_examples() -> list[str]:
    return sorted(p.stem for p in (data_dir() / "examples").glob("*.yaml"))


def scenario_path(arg: str | None) -> str:
    """A command's scenario argument as a file: none is the bundled default; a path that exists
    is itself; otherwise the name of a bundled example (`narrow-line`), so the examples run from
    any directory once the package is installed. Anything else is left for the reader's
    'file not found', which names it."""
    if arg is None:
        return str(example_path())
    if Path(arg).exists() or arg.endswith((".yaml", ".yml")) or "/" in arg:
        return arg
    return str(example_path(arg)) if arg in bundled_examples() else arg
