"""Where sweep points run: a process pool, threads, this process, or a Dask cluster.

Any `concurrent.futures.Executor` works; `dask://HOST:PORT` is `distributed.Client(...)`'s
executor. Results come back in item order whatever order they finish in, so a sweep's output
does not depend on the executor.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from typing import Any

from pdd_plan.common.errors import InputError

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


CONNECT_TIMEOUT_S = 10.0  # the whole connect: probe, handshake and Client start-up
_HANDSHAKE_MAX_BYTES = 1 << 20  # a Dask handshake is a small dict (under a kilobyte)
_DASK_PORT = 8786


def _no_scheduler(addr: str, problem: str) -> InputError:
    return InputError(
        None,
        "--executor",
        f"{addr}: {problem}",
        "start one (dask scheduler; dask worker HOST:PORT) or check the address",
    )


def _host_port(addr: str) -> tuple[str, int]:
    rest = addr[len("tcp://") :].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or "]" in port:  # no port (or only an IPv6 literal): Dask's default
        host, port = rest, str(_DASK_PORT)
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise _no_scheduler(addr, f"port '{port}' is not a number") from None


def probe_dask(addr: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Check that a Dask scheduler answers at tcp:// `addr` before distributed connects.

    A Dask listener speaks first: its handshake, framed by an 8-byte length (distributed
    comm/tcp.py, TCP.read). distributed trusts that length and allocates it, and waits for a
    handshake without end, so a server that answers garbage (an HTTP or SSH server) or
    nothing made it hang (> 600 s) or die allocating exabytes. Here a silent server fails
    after `timeout_s` and an implausible length at once, both as one-line errors."""

    host, port = _host_port(addr)
    end = time.monotonic() + timeout_s
    head = b""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            while len(head) < 8:
                sock.settimeout(max(end - time.monotonic(), 1e-3))
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    raise _no_scheduler(addr, "closed the connection without a Dask handshake")
                head += chunk
    except TimeoutError:
        raise _no_scheduler(addr, f"no Dask handshake within {timeout_s:g} s") from None
    except OSError as e:
        raise _no_scheduler(addr, f"cannot connect: {type(e).__name__}: {e}") from None
    (n,) = struct.unpack("Q", head)  # native order, as distributed packs it
    if not 0 < n <= _HANDSHAKE_MAX_BYTES:
        raise _no_scheduler(
            addr, f"answers, but not as a Dask scheduler (its first message claims {n:,} bytes)"
        )


def _client_within(addr: str, timeout_s: float) -> Any:
    """distributed.Client(addr), or an InputError once `timeout_s` has passed: the start-up
    runs in a daemon thread, so a scheduler that stalls mid-handshake cannot hold the run."""

    from distributed import Client  # dask: optional, only for the dask executor

    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = Client(addr, timeout=f"{timeout_s:g}s", set_as_default=False)
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=connect, name="pdd-plan-dask-connect", daemon=True)
    t.start()
    t.join(timeout_s + 2.0)  # Client's own timeout first; this bounds what it does not cover
    if "client" in box:
        return box["client"]
    e = box.get("error")
    if e is None:
        raise _no_scheduler(addr, f"no Dask scheduler answered within {timeout_s:g} s")
    if isinstance(e, OSError | TimeoutError | ValueError | MemoryError):
        raise _no_scheduler(addr, f"cannot reach it: {type(e).__name__}: {e}".rstrip(": "))
    raise e


def _dask_executor(spec: str) -> tuple[Any, Executor]:
    try:
        import distributed  # noqa: F401  # dask: optional, only for the dask executor
    except ImportError:
        raise InputError(
            None,
            "--executor",
            "Dask's distributed is not installed",
            "pip install 'pdd-plan[dask]' (or pip install 'dask[distributed]')",
        ) from None
    addr = dask_address(spec)
    if addr.startswith("tcp://"):
        probe_dask(addr)
    client = _client_within(addr, CONNECT_TIMEOUT_S)
    return client, client.get_executor(pure=False)


def _mp_context() -> Any:

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
