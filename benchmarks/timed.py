"""One subprocess, timed: its wall seconds and the CPU seconds of it and every descendant it
waited for (`RUSAGE_CHILDREN`: a replay child or a pool worker included), for the harnesses
that time fresh `pdd-plan` processes."""

from __future__ import annotations

import resource
import subprocess
import time
from typing import Any


def run(cmd: list[str], **kwargs: Any) -> tuple[subprocess.CompletedProcess, float, float]:
    """(the finished process, wall seconds, CPU seconds) of `subprocess.run(cmd, **kwargs)`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, **kwargs)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, wall, cpu
