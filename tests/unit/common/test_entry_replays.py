"""The entry point forks the replays' child before typer parses, and only for a command line
that replays: `optimize` without --no-verify or a help flag."""

from __future__ import annotations

import pytest

import pdd_plan.cli as cli
from pdd_plan.sim import worker

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("args", "replays"),
    [
        (["optimize"], True),
        (["optimize", "narrow-line", "--format", "json", "--draws", "0"], True),
        (["--debug", "optimize", "-f", "json"], True),  # the root's flag takes no value
        (["optimize", "--no-verify"], False),
        (["optimize", "--format", "json", "--no-verify"], False),
        (["optimize", "--help"], False),
        (["optimize", "-h"], False),
        (["--help"], False),
        ([], False),
        (["evaluate", "optimize"], False),  # a scenario named optimize: the command is evaluate
        (["simulate", "plan.yaml"], False),
        (["sweep", "x.yaml", "--vary", "a=1:2:1"], False),
    ],
)
def test_which_command_lines_replay(args, replays):
    assert cli.wants_replays(args) is replays


def _main_with(monkeypatch, argv: list[str]) -> dict:
    seen: dict = {}
    started, closed = [], []
    monkeypatch.setattr(worker, "start_early", lambda: started.append(True))
    monkeypatch.setattr(worker, "close_early", lambda: closed.append(True))

    def fake_app() -> None:
        seen["started_before_parse"] = bool(started)
        raise SystemExit(0)  # typer's standalone exit

    monkeypatch.setattr(cli, "app", fake_app)
    monkeypatch.setattr(cli.sys, "argv", ["pdd-plan", *argv])
    with pytest.raises(SystemExit):
        cli.main()
    seen["closed_after"] = bool(closed)
    return seen


def test_the_child_starts_before_parsing_and_is_closed_after(monkeypatch):
    got = _main_with(monkeypatch, ["optimize", "-f", "json"])
    assert got == {"started_before_parse": True, "closed_after": True}


def test_no_child_for_a_command_that_does_not_replay(monkeypatch):
    got = _main_with(monkeypatch, ["optimize", "--no-verify"])
    assert got == {"started_before_parse": False, "closed_after": False}
