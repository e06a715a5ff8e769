"""The default scenario gives the same plan every time: byte-identical JSON once the solver's
wall-clock `seconds` fields are removed, in one process and across processes."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pdd-paper.yaml"


def _strip_seconds(obj, parent: str = ""):
    """Drop `seconds` inside every `solver` mapping (wall clock); keep everything else."""
    if isinstance(obj, dict):
        return {
            k: _strip_seconds(v, k)
            for k, v in obj.items()
            if not (parent == "solver" and k == "seconds")
        }
    if isinstance(obj, list):
        return [_strip_seconds(v, parent) for v in obj]
    return obj


def _canonical(text: str) -> bytes:
    data = json.loads(text)
    for plan in data["plans"].values():
        assert "seconds" in plan["solver"]  # the field we drop is where we think it is
    return json.dumps(_strip_seconds(data), indent=2).encode()


def _same(x: bytes, y: bytes, what: str) -> None:
    if x != y:
        diff = difflib.unified_diff(
            x.decode().splitlines(), y.decode().splitlines(), "first", what, lineterm="", n=2
        )
        pytest.fail(f"{what} differs from the first run:\n" + "\n".join(list(diff)[:80]))


def _run_in_process(*args: str) -> str:
    r = CliRunner().invoke(app, ["optimize", *args, "--format", "json"])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_default_scenario_is_deterministic():
    a = _canonical(_run_in_process())  # no argument: the bundled default scenario
    b = _canonical(_run_in_process())
    c = _canonical(_run_in_process(str(EXAMPLE)))  # the repo's copy of it
    _same(a, b, "second in-process run")
    _same(a, c, "run on examples/pdd-paper.yaml")
    # a fresh interpreter (no profile cache, fresh RNG state) agrees too
    out = subprocess.run(
        [sys.executable, "-c", "from pdd_plan.cli import main; main()", "optimize", "-f", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    _same(a, _canonical(out), "fresh-interpreter run")


def test_strip_seconds_removes_only_solver_seconds():
    d = {"solver": {"status": "Optimal", "seconds": 1.2, "milps": 3}, "x": [{"seconds": 1}]}
    assert _strip_seconds(d) == {"solver": {"status": "Optimal", "milps": 3}, "x": [{"seconds": 1}]}
