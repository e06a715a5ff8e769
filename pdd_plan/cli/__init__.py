"""The `pdd-plan` command line: a thin typer app that parses, calls and renders."""

from __future__ import annotations

import atexit
import gc
import os
import sys

from pdd_plan.cli import common
from pdd_plan.cli.main import app

# numpy asks the kernel for transparent huge pages on every large array (madvise), and where
# THP defrag is "madvise" (Ubuntu's default) each first touch may stall in direct compaction:
# on the development box a 1M-request replay spent ~0.8 s of system time there (1.5 s against
# 0.8 s without; its user time within noise). Before numpy loads; a user's setting wins.
HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"
# OpenBLAS starts a thread per core for every product and eigen-decomposition, and the planner's
# are small (the line's chains: K <= 1,500 states, most under 100): on the 2-core development
# box the threads cost more than they share (an uncertainty block's CPU 4.6 -> 3.0 s, the same
# plan byte for byte), and one thread's sums are the same on every machine. A user's setting wins.
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
# pydantic looks for its plugins (observability hooks such as logfire's) when the first model is
# built, by reading the entry points of every installed distribution: ~45 ms of every command
# here (`validate` 0.57 -> 0.53 s). The CLI's models are its own input checks, which no plugin is
# meant to watch. A user's setting wins (a named plugin list keeps the others on).
PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"
# before anything they govern loads: numpy, the BLAS, pydantic's first model
ENV_DEFAULTS = {HUGEPAGE_ENV: "0", BLAS_THREADS_ENV: "1", PLUGINS_ENV: "__all__"}
# the cyclic collector's youngest generation runs every GC_YOUNG net new container objects, not
# Python's 700: the default optimize's main process made 110 young and 10 middle passes (~50
# ms) and makes none at 50,000, its peak memory the same (226 MB); the children it forks inherit
# it. A command's objects are seldom cyclic garbage (mypy's entry point raises it likewise). It
# errs toward holding such garbage longer: more memory between passes, never a different answer.
GC_YOUNG = 50_000


def main() -> None:
    for k, v in ENV_DEFAULTS.items():
        os.environ.setdefault(k, v)
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
    try:
        app()
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    if os.path.basename(sys.argv[0]) == "pdd-plan":  # the installed command, not a caller's main()
        done()


def done() -> None:
    """A command that succeeded ends here: the exit handlers run and the output is flushed,
    then the process leaves without the interpreter's teardown (every module and object freed
    one by one, ~40 ms with numpy, scipy and pydantic loaded; nothing of ours needs it: files
    are written atomically and closed, children reaped by their blocks). Where the flush
    fails (a closed pipe, a full disk) the ordinary exit reports it."""
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(0)


__all__ = ["app", "main", "common"]
