"""The simulator's engines against queueing closed forms (the figures behind tests/test_sim_queues).

Usage: ``python -m benchmarks.sim_closed_forms [--n 2000000] [--seed 11]``

* prefill FIFO (Lindley, vectorized): M/M/1 and M/D/1 mean wait;
* prefill least-loaded heap, 2 servers: M/M/2 mean wait (Erlang C);
* line, processor sharing (huge pool, no flow cap, no RTT): M/G/1-PS mean response time
  E[T | x] = x / (C (1 - rho)), exponential sizes, overall and in the top size decile;
* decode, fluid continuous batching with step(B) = B c: the same PS law in tokens.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from pdd_plan.sim.decode.decoder import DecodeInputs, Engine, run_decode
from pdd_plan.sim.queues import LineInputs, fifo_least_loaded, lindley_wait, run_line


class _Steps:
    def __init__(self, by_batch: list[float]):
        self.cols = [by_batch]
        self.bmax = len(by_batch) - 1

    def __call__(self, b: int, ctx: float) -> float:
        return self.cols[0][min(b, self.bmax)]


def _erlang_c_wait(c: int, lam: float, mu: float) -> float:
    a = lam / mu
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top) / (c * mu - lam)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="customers for the FIFO checks")
    ap.add_argument("--n-events", type=int, default=600_000, help="jobs for the event engines")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []

    def add(name: str, rho: float, sim: float, theory: float, secs: float) -> None:
        rows.append((name, rho, sim, theory, sim / theory - 1, secs))

    for rho in (0.5, 0.7, 0.9):
        n = args.n
        a = np.cumsum(rng.exponential(1 / rho, n))
        t = time.perf_counter()
        w = lindley_wait(a, rng.exponential(1.0, n)).mean()
        add("M/M/1 wait (Lindley)", rho, w, rho / (1 - rho), time.perf_counter() - t)
        t = time.perf_counter()
        w = lindley_wait(a, np.ones(n)).mean()
        add("M/D/1 wait (Lindley)", rho, w, rho / (2 * (1 - rho)), time.perf_counter() - t)
        m = args.n_events
        a2 = np.cumsum(rng.exponential(1 / (2 * rho), m))
        t = time.perf_counter()
        st, _ = fifo_least_loaded(a2, [rng.exponential(1.0, m)], [2])
        add(
            "M/M/2 wait (least-loaded)",
            rho,
            float((st - a2).mean()),
            _erlang_c_wait(2, 2 * rho, 1.0),
            time.perf_counter() - t,
        )
        x = rng.exponential(1.0, m)
        a3 = np.cumsum(rng.exponential(1 / (2 * rho), m))
        t = time.perf_counter()
        _, end, *_ = run_line(LineInputs(a3, np.arange(m), x, 2.0, math.inf, 10**9, 0.0))
        secs = time.perf_counter() - t
        resp = end - a3
        add("M/G/1-PS line E[T]", rho, resp.mean(), x.mean() / (2 * (1 - rho)), secs)
        big = x >= np.quantile(x, 0.9)
        add("  top size decile", rho, resp[big].mean(), x[big].mean() / (2 * (1 - rho)), 0.0)
        small = x <= np.quantile(x, 0.25)
        add("  bottom size quartile", rho, resp[small].mean(), x[small].mean() / (2 * (1 - rho)), 0)
        c = 0.001
        out = rng.exponential(100.0, m).astype(np.int64) + 1
        a4 = np.cumsum(rng.exponential(out.mean() * c / rho, m))
        z = np.zeros(m)
        eng = Engine(_Steps([c * max(b, 1) for b in range(4001)]), 4000, 1e30)
        t = time.perf_counter()
        d = run_decode(
            DecodeInputs(
                np.zeros(m, np.int8), a4, a4, out, z + 1, z + 1, z, z, [eng], [], None, 1, False
            )
        )
        secs = time.perf_counter() - t
        add("decode PS E[T]", rho, (d.end_s - a4).mean(), out.mean() * c / (1 - rho), secs)
    print(f"{'check':<28}{'load':>6}{'simulated':>12}{'closed form':>13}{'error':>9}{'secs':>7}")
    for name, rho, sim, th, err, secs in rows:
        print(f"{name:<28}{rho:>6.1f}{sim:>12.4f}{th:>13.4f}{err * 100:>8.2f}%{secs:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
