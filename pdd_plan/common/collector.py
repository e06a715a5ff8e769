"""Loading many long-lived objects (a command's imports, numba and its kernels) without the
cyclic garbage collector: its passes over them would find nothing to free."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def frozen_after() -> Iterator[None]:
    """The collector off for the block; what the block created (classes, functions, pydantic's
    schemas, numba's types and dispatchers: some 10^5 objects) then frozen out of its later
    passes, since they live until the process ends. A collector that was off stays off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()
