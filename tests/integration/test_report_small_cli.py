"""Small commands' output through the CLI: the bathtub's valley row, trace stats' file name
kept whole (unit side: tests/unit/report/test_small_things.py)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app

pytestmark = pytest.mark.integration


@pytest.mark.integration
def test_bathtub_command_shows_the_valley_row():
    r = CliRunner().invoke(
        app,
        ["bathtub", "--model", "deepseek-v4-pro", "--gpu", "h100", "--input-tokens", "65536"],
        env={"COLUMNS": "100"},
    )
    assert r.exit_code == 0, r.output
    m = re.search(r"valley at (\d+)% hit", r.stdout)
    assert m, r.stdout
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith(f"│ {m.group(1)}%"))
    assert "valley" in row, r.stdout


@pytest.mark.integration
def test_trace_stats_keeps_the_file_name_whole(tmp_path):
    src = "examples/traces/mooncake_conversation_trace.jsonl"
    long = tmp_path / ("a-rather-long-trace-file-name-" * 3 + "conversation.jsonl")
    long.write_bytes(open(src, "rb").read())
    r = CliRunner().invoke(app, ["trace", "stats", str(long)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert str(long) in r.stdout.splitlines()[0], r.stdout  # one line, not cut mid-word
    for ln in r.stdout.splitlines()[1:]:
        assert len(ln) <= 80, ln
