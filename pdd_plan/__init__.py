"""pdd-plan: capacity planner and cost/BCR analyzer for PDD LLM serving.

The public API, loaded on first use (the CLI's `--help` should not import the MILP or numba):
`load_scenario`, `build_context`, `optimize`, `simulate`, `evaluate` (README.md shows them).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.2.0"

_API = {
    "load_scenario": "pdd_plan.inputs.context",
    "build_context": "pdd_plan.inputs.context",
    "optimize": "pdd_plan.optimize",
    "simulate": "pdd_plan.sim.run",
    "evaluate": "pdd_plan.evaluate.run",
}
__all__ = [*_API, "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'pdd_plan' has no attribute {name!r}")
    attr = "run" if name == "simulate" else name
    return getattr(import_module(_API[name]), attr)
