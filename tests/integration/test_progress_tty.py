"""Long commands show a progress bar on a terminal and nothing elsewhere: run under a
pseudo-terminal (stderr a tty, stdout a pipe), `report --html`, `calibrate`, `trace stats` and
`optimize` with draws write their bar to the terminal and keep standard output clean; with
stderr a pipe, or with --format json, no bar is drawn at all."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "examples" / "traces" / "mooncake_conversation_trace.jsonl"
CSV = ROOT / "pdd_plan" / "data" / "calibration" / "calibration_measurements.csv"
ENTRY = "from pdd_plan.cli import main; main()"


def _env() -> dict:
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30")
    env.pop("CI", None)  # rich treats CI as a non-interactive terminal
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _on_tty(argv: list[str], timeout: float = 300) -> tuple[str, str, int]:
    """(stdout, what the terminal got, exit code) of `pdd-plan argv` with stderr on a pty."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    p = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *argv],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=_env(),
        cwd=ROOT,
    )
    os.close(slave)
    got = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            p.kill()
            raise AssertionError(f"no output for {timeout} s: {argv}")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        got += chunk
    out = p.stdout.read().decode()
    p.wait(timeout)
    os.close(master)
    return out, got.decode(errors="replace"), p.returncode


def _on_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *argv],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def small_plan() -> Path:
    """A verified plan for `report`: the default's golden snapshot (what `optimize -f yaml`
    prints, checked by test_golden.py), read only, instead of planning one in a subprocess."""
    return ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"


def _cases(plan: Path, tmp: Path) -> dict[str, list[str]]:
    return {
        "trace stats": ["trace", "stats", str(TRACE)],
        "optimize": ["optimize", "pdd-paper", "--no-verify", "--draws", "8"],
        "report": ["report", str(plan), "--html", str(tmp / "r.html"), "--no-regimes"],
        "calibrate": ["calibrate", str(CSV)],
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trace stats", "optimize", "report", "calibrate"])
def test_a_bar_on_a_terminal_never_on_stdout(name, small_plan, tmp_path):
    out, tty, rc = _on_tty(_cases(small_plan, tmp_path)[name])
    assert rc == 0, (out, tty)
    assert f"{name}:" in tty, tty[-2000:]  # the bar's label, drawn on the terminal
    assert "\x1b" not in out and f"{name}:" not in out  # stdout: the answer only


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trace stats", "optimize"])
def test_no_bar_on_a_pipe(name, small_plan, tmp_path):
    r = _on_pipe(_cases(small_plan, tmp_path)[name])
    assert r.returncode == 0, r.stderr
    assert f"{name}:" not in r.stderr and "\x1b" not in r.stderr, r.stderr


@pytest.mark.slow
def test_no_bar_with_json_on_a_terminal(small_plan, tmp_path):
    out, tty, rc = _on_tty(["trace", "stats", str(TRACE), "-f", "json"])
    assert rc == 0 and out.lstrip().startswith("{"), out
    assert "trace stats:" not in tty, tty
