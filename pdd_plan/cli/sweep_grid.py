"""`--vary KEY=START:STOP:STEP`: the sweep grid as the command line spells it.

KEY is a dotted path into the scenario YAML (`sla.ttft_p90_s`, `prices.h200`,
`datacenters.0.gpus.h100`); the values run from START by STEP and include STOP when it lands on
the grid (within a relative 1e-9). Several give the Cartesian product, the first --vary
outermost. Every error names the --vary flag at fault.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.sweep.points import Vary

MAX_POINTS = limits.LIMITS["SWEEP_POINTS"].default  # in force: limits.value("SWEEP_POINTS")
_TOL = 1e-9
_FIX = "write KEY=START:STOP:STEP, e.g. workload.rate_rps=20:60:20"
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")
_INT_RE = re.compile(r"^[+-]?\d+$")


def _number(text: str, what: str, key: str, spec: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise InputError(
            None,
            f"--vary {key}",
            f"{what} '{text}' in '{spec}' is not a finite number",
            "write KEY=START:STOP:STEP with numbers, e.g. sla.ttft_p90_s=4:12:2",
        )
    return x


def _key(spec: str) -> tuple[str, str]:
    """The dotted key and the range text of `spec`."""
    key, sep, rng = spec.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(None, "--vary", f"'{spec}' is not KEY=START:STOP:STEP", _FIX)
    if not _KEY_RE.match(key):
        raise InputError(
            None,
            f"--vary {key}",
            f"'{key}' is not a dotted key path",
            "use the YAML keys joined by dots, e.g. sla.ttft_p90_s or datacenters.0.gpus.h100",
        )
    return key, rng


def _range(key: str, rng: str, spec: str) -> tuple[list[str], float, float, float]:
    """START, STOP, STEP as written and as numbers, checked to ascend."""
    parts = [p.strip() for p in rng.split(":")]
    if len(parts) != 3:
        raise InputError(None, f"--vary {key}", f"'{rng}' is not START:STOP:STEP", _FIX)
    start, stop, step = (_number(t, w, key, spec) for t, w in zip(parts, ("START", "STOP", "STEP")))
    if step <= 0:
        raise InputError(None, f"--vary {key}", f"STEP must be > 0 (got {parts[2]})", _FIX)
    if stop < start:
        raise InputError(
            None,
            f"--vary {key}",
            f"STOP {parts[1]} is below START {parts[0]}",
            "give START <= STOP (the values ascend by STEP)",
        )
    return parts, start, stop, step


def parse_vary(spec: str) -> Vary:
    """`KEY=START:STOP:STEP` -> the key and its grid (STOP included when on the grid)."""
    key, rng = _key(spec)
    parts, start, stop, step = _range(key, rng, spec)
    q = (stop - start) / step
    on_grid = abs(q - round(q)) <= _TOL * max(1.0, abs(q))
    n = round(q) if on_grid else math.floor(q)
    # before the values are built: 1:1e12:1 must not allocate a list of a trillion
    limits.check(
        "SWEEP_POINTS", n + 1, None, f"--vary {key}", "use a larger STEP or a narrower range"
    )
    # integers as written stay integers (link.max_lines=1:4:1 must not become 1.0)
    integral = all(_INT_RE.match(p) for p in parts)
    vals: list[float] = []
    for i in range(n + 1):
        v = stop if i == n and on_grid else start + i * step
        vals.append(int(round(v)) if integral else float(round(v, 12)))
    if integral:
        start, stop, step = int(start), int(stop), int(step)
    return Vary(key, start, stop, step, tuple(vals))


def check_grid(varies: Sequence[Vary]) -> int:
    """Each key once, and a grid small enough to run; the number of points."""
    keys = [v.key for v in varies]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise InputError(
            None, f"--vary {dup[0]}", "given more than once", "give each key once per sweep"
        )
    n = math.prod(len(v.values) for v in varies)
    limits.check(
        "SWEEP_POINTS", n, None, "--vary " + ", ".join(keys), "use larger steps or fewer --vary"
    )
    return n


__all__ = ["MAX_POINTS", "parse_vary", "check_grid"]
