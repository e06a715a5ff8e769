"""A package that is also its own entry point: `pdd_plan.optimize(ctx)` and
`pdd_plan.evaluate(ctx, fleets)` call the function of that name whether or not the subpackage
has been imported (importing a subpackage binds its name on the parent, which would otherwise
hide the public function of the same name)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(module_name: str, fn: Callable[..., Any]) -> None:
    """Calling the module `module_name` calls `fn`."""

    class _Entry(types.ModuleType):
        __doc__ = sys.modules[module_name].__doc__

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

    sys.modules[module_name].__class__ = _Entry
