"""One name for replaying a plan to judge it against the SLA: verify. The old flag stays an
alias, so the old flag given to optimize still runs."""

from __future__ import annotations

import pytest
import typer

from pdd_plan.cli.main import app

pytestmark = pytest.mark.unit


def test_verify_draws_flag_keeps_confirm_as_its_alias():
    cmd = typer.main.get_command(app).commands["optimize"]  # type: ignore[attr-defined]
    (opt,) = [p for p in cmd.params if p.name == "verify_draws"]
    assert opt.opts == ["--verify-draws", "--confirm"]
    ctx = cmd.make_context("optimize", "--confirm 3".split(), resilient_parsing=True)
    assert ctx.params["verify_draws"] == 3
