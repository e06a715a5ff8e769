"""The README is true: every `console` block's command, run as a user would (the installed
`pdd-plan`, from an empty directory), prints what the block shows (lines in order; `...` skips
any); its Python example runs as a doctest; and it stays short and free of internal history (as
do the docs)."""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```$", README.read_text(encoding="utf-8"), re.M | re.S)


def _console_cases() -> list[tuple[str, list[str]]]:
    cases = []
    for block in _blocks("console"):
        lines = block.splitlines()
        assert lines[0].startswith("$ pdd-plan "), lines[0]
        cases.append((lines[0][2:], lines[1:]))
    return cases


def shown_in_order(shown: list[str], printed: str) -> str | None:
    """None when the shown lines are printed in this order (`...` stands for any lines
    between), else the first shown line that is not where it should be."""
    out = [ln.rstrip() for ln in printed.splitlines()]
    at, gap = 0, True
    for want in shown:
        if want.strip() == "...":
            gap = True
            continue
        want = want.rstrip()
        found = next((i for i in range(at, len(out)) if out[i] == want), None)
        if found is None or (not gap and found != at):
            return want
        at, gap = found + 1, False
    return None


@pytest.mark.integration
def test_the_order_check_sees_a_missing_and_a_moved_line():
    printed = "a\nb\nc\nd\n"
    assert shown_in_order(["a", "...", "c", "d"], printed) is None
    assert shown_in_order(["a", "c"], printed) == "c"  # b sits between them
    assert shown_in_order(["...", "d", "c"], printed) == "c"


@pytest.mark.slow
@pytest.mark.parametrize(("command", "shown"), _console_cases(), ids=lambda c: str(c)[:40])
def test_every_console_block_prints_what_it_shows(command, shown, tmp_path):
    exe = shutil.which("pdd-plan") or str(Path(sys.executable).parent / "pdd-plan")
    env = {**os.environ, "COLUMNS": "80"}
    r = subprocess.run(
        [exe, *shlex.split(command)[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    missing = shown_in_order(shown, r.stdout)
    assert missing is None, f"`{command}` no longer prints: {missing!r}\n{r.stdout}"


@pytest.mark.integration
def test_the_python_example_runs(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # as a new user would: from an empty directory
    (block,) = _blocks("python")
    test = doctest.DocTestParser().get_doctest(block, {}, "README", str(README), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 3


@pytest.mark.integration
def test_readme_is_short_and_keeps_no_history():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    docs = [README, *sorted((ROOT / "docs").glob("*.md"))]
    for p in docs:
        hits = re.findall(r"issue [0-9]+|\(was ", p.read_text(encoding="utf-8"), re.I)
        assert not hits, f"{p.name}: {hits}"


@pytest.mark.integration
def test_the_two_commands_are_what_ci_runs():
    (install_run, install_test) = _blocks("bash")[:2]
    assert install_run.strip().endswith("pip install . && pdd-plan compile && pdd-plan optimize")
    test_cmd = install_test.strip().split("&& ")[-1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_cmd in ci and 'pip install ".[test]"' in ci
    assert os.path.exists(ROOT / "examples" / "pdd-paper.yaml")
