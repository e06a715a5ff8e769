"""Progress for a command's long stages (the report's replays and plots, the draws, a fit, a
trace scan): a transient rich bar on standard error while it is a terminal, each stage named,
its count where the stage has one (else a pulsing bar), with the time spent. Nothing on a pipe
or a file, nothing with ``--format json`` (a caller parsing the output reads stderr too, as
often as not), and never on standard output."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any


def wanted(fmt: str = "table") -> bool:
    """Whether a bar shows: standard error is a terminal and the output is not JSON."""
    try:
        return fmt != "json" and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


class Stages:
    """``with Stages("report", wanted(fmt)) as bar: bar.stage("replays", 3); ...; bar.advance()``.
    Disabled, every call does nothing (and rich is not imported)."""

    def __init__(self, name: str, enabled: bool):
        self.name = name
        self.enabled = enabled
        self.bar: Any = None  # a rich Progress once shown (rich imported only then)
        self.task = None

    def __enter__(self) -> Stages:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            from pdd_plan.cli.common import console

            self.bar = Progress(
                TextColumn(f"{self.name}: {{task.description}}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console(stderr=True),
                transient=True,
            )
            self.bar.start()
        return self

    def stage(self, label: str, total: int | None = None) -> None:
        """A new stage: the previous one is done. ``total``: its steps, None if unknown."""
        if self.bar is None:
            return
        if self.task is not None:
            t = self.bar.tasks[-1]
            self.bar.update(self.task, completed=t.total or 0, visible=False)
        self.task = self.bar.add_task(label, total=total)
        self.bar.refresh()  # shown at least once, however short the stage

    def advance(self, n: int = 1) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task, n)

    def count(self, label: str, done: int, total: int) -> None:
        """Stage `label` at `done` of `total` (started here if it is new)."""
        if self.bar is None:
            return
        if self.task is None or self.bar.tasks[-1].description != label:
            self.stage(label, total)
        self.bar.update(self.task, completed=done, total=total)

    def tick(self, label: str | None = None) -> None:
        """One step done (`label`: the stage it belongs to, started here if it is new)."""
        if self.bar is None:
            return
        if label is not None and (self.task is None or self.bar.tasks[-1].description != label):
            self.stage(label)
        self.advance()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
