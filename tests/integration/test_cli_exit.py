"""The installed command's early exit after a success: exit handlers run, the output is whole
and flushed, the written plan is complete; a failure exits as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ENTRY = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write('handler ran\\n')); "
    "sys.argv[0] = 'pdd-plan'; from pdd_plan.cli import main; main()"
)


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_a_success_flushes_its_output_and_runs_the_exit_handlers(tmp_path):
    out = tmp_path / "plan.yaml"
    done = _run("optimize", "--no-verify", "--draws", "0", "-f", "json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)  # the whole document, not a cut-off buffer
    assert plan["scenario"] == yaml.safe_load(out.read_text())["scenario"]
    assert "handler ran" in done.stderr


def test_a_failure_keeps_its_exit_code_and_handlers():
    done = _run("optimize", "no-such-scenario.yaml", "--no-verify", "--draws", "0")
    assert done.returncode != 0
    assert "handler ran" in done.stderr
    assert "Traceback" not in done.stderr
