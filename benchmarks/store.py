"""Run a harness and store the markdown it prints as its result, then re-render the documents.

Usage: ``python -m benchmarks.store NAME [ARGS...]`` runs ``python -m benchmarks.NAME ARGS``
(in this process, its stdout captured), writes ``benchmarks/results/NAME.json`` (the command,
date, machine, wall time and the printed markdown) and rewrites the blocks generated from it
(``python -m benchmarks.render``). A harness that prints progress should print it to stderr.
"""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
import time

from benchmarks import render, results


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or not argv[0].isidentifier():
        print("usage: python -m benchmarks.store NAME [ARGS...]", file=sys.stderr)
        return 2
    name, args = argv[0], argv[1:]
    data = results.stamp(" ".join(["python -m benchmarks." + name, *args]))
    out, code = io.StringIO(), 0
    t0 = time.perf_counter()
    saved = sys.argv
    sys.argv = [f"benchmarks/{name}.py", *args]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(f"benchmarks.{name}", run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
    data["wall_s"] = round(time.perf_counter() - t0, 1)
    data["exit_status"] = code
    data["output"] = out.getvalue()
    sys.stdout.write(data["output"])
    print(f"wrote {results.save(name, data)}")
    render.main([])
    return code


if __name__ == "__main__":
    sys.exit(main())
