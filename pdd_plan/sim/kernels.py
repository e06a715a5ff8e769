"""The compiled kernels' modules, imported when a replay first needs them (not with the
simulator): `sim.queue_kernel` (the prefill and line loops) and `sim.decode.kernel` (the decode
loop), with numba and the kernels' dispatchers."""

from __future__ import annotations

import sys
from types import ModuleType

from pdd_plan.common.collector import frozen_after


def load() -> ModuleType:
    """`sim.queue_kernel`, with `sim.decode.kernel` loaded too (every replay decodes). Imported
    once, without the cyclic collector (numba's ~10^5 objects cost ~70 passes, ~16 ms, while
    they load) and frozen out of its later passes after."""
    done = sys.modules.get("pdd_plan.sim.queue_kernel")
    if done is not None and "pdd_plan.sim.decode.kernel" in sys.modules:
        return done
    with frozen_after():
        from pdd_plan.sim import queue_kernel  # numba: loaded when a replay runs, not on import
        from pdd_plan.sim.decode import kernel  # noqa: F401  (the decode loop: as above)
    return queue_kernel


def warm() -> None:
    """`load`, then the entry kernels' compiled code a replay's first calls would load (the
    prefill queue's, the line's and the decode loop's, ~25 ms): for a process that loads ahead
    while another plans (`sim.worker`)."""
    queue_kernel = load()
    from pdd_plan.sim.decode import kernel  # (loaded by `load` above: here for its names)

    for entry in (queue_kernel.least_loaded, queue_kernel.line_events):
        queue_kernel.ready(entry)
    kernel.ready(kernel.run_events)
