"""The default scenario gives the same plan every time, byte for byte, in every format: in
one process and across processes. Solver wall-clock seconds appear only with --timings."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdd_plan.cli.main import app

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pdd-paper.yaml"
# `optimize examples/pdd-paper.yaml -f yaml` (verified), as tests/golden/make.py writes it
GOLDEN = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"


def _same(x: str, y: str, what: str) -> None:
    if x != y:
        diff = difflib.unified_diff(x.splitlines(), y.splitlines(), "first", what, lineterm="", n=2)
        pytest.fail(f"{what} differs from the first run:\n" + "\n".join(list(diff)[:80]))


def _run_in_process(*args: str) -> str:
    r = CliRunner().invoke(app, ["optimize", *args], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("fmt", ["json", "yaml", "table"])
def test_default_scenario_is_byte_identical(fmt):
    # the second run is on the repo's copy, in the same process: one comparison checks both
    # that a run leaves nothing behind that moves the next and that the bundled default is
    # that file (a third run of the default itself would repeat the first check). The table's
    # second is its golden snapshot, the same command at the same width (make.py, another
    # process; test_golden.py reruns it): json and yaml check the second in-process run
    a = _run_in_process("--format", fmt, "--no-verify")
    if fmt == "table":
        c = (ROOT / "tests" / "golden" / "pdd-paper.optimize.table.txt").read_text(encoding="utf-8")
    else:
        c = _run_in_process(str(EXAMPLE), "--format", fmt, "--no-verify")  # the repo's copy
    _same(a, c, "second run, on examples/pdd-paper.yaml")
    assert "seconds" not in a


def test_verified_plan_is_identical_in_a_fresh_interpreter():
    """The verified default plan from a fresh interpreter is the golden snapshot byte for byte:
    tests/golden/make.py wrote it in another process, and test_golden.py checks that an
    in-process run still prints it, so in-process and fresh runs agree without planning the
    default a third time here."""
    out = subprocess.run(
        [sys.executable, "-c", "from pdd_plan.cli import main; main()", "optimize", "-f", "yaml"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    _same(GOLDEN.read_text(encoding="utf-8"), out, "fresh-interpreter run")
    assert yaml.safe_load(out)["schema_version"] == 2


def test_timings_only_on_request():
    plan = json.loads(_run_in_process("--format", "json", "--no-verify", "--timings"))
    for p in plan["plans"].values():
        assert p["solver"]["seconds"] >= 0.0


def test_replays_in_a_forked_child_give_the_same_plan(monkeypatch):
    """The CLI replays in a child process beside the planning (`sim.worker`); the plan is the
    one the replays run here give, byte for byte (a test worker has threads, so the fork is
    forced past `can_fork`'s refusal)."""
    import warnings

    from pdd_plan.inputs import profiles
    from pdd_plan.inputs.context import build_context, load_scenario
    from pdd_plan.optimize import optimize
    from pdd_plan.sim import worker

    path = profiles.scenario_path(None)
    here = optimize(build_context(load_scenario(path), path)).to_text("yaml")
    monkeypatch.setattr(worker, "can_fork", lambda: True)
    forks = []
    real = worker.Forked.__init__

    def counted(self, *a):
        real(self, *a)
        forks.append(self.pid)

    monkeypatch.setattr(worker.Forked, "__init__", counted)
    with warnings.catch_warnings():  # fork with execnet's thread alive
        warnings.simplefilter("ignore", DeprecationWarning)
        there = optimize(build_context(load_scenario(path), path), replay_worker=True)
    assert len(forks) == 1 and forks[0] > 0
    _same(here, there.to_text("yaml"), "plan with the replays in a child")
