"""The walk of the default scenario through `optimize()`: how often it comes back to a module.

Usage: ``python -m benchmarks.walk [--scenario NAME] [--verify] [--top N]``

Reading the planner as a newcomer does: start at `pdd_plan.optimize.optimize`, follow each
call into a function not read before, and come back when it returns. A `sys.setprofile`
tracer records that walk on a real run (the default scenario, `verify=False` unless
`--verify`: the replays are the simulator's walk, not the planner's). Counted:

* a call into a pdd_plan function is followed the first time that function is called; a later
  call to it, and everything under it, is a function already read and is skipped (as are
  module bodies run by an import, and frames outside pdd_plan, which are transparent: a
  pdd_plan callback a library calls is followed from the pdd_plan frame that called the library);
* the walk is the sequence of modules the reader is in, entering each followed call and coming
  back to the caller's module when it returns;
* a **stay** is a maximal run of that sequence in one module; a **return** is a stay in a module
  the walk had already left (the reader goes back to a file read before): coming back from a
  callee into its caller counts, as does a call into a module read earlier;
* an **upcall** is a call into a module further up the walk's stack than its caller (A calls
  B, which calls back into A): the part of the returns that reads upward.

A walk that reads downward (stages below each other, base types below the drivers) has few
returns. Printed: the totals, then the modules with the most stays.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

PACKAGE = "pdd_plan"


@dataclass(frozen=True)
class Walk:
    """The modules the reader is in, in order (consecutive repeats kept: `stays` merges them)."""

    steps: tuple[str, ...]
    upcalls: int = 0  # calls into a module further up the walk's stack than the caller

    @property
    def stays(self) -> tuple[str, ...]:
        out: list[str] = []
        for m in self.steps:
            if not out or out[-1] != m:
                out.append(m)
        return tuple(out)

    @property
    def returns(self) -> int:
        """Stays in a module the walk had already left."""
        seen: set[str] = set()
        n = 0
        for m in self.stays:
            n += m in seen
            seen.add(m)
        return n

    @property
    def modules(self) -> int:
        return len(set(self.steps))


class Tracer:
    """A `sys.setprofile` hook that records the first-visit walk over PACKAGE's modules."""

    def __init__(self, package: str = PACKAGE) -> None:
        self.package = package
        self.read: set[CodeType] = set()
        self.steps: list[str] = []
        self.upcalls = 0
        # per live frame: (module it is in, or None when transparent, whether it is skipped)
        self.frames: dict[int, tuple[str | None, bool]] = {}

    def _module(self, frame: FrameType) -> str | None:
        name = frame.f_globals.get("__name__", "")
        if name == self.package or name.startswith(self.package + "."):
            return str(name)
        return None

    def _stack(self, frame: FrameType | None) -> list[str]:
        """The modules of the followed frames above `frame`, innermost first."""
        out = []
        while frame is not None:
            got = self.frames.get(id(frame))
            if got is not None and got[0] is not None:
                out.append(got[0])
            frame = frame.f_back
        return out

    def _context(self, frame: FrameType | None) -> tuple[str | None, bool]:
        """The innermost pdd_plan module above `frame` in the walk, and whether it is skipped."""
        while frame is not None:
            got = self.frames.get(id(frame))
            if got is not None and (got[0] is not None or got[1]):
                return got
            frame = frame.f_back
        return None, False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self._call(frame)
        elif event == "return":
            self._return(frame)

    def _call(self, frame: FrameType) -> None:
        outer, skipped = self._context(frame.f_back)
        mod = self._module(frame)
        if skipped:
            self.frames[id(frame)] = (None, True)
        elif mod is None:
            self.frames[id(frame)] = (None, False)
        elif frame.f_code.co_name == "<module>" or frame.f_code in self.read:
            self.frames[id(frame)] = (None, True)  # an import's body, or a function read before
        else:
            self.read.add(frame.f_code)
            above = self._stack(frame.f_back)
            self.upcalls += bool(above) and mod != above[0] and mod in above[1:]
            self.frames[id(frame)] = (mod, False)
            self.steps.append(mod)

    def _return(self, frame: FrameType) -> None:
        mod, skipped = self.frames.pop(id(frame), (None, True))
        if mod is None or skipped:
            return
        outer, _ = self._context(frame.f_back)
        if outer is not None:
            self.steps.append(outer)


def trace(
    fn: Any, *args: Any, packages: tuple[str, ...] = (PACKAGE,), **kw: Any
) -> tuple[Any, list[Walk]]:
    """Run fn(*args, **kw) under one tracer per package (the same run): its result and the walks."""
    tracers = [Tracer(p) for p in packages]

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        for t in tracers:
            t(frame, event, arg)

    sys.setprofile(hook)
    try:
        out = fn(*args, **kw)
    finally:
        sys.setprofile(None)
    return out, [Walk(tuple(t.steps), t.upcalls) for t in tracers]


def report(walk: Walk, label: str, top: int) -> str:
    stays = Counter(walk.stays)
    lines = [
        f"{label}: **{len(walk.stays)} stays in {walk.modules} modules, "
        f"{walk.returns} returns to a module already left**, {walk.upcalls} of them calls "
        f"back up into a module still on the stack ({len(walk.steps)} steps)",
        "",
        "| module | stays |",
        "|---|---:|",
    ]
    for mod, n in sorted(stays.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        lines.append(f"| `{mod}` | {n} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--scenario", default="pdd-paper")
    ap.add_argument("--verify", action="store_true", help="replay each plan too")
    ap.add_argument("--top", type=int, default=12, help="modules listed (most stays first)")
    args = ap.parse_args(argv)
    from pdd_plan import api

    ctx = api.build_context(args.scenario)
    pkgs = (PACKAGE, "pdd_plan.optimize")
    _, walks = trace(api.optimize, ctx, verify=args.verify, packages=pkgs)
    call = f"`api.optimize(ctx, verify={args.verify})` on `{args.scenario}`"
    for pkg, walk in zip(pkgs, walks, strict=True):
        print(report(walk, f"{call}, the modules of `{pkg}`", args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
