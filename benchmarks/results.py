"""The harnesses' stored results (benchmarks/results/NAME.json) and the stamp each carries.

A harness that takes minutes stores what it measured here once; the documents' figures are
rendered from these files (`python -m benchmarks.render`), so a check that the documents are
current is fast. `python -m benchmarks.store NAME [ARGS]` runs any harness and stores its
printed markdown; a harness with its own `store` (accuracy) keeps structured rows instead.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from pdd_plan.common.atomic import write_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def path(name: str) -> Path:
    return RESULTS / f"{name}.json"


def machine() -> str:
    """One line naming the machine a figure was measured on, with its load at the time (the
    development box is shared)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load:.1f} at the start"
    )


def stamp(command: str) -> dict[str, Any]:
    """What every stored result opens with: the command, the UTC date and the machine."""
    return {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
    }


def save(name: str, data: dict[str, Any]) -> Path:
    p = path(name)
    write_atomic(str(p), json.dumps(data, indent=1, sort_keys=False) + "\n")
    return p


def load(name: str) -> dict[str, Any]:
    return json.loads(path(name).read_text(encoding="utf-8"))


def stamp_line(data: dict[str, Any]) -> str:
    """The figures' provenance, as the documents print it above a generated table.

    A result with ``carried`` holds figures measured before their section was generated (the
    section's text as it stood, with the measurement's own date and machine): the line says
    so and names the command whose stored output would replace them."""
    if data.get("carried"):
        return (
            f"Carried from an earlier measurement, not yet rerun by its harness: measured "
            f"{data['date']} on {data['machine']}; {data['carried']} "
            f"`{data['command'].replace('benchmarks.', 'benchmarks.store ', 1)}` replaces "
            "it with what the harness prints."
        )
    wall = data.get("wall_s")
    took = f", {wall:,.0f} s wall" if isinstance(wall, (int, float)) else ""
    return f"Measured {data['date']} on {data['machine']}{took}: `{data['command']}`."


if __name__ == "__main__":
    sys.exit("use python -m benchmarks.store NAME or python -m benchmarks.render")
