"""The decode kernels load lazily: a fresh process that replays needs numba's cached event
loop only (not its handlers, nor the heap helpers), and replays the same as one that compiled
every handler. Loading from the cache skips numba's target refresh (its lowering registries
load only to compile), and a loaded kernel runs the same as the Python loop it replaced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
import numpy as np
from pdd_plan.sim.decode import heaps, kernel as k
from pdd_plan.sim.queues import _least_loaded_compiled, _least_loaded_python
sig = next(s for d, s in heaps._DEFERRED if d is k.run_events)
cached = heaps._in_cache(k.run_events, sig)
k.ready(k.run_events)
k.ready(k.run_events)  # ready already: loads nothing more
loaded = sum(len(d.overloads) for d, _ in heaps._DEFERRED)
rng = np.random.default_rng(3)
a = np.round(np.cumsum(rng.exponential(0.1, 2000)), 1)
svc = [np.round(rng.exponential(0.3, 2000), 1) for _ in range(2)]
got, want = _least_loaded_compiled(a, svc, [3, 2], None), _least_loaded_python(a, svc, [3, 2], None)
print(json.dumps({"cached": cached, "loop": len(k.run_events.overloads),
                  "handlers": loaded - 1,
                  "same": bool(np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])),
                  "refreshed": "numba.np.arraymath" in sys.modules}))
"""


def _probe() -> dict:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_cached_event_loop_loads_alone() -> None:
    first = _probe()  # a cold cache compiles (and caches) every kernel, callees first
    assert first["loop"] == 1
    if not first["cached"]:
        # one signature each, as `jit` compiles them: kernel.py's 16 and the 8 heap helpers
        assert first["handlers"] == 24
    assert first["same"]
    again = _probe()
    assert again["same"]
    if again["cached"]:  # a writable cache: the loop is all a replay loads, with no refresh
        assert again == {"cached": True, "loop": 1, "handlers": 0, "same": True, "refreshed": False}
