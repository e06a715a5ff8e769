"""The decode kernels load lazily: a fresh process that replays needs numba's cached event
loop only (not its handlers, nor the heap helpers), and replays the same as one that compiled
every handler."""

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
import json
from pdd_plan.sim.decode import heaps, kernel as k
sig = next(s for d, s in heaps._DEFERRED if d is k.run_events)
cached = heaps._in_cache(k.run_events, sig)
k.ready(k.run_events)
print(json.dumps({"cached": cached, "loop": len(k.run_events.overloads),
                  "handlers": sum(len(d.overloads) for d, _ in heaps._DEFERRED) - 1}))
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
    again = _probe()
    if again["cached"]:  # a writable cache: the loop is all a replay loads
        assert again == {"cached": True, "loop": 1, "handlers": 0}
