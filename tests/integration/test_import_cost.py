"""What a fresh process imports on each path: scipy.linalg (~0.3 s) on none of a plan's, numba
(~0.25 s) only where a replay runs, and numba's BLAS still there for kernels that want it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdd_plan.uncertainty import split

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SIM = ("pdd_plan.sim.run", "pdd_plan.sim.replay", "pdd_plan.sim.queues", "numba")
HEAVY = ("numba", "scipy.linalg", "scipy.special", "scipy.stats", "matplotlib")


def _run(code: str) -> dict:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _loaded(body: str) -> dict:
    code = (
        f"import json, sys\n{body}\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    )
    return _run(code)


def _cli(args: list[str]) -> str:
    """Code that runs `pdd-plan ARGS` in the child process and asserts it exits 0."""
    return (
        "from pdd_plan.cli import app\n"
        f"sys.argv = {['pdd-plan', *args]!r}\n"
        "try:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code"
    )


def test_the_line_model_calls_lapack_without_scipy_linalg():
    got = _loaded(
        "from pdd_plan.latency.line import tagged\n"
        "tagged.tagged_law(8, 0.7, 10.0, 3.0, 1e6)\n"
        "assert 'scipy.linalg._flapack' in sys.modules"
    )
    assert not any(got.values()), got


def test_a_plan_without_verification_loads_neither_numba_nor_scipy_linalg():
    got = _loaded(_cli(["optimize", "--no-verify", "--draws", "0", "-f", "json"]))
    assert not any(got.values()), got


def test_the_uncertainty_block_without_verification_loads_no_simulator():
    # the block evaluates fleets analytically; the simulator loads only where something replays.
    # split.MIN_DRAWS draws (8, not the default 32): the fewest with which the block forks its
    # second process, so every path the default takes runs, on a quarter of the draws
    got = _run(
        "import json, sys\n"
        + _cli(["optimize", "--no-verify", "-f", "json", "--draws", str(split.MIN_DRAWS)])
        + "\nprint(json.dumps({m: m in sys.modules for m in SIM}))".replace("SIM", repr(SIM))
    )
    assert not any(got.values()), got  # (sim.worker, the replays' light front, may load)


def test_a_verified_plan_does_not_load_scipy_linalg():
    # the replays' kernels load from numba's cache without its target refresh (or run as
    # Python below the crossover), the line model calls LAPACK directly
    got = _loaded(_cli(["optimize", "--draws", "0", "-f", "json"]))
    assert not got["scipy.linalg"], got


def test_numba_finds_its_blas_without_scipy_linalg():
    # scipy's cython_blas loaded first (as the trace kernels do), numba's own lookup finds it:
    # a jitted np.dot (BLAS through that module) gives numpy's product
    got = _run(
        "import json, sys\n"
        "import numpy as np\n"
        "from pdd_plan.common.scipy_direct import blas_for_numba\n"
        "blas_for_numba()\n"
        "import numba\n"
        "dot = numba.njit(lambda a, b: np.dot(a, b))\n"
        "a = np.arange(12.0).reshape(3, 4)\n"
        "ok = bool(np.array_equal(dot(a, a.T), a @ a.T))\n"
        "print(json.dumps({'linalg': 'scipy.linalg' in sys.modules, 'dot': ok}))"
    )
    assert got == {"linalg": False, "dot": True}


def test_the_cli_loads_without_numpy_pydantic_or_rich():
    # `pdd-plan --help` and every command's parsing: typer only; a command loads what it uses
    got = _run(
        "import json, sys\n"
        "import pdd_plan.cli.main\n"
        "print(json.dumps({m: m in sys.modules for m in ('numpy', 'pydantic', 'rich.console')}))"
    )
    assert got == {"numpy": False, "pydantic": False, "rich.console": False}


def test_a_verified_plan_replays_in_a_child_that_alone_loads_numba():
    # the console script's entry point, in a fresh single-threaded process with two cores: the
    # replays run in a forked child (sim.worker), so numba loads there, not here
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: the replays run in the process itself")
    # (read in an exit handler: the installed command leaves without the interpreter's
    # teardown once it succeeds, its exit handlers run first)
    got = _run(
        "import atexit, json, sys\nfrom pdd_plan.cli import main\n"
        "sys.argv = ['pdd-plan', 'optimize', '--draws', '0', '-f', 'json']\n"
        "atexit.register(lambda: print(json.dumps("
        "{m: m in sys.modules for m in ('numba', 'pdd_plan.sim.worker')})))\n"
        "main()"
    )
    assert got == {"numba": False, "pdd_plan.sim.worker": True}


def test_a_prepared_replayer_builds_no_schema_in_its_first_replay(tmp_path):
    # sim.worker's child: the setup and plan arrive pickled from the planner (no validation
    # here), `run.prepare` runs while the parent plans, and the first replay then builds no
    # pydantic validator or serializer of its own (each costs ms on the replays' tail)
    job = tmp_path / "job.pkl"
    _run(
        "import json, pickle\n"
        "from pdd_plan.inputs.context import build_context\n"
        "from pdd_plan.outputs.plan import load_plan\n"
        "p = load_plan('tests/golden/pdd-paper.optimize.yaml')\n"
        "ctx = build_context(p.inputs, 'tests/golden/pdd-paper.optimize.yaml')\n"
        f"pickle.dump((ctx.replay_setup, p), open({str(job)!r}, 'wb'))\n"
        "print(json.dumps({}))"
    )
    got = _run(
        "import json, pickle\n"
        "from pdd_plan.inputs.schema.common import Strict\n"
        "from pdd_plan.sim import run\n"
        f"rs, plan = pickle.load(open({str(job)!r}, 'rb'))\n"
        "def built():\n"
        "    out, todo = set(), list(Strict.__subclasses__())\n"
        "    while todo:\n"
        "        c = todo.pop()\n"
        "        todo += c.__subclasses__()\n"
        "        if c.__pydantic_complete__:\n"
        "            out.add(c.__qualname__)\n"
        "    return out\n"
        "run.prepare()\n"
        "before = built()\n"
        "run.verify(rs, plan, 'pdd', 2000, 1)\n"
        "print(json.dumps({'prepared': sorted(before), 'new': sorted(built() - before)}))"
    )
    assert got["new"] == [] and "GPUProfile" in got["prepared"], got
