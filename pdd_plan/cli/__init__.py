"""The `pdd-plan` command line: a thin typer app that parses, calls and renders."""

from __future__ import annotations

import os

from pdd_plan.cli import common
from pdd_plan.cli.main import app

# numpy asks the kernel for transparent huge pages on every large array (madvise), and where
# THP defrag is "madvise" (Ubuntu's default) each first touch may stall in direct compaction:
# on the development box a 1M-request replay spent ~0.8 s of system time there (1.5 s against
# 0.8 s without; its user time within noise). Before numpy loads; a user's setting wins.
HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"


def main() -> None:
    os.environ.setdefault(HUGEPAGE_ENV, "0")
    app()


__all__ = ["app", "main", "common"]
