"""Whole-process speed of the commands people wait for: medians of fresh `pdd-plan` processes.

Run: python -m benchmarks.speed [--repeat N] [--only NAME,...] [--out FILE.md]

Each case starts a new Python process running the `pdd-plan` entry point (what the console
script runs: `from pdd_plan.cli import main; main()`) and times it from start to exit, start-up
and imports included; the table shows the median and the fastest of `--repeat` runs, the median CPU
seconds (user + system, the process and the children it waits for: not the pool workers a
forkserver starts, so none for regimes) and the 1-minute load average when the
runs started (on a shared box a load over its core count stretches the wall times; the CPU
seconds much less). Cases (issue 24's targets):

* optimize: the default scenario with verification, plain (`--draws 0`, the targets' case)
  and with the uncertainty block it prints by default; the same `--no-verify`; `narrow-line`;
  `benchmarks/scenarios/large.yaml`. Before them `pdd-plan compile` runs once, untimed (the
  install step), and each warm case runs once untimed first (bytecode written), as an
  installed user's runs after their first;
* `--help`;
* regimes: the 10 x 10 map on the default (its default axes), process executor, 2 workers;
* simulate: 1,000,000 requests of the default on its PDD plan (the plan file is written once
  before the runs, untimed);
* first optimize after install: the default right after the install step README gives,
  `pdd-plan compile`, both in an empty numba cache and bytecode folder (`NUMBA_CACHE_DIR` and
  `PYTHONPYCACHEPREFIX` pointed at a fresh folder per run, bytecode written as a user's Python
  writes it); the install step is timed apart and shown as its own row. The ratio to the warm
  median is the target's figure;
* first optimize without compile: the same with no install step and no bytecode written,
  which compiles the replay's kernels in the run (the truly cold case, kept in view).

The side-by-side with AIConfigurator runs only when asked (a separate install; ~30-75 s a
run, not in CI): install it in its own virtual environment and pass its executable,

    python -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12.0
    python -m benchmarks.speed --aic /tmp/aic/bin/aiconfigurator [--only "optimize plain"]

which times its `cli default --model-path deepseek-ai/DeepSeek-V3 --total-gpus 64 --system
h200_sxm` five times in the same run and prints its median over each optimize case's. With
`--interleave` the runs go in rounds (one AIConfigurator run, then one run of each warm case),
so that a box whose speed drifts over minutes times both in the same minutes; it also prints
each round's ratio.

(AIConfigurator 0.12's `cli default` sweeps aggregated and disaggregated serving of a model on
a GPU count; the figure to compare is whole-process wall time, five runs each, medians.)
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = (
    "import sys; sys.argv[0] = 'pdd-plan'; from pdd_plan.cli import main; main()"  # as installed
)


@dataclass
class Case:
    name: str
    args: list[str]
    target_s: float | None = None  # the bar, when it has one
    repeat: int | None = None  # fewer runs for the long cases
    fresh: bool = False  # empty numba cache and bytecode each run
    install: bool = False  # fresh: `pdd-plan compile` first (timed apart: `install_times`)
    own_cpu: bool = True  # False: its workers are the forkserver's children, not counted
    exe: list[str] | None = None  # another program (the side-by-side), not pdd-plan
    notes: str = ""
    times: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    install_times: list[float] = field(default_factory=list)
    install_cpus: list[float] = field(default_factory=list)


AIC = "AIConfigurator cli default"


def _aic_case(aic: str, scratch: Path) -> Case:
    """AIConfigurator 0.12's `cli default` (DeepSeek-V3 on 64 H200), the issue's comparison."""
    args = ["cli", "default", "--model-path", "deepseek-ai/DeepSeek-V3", "--total-gpus", "64"]
    args += ["--system", "h200_sxm", "--save-dir", str(scratch / "aic-out")]
    return Case(AIC, args, exe=[aic], repeat=5, notes="the side-by-side, same run")


def _cases(plan_file: str) -> list[Case]:
    large = str(ROOT / "benchmarks" / "scenarios" / "large.yaml")
    regimes = ["regimes", "--executor", "process", "--workers", "2", "--format", "json"]
    return [
        # the plain plan (--draws 0) is what the speed targets are set on; the uncertainty
        # block, printed by default, is to stay within 1 s of it
        Case("optimize plain", ["optimize", "--draws", "0", "--format", "json"], 1.5),
        Case(
            "optimize",
            ["optimize", "--format", "json"],
            notes="target: <= 1 s over the plain plan",
        ),
        Case(
            "--no-verify plain",
            ["optimize", "--no-verify", "--draws", "0", "--format", "json"],
            0.8,
        ),
        Case("optimize --no-verify", ["optimize", "--no-verify", "--format", "json"]),
        Case("--help", ["--help"], 0.4),
        Case("optimize narrow-line", ["optimize", "narrow-line", "--format", "json"]),
        Case("optimize large.yaml", ["optimize", large, "--format", "json"], repeat=3),
        Case("regimes 10x10", regimes, 12.0, repeat=3, own_cpu=False),
        Case(
            "simulate 1M",
            ["simulate", plan_file, "-n", "1000000", "--format", "json"],
            4.0,
            repeat=3,
        ),
        Case(
            "first optimize after install",
            ["optimize", "--format", "json"],
            None,
            repeat=2,
            fresh=True,
            install=True,
            notes="target: <= 2x the warm optimize",
        ),
        Case(
            "first optimize without compile",
            ["optimize", "--format", "json"],
            None,
            repeat=2,
            fresh=True,
        ),
    ]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for descendants: pool workers too
    return r.ru_utime + r.ru_stime


def _run(args: list[str], env: dict[str, str], exe: list[str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one process (pdd-plan's entry point, or `exe`)."""
    if exe is not None:  # not pdd-plan: the environment as given, without the repo on its path
        env = dict(os.environ)
    c, t = _cpu(), time.perf_counter()
    done = subprocess.run(
        [*(exe or [sys.executable, "-c", ENTRY]), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall, cpu = time.perf_counter() - t, _cpu() - c
    if done.returncode != 0:
        raise SystemExit(f"pdd-plan {' '.join(args)} failed: {done.stderr.strip()[-400:]}")
    return wall, cpu


def _env(fresh: bool, scratch: Path, bytecode: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if fresh:  # a fresh install: nothing compiled yet, by numba or Python
        d = Path(tempfile.mkdtemp(dir=scratch))
        env["NUMBA_CACHE_DIR"] = str(d / "numba")
        env["PYTHONPYCACHEPREFIX"] = str(d / "pyc")
    if bytecode:  # an installed user's: bytecode written once and kept (a sandbox may forbid it)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _time_once(c: Case, env: dict) -> None:
    """One timed run of `c`, with the load when it started."""
    c.loads.append(os.getloadavg()[0])
    wall, cpu = _run(c.args, env, c.exe)
    c.times.append(wall)
    c.cpus.append(cpu)


def measure(cases: list[Case], repeat: int, scratch: Path, log: Callable[[str], None]) -> None:
    if any(not c.fresh for c in cases):  # untimed: the install step README gives, done once
        _run(["compile"], _env(False, scratch))
    for c in cases:
        n = min(repeat, c.repeat) if c.repeat else repeat
        if not c.fresh:  # untimed: bytecode and numba's cache in place, as after a first run
            _run(c.args, _env(False, scratch), c.exe)
        for _ in range(max(n, 1)):
            env = _env(c.fresh, scratch, bytecode=not c.fresh or c.install)
            if c.install:  # the install step, into the same empty folders
                wall, cpu = _run(["compile"], env)
                c.install_times.append(wall)
                c.install_cpus.append(cpu)
            _time_once(c, env)
        log(f"{c.name}: median {statistics.median(c.times):.2f} s ({len(c.times)} runs)")


def measure_interleaved(
    cases: list[Case], rounds: int, scratch: Path, log: Callable[[str], None]
) -> None:
    """`rounds` rounds of one AIConfigurator run then one run of each warm case: the box's
    speed drifts over minutes (BENCHMARKS.md), so each case is timed in the same minutes as
    the run it is compared with, not in a block before it."""
    warm = sorted((c for c in cases if not c.fresh), key=lambda c: c.name != AIC)
    for c in cases:
        if c.fresh:  # a fresh install per run does not fit a round: say so, not drop it unseen
            log(f"{c.name}: not timed with --interleave (a fresh install each run)")
    _run(["compile"], _env(False, scratch))
    for c in warm:  # untimed, as measure(): caches in place, as after a first run
        _run(c.args, _env(False, scratch), c.exe)
    for i in range(rounds):
        for c in warm:  # AIConfigurator first
            _time_once(c, _env(False, scratch))
        log(f"round {i + 1}: " + ", ".join(f"{c.name} {c.times[-1]:.2f} s" for c in warm))


def table(cases: list[Case], paired: bool = False) -> str:
    """The Markdown table; `paired`: the runs were interleaved (each round's ratio too)."""
    warm = next((c for c in cases if c.name == "optimize" and c.times), None)
    rows = [
        "| case | command | runs | median s | fastest s | CPU s | load (1 min) | target | met |",
        "|---|---|---:|---:|---:|---:|---|---|---|",
    ]
    for c in cases:
        if not c.times:
            continue
        med = statistics.median(c.times)
        target, met = (
            (f"<= {c.target_s:g} s", "yes" if med <= c.target_s else "no")
            if (c.target_s is not None)
            else ("", "")
        )
        if c.fresh and warm is not None:
            ratio = med / statistics.median(warm.times)
            target, met = f"<= 2x warm ({ratio:.1f}x)", "yes" if ratio <= 2 else "no"
            if not c.install:  # the cold case, shown beside the target's: no target of its own
                target, met = f"({ratio:.1f}x warm)", ""
        args = " ".join(
            a if "/" not in a or a.startswith("deepseek") else Path(a).name for a in c.args
        )
        prog = "pdd-plan" if c.exe is None else Path(c.exe[0]).name
        loads = f"{min(c.loads):.1f}-{max(c.loads):.1f}"
        if c.install_times:
            rows.append(
                f"| install step, before {c.name} | `pdd-plan compile` | {len(c.install_times)} "
                f"| {statistics.median(c.install_times):.2f} | {min(c.install_times):.2f} "
                f"| {statistics.median(c.install_cpus):.2f} | {loads} | | |"
            )
        rows.append(
            f"| {c.name} | `{prog} {args}` | {len(c.times)} | {med:.2f} | {min(c.times):.2f} "
            f"| {f'{statistics.median(c.cpus):.2f}' if c.own_cpu else '-'} | {loads} | {target} "
            f"| {met} |"
        )
    return "\n".join(rows) + "\n" + _side_by_side(cases, paired)


def _side_by_side(cases: list[Case], paired: bool = False) -> str:
    """AIConfigurator's median over each optimize case's, from the same run (target: 50x on
    the plain verified plan)."""
    aic = next((c for c in cases if c.name == AIC and c.times), None)
    if aic is None:
        return ""
    med = statistics.median(aic.times)
    out = [
        f"{c.name}: {med / statistics.median(c.times):.1f}x"
        for c in cases
        if c.name.startswith(("optimize", "--no-verify")) and c.times
    ]
    return (
        f"\nAIConfigurator's median {med:.2f} s over: "
        + "; ".join(out)
        + " (target: 50x on optimize plain).\n"
        + (_per_round(aic, cases) if paired else "")
    )


def _per_round(aic: Case, cases: list[Case]) -> str:
    """Each round's ratio to the plain verified plan (interleaved runs, as many as
    AIConfigurator's)."""
    plain = next((c for c in cases if c.name == "optimize plain"), None)
    if plain is None or len(plain.times) != len(aic.times):
        return ""
    r = [a / p for a, p in zip(aic.times, plain.times)]
    each = ", ".join(f"{x:.1f}x" for x in r)
    return f"Per round (optimize plain): {each}; median {statistics.median(r):.1f}x.\n"


def _plan_file(scratch: Path) -> str:
    """The default scenario's plan, written once for the simulate case (untimed)."""
    out = scratch / "default-plan.yaml"
    args = ["optimize", "--no-verify", "--out", str(out), "--format", "json"]
    _run(args, _env(False, scratch))
    return str(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per case (long cases: <= 3)")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--out", type=Path, help="also write the Markdown table here")
    ap.add_argument(
        "--aic",
        help="AIConfigurator's executable (see above): time its `cli default` in the same run",
    )
    ap.add_argument(
        "--interleave",
        action="store_true",
        help="with --aic: rounds of one AIConfigurator run then one run of each warm case",
    )
    args = ap.parse_args(argv)
    if args.interleave and not args.aic:
        ap.error("--interleave compares with AIConfigurator: give --aic too")
    with tempfile.TemporaryDirectory(prefix="pdd-speed-") as tmp:
        scratch = Path(tmp)
        cases = _cases(_plan_file(scratch))
        if args.aic:
            cases.append(_aic_case(args.aic, scratch))
        if args.only:
            keep = {s.strip() for s in args.only.split(",")}
            unknown = keep - {c.name for c in cases}
            if unknown:
                ap.error(f"--only: unknown case(s) {sorted(unknown)}; see the module docstring")
            cases = [
                c
                for c in cases
                if c.name in keep
                or c.name == AIC
                or c.name == "optimize"
                and any(k.startswith("first") for k in keep)
            ]
        log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
        if args.interleave:
            measure_interleaved(cases, args.repeat, scratch, log)
        else:
            measure(cases, args.repeat, scratch, log)
    head = (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}\n\n"
    )
    text = head + table(cases, paired=args.interleave)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
