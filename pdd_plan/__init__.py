"""pdd-plan: capacity planner and cost/BCR analyzer for PDD LLM serving.

The Python entry points are in :mod:`pdd_plan.api` (`load_scenario`, `build_context`,
`optimize`, `simulate`, `evaluate`; README.md shows them). `load_scenario`, `build_context` and
`simulate` are also here, loaded on first use (the CLI's `--help` should not import the MILP
or numba); `pdd_plan.optimize` and `pdd_plan.evaluate` are the packages of those names.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.2.0"

_API = ("api", "load_scenario", "build_context", "simulate")
__all__ = [*_API, "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'pdd_plan' has no attribute {name!r}")
    api = import_module("pdd_plan.api")
    return api if name == "api" else getattr(api, name)
