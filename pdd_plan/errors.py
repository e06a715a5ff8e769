"""Errors the command line turns into one-line messages and exit codes."""

from __future__ import annotations


class PddPlanError(Exception):
    """Base class; `exit_code` is what the CLI exits with."""

    exit_code = 2


class InputError(PddPlanError):
    """Bad user input: a file, field, what is wrong and how to fix it (exit 2)."""

    exit_code = 2

    def __init__(self, file: str | None, field: str | None, problem: str, fix: str = ""):
        self.file, self.field, self.problem, self.fix = file, field, problem, fix
        parts = [p for p in (file, f"field '{field}'" if field else None) if p]
        msg = (": ".join(parts) + ": " if parts else "") + problem
        if fix:
            msg += f" (fix: {fix})"
        super().__init__(msg)


class InfeasibleError(PddPlanError):
    """No plan meets the scenario; the message names the binding constraint (exit 1)."""

    exit_code = 1
