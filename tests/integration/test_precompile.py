"""`pdd-plan compile`, the install step: into an empty numba cache it compiles every kernel
(one per ``@jit`` in the replay's sources, each written to the cache), and a following run
loads them all and compiles none; a folder numba cannot write is one line naming the fix."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pdd_plan.sim import precompile
from tests.cli_helpers import refused

ROOT = Path(__file__).resolve().parents[2]
REPLAY_SOURCES = ("sim/decode/heaps.py", "sim/decode/kernel.py", "sim/queue_kernel.py")


def _compile(cache: Path) -> dict:
    env = dict(
        os.environ,
        NUMBA_CACHE_DIR=str(cache),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    out = subprocess.run(
        [sys.executable, "-c", "from pdd_plan.cli import main; main()", "compile", "-f", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {g["group"]: g for g in json.loads(out.stdout)["kernels"]}


@pytest.mark.slow
def test_compile_fills_an_empty_cache_and_a_second_run_loads_it(tmp_path: Path) -> None:
    cache = tmp_path / "numba"
    # the replay's kernels, counted in their sources: one signature per decorator
    jits = sum(
        len(re.findall(r"^@jit\(", (ROOT / "pdd_plan" / f).read_text(), re.M))
        for f in REPLAY_SOURCES
    )
    first = _compile(cache)
    replay, traces = first["replay"], first["trace readers"]
    assert replay["kernels"] == replay["compiled"] == jits and replay["loaded"] == 0
    assert traces["compiled"] == traces["kernels"] > 0 and traces["loaded"] == 0
    for g in first.values():  # each folder is under the cache asked for, holding the code
        for f in map(Path, g["folders"]):
            assert f.parent == cache
            assert list(f.glob("*.nbi")) and list(f.glob("*.nbc"))
    index = sum(len(list(Path(f).glob("*.nbi"))) for f in replay["folders"])
    assert index == jits  # an index per kernel: each compiled one was cached
    again = _compile(cache)
    assert again["replay"]["compiled"] == 0 and again["replay"]["loaded"] == jits
    # the readers' entry points load (their callees' code is inside them): nothing compiles
    assert again["trace readers"]["compiled"] == 0 and again["trace readers"]["loaded"] > 0


@pytest.mark.integration
def test_compile_without_a_writable_cache_says_how_to_fix_it(monkeypatch) -> None:
    nowhere = precompile.Compiled("replay", (), 27, 27, 0, 1.0)
    monkeypatch.setattr(precompile, "compile_kernels", lambda: [nowhere])
    refused("compile", needle=("NUMBA_CACHE_DIR", "no writable cache folder", "replay"))
