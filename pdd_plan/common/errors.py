"""Errors the command line turns into one-line messages and exit codes."""

from __future__ import annotations

from typing import Any


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
    """No plan meets the scenario; the message names the binding constraint (exit 1).

    `reasons`: structured `outputs.plan.Reason`s, the binding one first (one architecture).
    `by_architecture`: `outputs.plan.Infeasible` per architecture, when none could be planned.
    """

    exit_code = 1

    def __init__(
        self,
        message: str,
        reasons: list[Any] | None = None,
        by_architecture: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.reasons = list(reasons or [])
        self.by_architecture = dict(by_architecture or {})

    def __reduce__(self):  # picklable across processes (sweep executors)
        return (type(self), (str(self), self.reasons, self.by_architecture))
