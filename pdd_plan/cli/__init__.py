"""The `pdd-plan` command line: a thin typer app that parses, calls and renders."""

from __future__ import annotations

from pdd_plan.cli import common
from pdd_plan.cli.main import app


def main() -> None:
    app()


__all__ = ["app", "main", "common"]
