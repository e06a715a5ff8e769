"""Two of scipy's compiled modules, loaded without importing the `scipy.linalg` package.

Importing `scipy.linalg` costs ~0.3 s of CPU on the development box (scipy 1.17: its array-API
layer loads numpy.f2py, numpy.testing and numpy.ma), and nothing here uses the package: the
line model needs one LAPACK routine (`dstevd`, the tridiagonal eigen-decomposition of
`latency.line.tagged`, ~4 ms to load alone), and numba imports `scipy.linalg.cython_blas`
whenever it refreshes its target (to find BLAS for `np.dot`, which no kernel here calls): on
each load of the trace kernels from its cache (`workload.traces.seen`, `scan`; the replay's
kernels load without the refresh, `sim.decode.heaps`) and on any compile. Each module here is
the one scipy itself would load (same file, same name, registered in `sys.modules`, so a later
`import scipy.linalg` reuses it). Where scipy is laid out otherwise, nothing is loaded and the
callers import scipy as before."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType


@cache
def linalg_extension(name: str) -> ModuleType | None:
    """`scipy.linalg.<name>` (a compiled module), loaded alone; None where there is none."""
    full = f"scipy.linalg.{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.find_spec("scipy")  # finds the package, does not import it
    for root in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(root) / "linalg" / f"{name}{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader(full, str(path))
                found = importlib.util.spec_from_file_location(full, path, loader=loader)
                if found is None:
                    return None
                module = importlib.util.module_from_spec(found)
                loader.exec_module(module)
                sys.modules[full] = module
                return module
    return None


def blas_for_numba() -> None:
    """Load `scipy.linalg.cython_blas` (~0.04 s: scipy's package, not its linalg) before numba
    looks for it, so numba's `import scipy.linalg.cython_blas` finds it loaded instead of
    importing scipy.linalg (call before a kernel is compiled or loaded through numba's cache)."""
    linalg_extension("cython_blas")
