"""Where sweep points run: a process pool, threads, this process, or a Dask cluster.

Any `concurrent.futures.Executor` works; `dask://HOST:PORT` is `distributed.Client(...)`'s
executor. Results come back in item order whatever order they finish in, so a sweep's output
does not depend on the executor.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any

from ..errors import InputError

EXECUTORS = ("process", "thread", "serial", "dask://HOST:PORT")
Progress = Callable[[int, int], None]


def dask_address(spec: str) -> str:
    """`dask://HOST:PORT` -> `tcp://HOST:PORT`; `dask://SCHEME://...` -> `SCHEME://...`."""
    rest = spec[len("dask://") :]
    if not rest:
        raise InputError(
            None, "--executor", "no scheduler address after dask://", "use dask://HOST:PORT"
        )
    return rest if "://" in rest else f"tcp://{rest}"


def check_executor(spec: str) -> str:
    """`spec` if it names an executor; an InputError naming --executor otherwise."""
    if spec in ("process", "thread", "serial") or spec.startswith("dask://"):
        if spec.startswith("dask://"):
            dask_address(spec)
        return spec
    raise InputError(
        None, "--executor", f"unknown executor '{spec}'", f"use one of {', '.join(EXECUTORS)}"
    )


def _dask_executor(spec: str) -> tuple[Any, Executor]:
    try:
        from distributed import Client
    except ImportError:
        raise InputError(
            None,
            "--executor",
            "Dask's distributed is not installed",
            "pip install 'pdd-plan[dask]' (or pip install 'dask[distributed]')",
        ) from None
    addr = dask_address(spec)
    try:
        client = Client(addr, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise InputError(
            None,
            "--executor",
            f"cannot reach the Dask scheduler at {addr}: {type(e).__name__}: {e}".rstrip(": "),
            "start one (dask scheduler; dask worker HOST:PORT) or check the address",
        ) from None
    return client, client.get_executor(pure=False)


def _mp_context() -> Any:
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


@contextlib.contextmanager
def _keep_stdout() -> Iterator[None]:
    """Restore file descriptor 1 afterwards: the solver's stdout silencing (optimize/model.py)
    swaps fd 1 per solve, and concurrent solves in threads can leave it pointing at /dev/null."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no real fd 1 (e.g. a captured stdout): nothing to guard
        yield
        return
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _on_executor(
    fn: Callable[[Any], Any],
    items: Sequence,
    ex: Executor,
    progress: Progress | None,
    stop: Callable[[Any], bool],
) -> list:
    results: list = [None] * len(items)
    futs: dict[Future, int] = {ex.submit(fn, d): i for i, d in enumerate(items)}
    pending = set(futs)
    done_n = 0
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=futs.__getitem__):
                results[futs[f]] = f.result()
                done_n += 1
            if progress is not None:
                progress(done_n, len(items))
            if any(r is not None and stop(r) for r in results):
                break
    finally:
        for f in pending:
            f.cancel()
    return results


def _serial(
    fn: Callable[[Any], Any],
    items: Sequence,
    progress: Progress | None,
    stop: Callable[[Any], bool],
) -> list:
    results = []
    for i, d in enumerate(items):
        results.append(fn(d))
        if progress is not None:
            progress(i + 1, len(items))
        if stop(results[-1]):
            break
    return results


def run_all(
    fn: Callable[[Any], Any],
    items: Sequence,
    executor: str | Executor,
    workers: int | None = None,
    progress: Progress | None = None,
    stop: Callable[[Any], bool] = lambda r: False,
) -> list:
    """`fn` of every item, in item order; after a result `stop` is true of, no new ones start
    (the list is then shorter, or holds None where a point never ran).

    `fn` must pickle for process pools and Dask (a top-level function or a partial of one).
    `workers` (pools only): default min(items, CPUs); 1 runs the items in this process.
    """
    n_workers = min(len(items), workers or os.cpu_count() or 1)
    if isinstance(executor, Executor):
        return _on_executor(fn, items, executor, progress, stop)
    if executor == "serial" or (executor in ("process", "thread") and n_workers == 1):
        return _serial(fn, items, progress, stop)
    if executor.startswith("dask://"):
        client, ex = _dask_executor(executor)
        try:
            return _on_executor(fn, items, ex, progress, stop)
        finally:
            client.close()
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    if executor == "process":
        # not fork: a parent that has solved before holds HiGHS's thread pool, which a forked
        # child inherits as a spinning, threadless copy
        pool: Executor = ProcessPoolExecutor(max_workers=n_workers, mp_context=_mp_context())
    else:
        pool = ThreadPoolExecutor(max_workers=n_workers)
    try:
        with _keep_stdout() if executor == "thread" else contextlib.nullcontext():
            return _on_executor(fn, items, pool, progress, stop)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["EXECUTORS", "dask_address", "check_executor", "run_all"]
