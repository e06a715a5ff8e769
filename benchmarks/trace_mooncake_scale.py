"""`pdd-plan trace stats` on a 1M-line Mooncake trace with prefix-block hash ids.

Usage: ``python -m benchmarks.trace_mooncake_scale [--n 1000000] [--keep PATH]``

Writes a Mooncake JSONL trace like the published conversation trace (sessions that share
a growing prefix: each turn repeats its session's earlier blocks and adds new ones; 512-token
blocks, ~4K-token prompts, so ~8 hash ids per line), then times the command end to end in
a fresh process (reading, prefix-cache simulation with infinite caches, statistics). The
file is written to a temporary folder and removed (``--keep`` writes it there instead):
big inputs are generated, never committed.

Reading compiles two numba kernels on the first run after an install or an edit (a few
seconds, cached on disk after that): the script first runs the command once on the trace's
first 100 lines and prints that time apart, so the timed runs measure reading, not compiling.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BLOCK = 512


def write_trace(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    sessions = max(n // 8, 1)
    session = rng.integers(0, sessions, n)
    gaps = rng.exponential(20.0, n)  # ms between arrivals: 50 req/s
    t = np.cumsum(gaps).astype(np.int64)
    new_tokens = np.clip(rng.lognormal(np.log(1500), 0.8, n), 16, 60_000).astype(np.int64)
    out = np.clip(rng.lognormal(np.log(300), 0.8, n), 1, 4000).astype(np.int64)
    prefix_blocks: dict[int, list[int]] = {}
    next_id = 0
    with path.open("w", encoding="utf-8") as f:
        for k in range(n):
            s = int(session[k])
            ids = prefix_blocks.get(s, [])
            add = -(-int(new_tokens[k]) // BLOCK)
            ids = ids[:64] + list(range(next_id, next_id + add))  # bounded session context
            next_id += add
            prefix_blocks[s] = ids
            inp = len(ids) * BLOCK - int(rng.integers(0, BLOCK))
            rec = {
                "timestamp": int(t[k]),
                "input_length": max(inp, 1),
                "output_length": int(out[k]),
                "hash_ids": ids,
            }
            f.write(json.dumps(rec) + "\n")


def _children_cpu() -> float:
    """CPU seconds (user + system) of finished child processes: steadier than wall time on
    a shared machine."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="requests (default 1,000,000)")
    ap.add_argument("--keep", type=Path, help="write the trace here and keep it")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs of the command")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pdd_mooncake_scale_") as d:
        path = args.keep or Path(d) / "mooncake_1m.jsonl"
        if not path.exists():
            t0 = time.perf_counter()
            write_trace(path, args.n)
            print(f"write               {time.perf_counter() - t0:6.2f} s")
        size_mib = path.stat().st_size / 2**20
        print(f"trace               {args.n:,} lines, {size_mib:.1f} MiB")
        cmd = [sys.executable, "-c", "from pdd_plan.cli import main; main()", "trace", "stats"]
        small = Path(d) / "first_100.jsonl"
        with path.open("rb") as f:
            small.write_bytes(b"".join(f.readline() for _ in range(100)))
        t0 = time.perf_counter()
        subprocess.run([*cmd, str(small)], capture_output=True, check=True)
        print(f"first 100 lines     {time.perf_counter() - t0:6.2f} s (compiles on a first run)")
        cmd += [str(path), "-f", "json"]
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            cpu0 = _children_cpu()
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
            wall = time.perf_counter() - t0
            cpu = _children_cpu() - cpu0
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return r.returncode
            s = json.loads(r.stdout)
            print(
                f"trace stats         {wall:6.2f} s wall, {cpu:6.2f} s CPU (process start "
                "included); "
                f"{s['requests']:,} requests, token-weighted hit {s['token_weighted_hit_rate']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
