"""Trace reading at scale: write a 1M-request generic JSONL trace, read it back, summarise.

Usage: ``python -m benchmarks.trace_scale [--n 1000000] [--no-tracemalloc]``

Prints the wall time of each step and the memory: the process's peak resident set
(``ru_maxrss``) before and after reading, and, in a second read under ``tracemalloc``
(slower), the peak of Python/numpy allocations made while reading.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from pdd_plan.workload.stats import trace_stats
from pdd_plan.workload.synthetic import synthetic_requests, write_generic_jsonl
from pdd_plan.workload.traces import read_trace


def _maxrss_mib() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024  # bytes on macOS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="requests (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-tracemalloc", action="store_true", help="skip the traced second read")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    reqs = synthetic_requests(
        args.n,
        rate_rps=50.0,
        input_median=4000,
        input_sigma=1.0,
        input_max=128_000,
        output_median=300,
        output_sigma=0.8,
        output_max=4000,
        hit_histogram=[[0.0, 0.2, 0.45], [0.2, 0.8, 0.2], [0.8, 1.0, 0.35]],
        arrival_cv=2.0,
        seed=args.seed,
    )
    t_gen = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="pdd_trace_scale_") as d:
        path = Path(d) / "synthetic_1m.jsonl"
        t0 = time.perf_counter()
        write_generic_jsonl(reqs, path)
        t_write = time.perf_counter() - t0
        size_mib = path.stat().st_size / 2**20
        del reqs

        rss_before = _maxrss_mib()
        t0 = time.perf_counter()
        back, info = read_trace(path)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        st = trace_stats(back)
        t_stats = time.perf_counter() - t0
        rss_after = _maxrss_mib()
        del back

        traced_peak = None
        if not args.no_tracemalloc:
            tracemalloc.start()
            again, _ = read_trace(path)
            trace_stats(again)
            traced_peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            del again

    print(f"requests            {info.rows:,} ({info.format}, {size_mib:.1f} MiB file)")
    print(f"generate            {t_gen:6.2f} s")
    print(f"write (atomic)      {t_write:6.2f} s")
    print(f"read_trace          {t_read:6.2f} s  ({info.rows / t_read / 1e3:,.0f}k rows/s)")
    print(f"trace_stats         {t_stats:6.2f} s")
    print(f"peak RSS            {rss_before:6.1f} MiB before read, {rss_after:6.1f} MiB after")
    if traced_peak is not None:
        print(f"tracemalloc peak    {traced_peak:6.1f} MiB during read + stats")
    tw = st["token_weighted_hit_rate"]
    print(
        f"stats               rate {st['rate_rps']} req/s, input p50 {st['input_tokens']['p50']}, "
        f"token-weighted hit {tw}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
