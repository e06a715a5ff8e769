"""`pdd-plan compile`: the install step that compiles the numba kernels into numba's cache."""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path

import typer

from pdd_plan.cli.common import check_format, dumps, echo, guarded
from pdd_plan.common.errors import InputError


@guarded
def compile_cmd(
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
) -> None:
    """Compile the numba kernels into numba's cache, once after installing.

    Compiles every kernel the simulator (verification replays, `simulate`) and the trace
    readers run, and the package's bytecode (`pip install . && pdd-plan compile`, as README's
    install line), so that the first `optimize` loads the kernels instead of compiling them
    (~12 s of CPU on a 2-core box).
    Kernels already in the cache are loaded, not compiled again. Prints numba's cache folders
    (its __pycache__ beside the sources, or NUMBA_CACHE_DIR: set it the same where pdd-plan
    runs)."""
    import compileall

    from pdd_plan.sim.precompile import compile_kernels

    fmt = check_format(format)
    t0 = time.perf_counter()
    groups = compile_kernels()
    for g in groups:
        if not g.folders:
            raise InputError(
                None,
                "NUMBA_CACHE_DIR",
                f"numba found no writable cache folder for the {g.group} kernels (the package "
                "folder is read-only and so is the user's cache)",
                "set NUMBA_CACHE_DIR to a writable folder, here and where pdd-plan runs",
            )
    package = Path(__file__).resolve().parents[1]
    bytecode = not sys.dont_write_bytecode  # PYTHONDONTWRITEBYTECODE: Python writes none
    if bytecode:
        compileall.compile_dir(package, quiet=1)
    seconds = time.perf_counter() - t0
    if fmt != "table":
        data = {"kernels": [asdict(g) for g in groups], "bytecode": bytecode, "seconds": seconds}
        echo(dumps(data, fmt))
        return
    for g in groups:
        echo(
            f"{g.group}: {g.kernels} kernels ready, {g.compiled} compiled, {g.loaded} loaded "
            f"from the cache, {g.seconds:.1f} s\n"
        )
        for f in g.folders:
            echo(f"  {f}\n")
    if bytecode:
        echo(f"bytecode: {package}\n")
    else:
        echo("bytecode: not written (PYTHONDONTWRITEBYTECODE is set)\n")
    echo(f"done in {seconds:.1f} s\n")


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_cmd)
