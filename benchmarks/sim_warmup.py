"""How much of a 20,000-request replay's gap to steady state is its empty start, and how much is
plain window-to-window variance; and what the warm-up truncation (one-sided MSER-5) does.

Usage: ``python -m benchmarks.sim_warmup [--util 0.9] [--cv 1] [--seeds 16] [--arch pdd]``

The default scenario's plan is made (``optimize``), then replayed with its rate scaled so the
prefill pool runs ``--util`` busy (the plan's fleet fixed). Compared, as a fraction of the
steady-state reference (two replays of 400,000 requests, the first 20,000 of each dropped):

* ``from empty``: ``--seeds`` replays of 20,000 requests, each started empty (what
  ``optimize``'s verification replays), all requests;
* ``from empty, kept``: the same replays past their MSER-5 warm-up (what ``summary`` reports);
* ``steady windows``: 20,000-request windows from the middle of the long replays (no empty
  start: their gap is the window-to-window variance and the small-window bias alone);
* ``steady, kept``: the same windows with the rule applied (a rule that cuts steady state
  shows here).

``from empty`` minus ``steady windows`` is the transient; ``sd`` is one window's spread. Also
run for an M/M/1 queue (Lindley's recursion, exact stationary law) started empty and started
in its stationary law, with plain and one-sided MSER-5.
"""

from __future__ import annotations

import argparse

import numpy as np

from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema import Scenario
from pdd_plan.inputs.schema.io import read_yaml
from pdd_plan.optimize import optimize
from pdd_plan.sim.run import run
from pdd_plan.sim.warmup import BATCH, mser, truncate

W = 20_000
LONG = 400_000
NAMES = ("TTFT P50", "P90", "P99", "TPOT P90", "prefill wait P99")


def _stats(res, lo: int = 0, hi: int | None = None) -> np.ndarray:
    t = res.ttft_s[lo:hi]
    pw = (res.prefill_start_s - res.arrival_s)[lo:hi]
    return np.r_[
        np.percentile(t, (50, 90, 99)),
        np.nanpercentile(res.tpot_s[lo:hi], 90),
        np.percentile(pw, 99),
    ]


def _cut(res, lo: int = 0, hi: int | None = None) -> int:
    return truncate([res.ttft_s[lo:hi], res.tpot_s[lo:hi]]).requests


def _row(label: str, a: list, ref: np.ndarray, cuts: list[int] | None = None) -> str:
    a = np.asarray(a)
    rel = a.mean(axis=0) / ref - 1
    se = a.std(axis=0, ddof=1) / np.sqrt(len(a)) / ref
    sd = a.std(axis=0, ddof=1) / ref
    cells = " | ".join(f"{r:+.1%} ± {s:.1%} (sd {d:.0%})" for r, s, d in zip(rel, se, sd))
    cut = f" | {int(np.median(cuts)):,}" if cuts is not None else " | -"
    return f"| {label} (n={len(a)}) | {cells}{cut} |"


def replay_table(arch: str, util: float, cv: float, seeds: int) -> None:
    path = str(profiles.example_path())
    d = read_yaml(path)
    d["workload"]["arrival_cv"] = cv
    ctx = build_context(Scenario.model_validate(d), path)
    p = optimize(ctx).arch(arch)
    p = p.model_copy(update={"goodput_rps": p.goodput_rps * util / p.prefill_utilization})
    refs, steady, steady_kept, steady_cuts = [], [], [], []
    for s in (1, 2):
        long = run(ctx, p, arch, LONG, 1000 + s)
        refs.append(_stats(long, W))
        for i in range(2 * W, LONG, W):
            steady.append(_stats(long, i, i + W))
            c = _cut(long, i, i + W)
            steady_cuts.append(c)
            steady_kept.append(_stats(long, i + c, i + W))
    ref = np.mean(refs, axis=0)
    empty, kept, cuts = [], [], []
    for s in range(seeds):
        res = run(ctx, p, arch, W, 2000 + s)
        empty.append(_stats(res))
        cuts.append(res.warmup_requests)
        kept.append(_stats(res, res.warmup_requests))
    busy = long.summary()["utilization"]["prefill"]
    print(
        f"\n{arch}, arrival cv {cv:g}, {p.goodput_rps:.2f} req/s (prefill {busy:.1%} busy); "
        f"reference: 2 x {LONG:,} (they differ by "
        + ", ".join(f"{n} {x:+.1%}" for n, x in zip(NAMES, refs[0] / refs[1] - 1))
        + ")\n"
    )
    print("| replay | " + " | ".join(NAMES) + " | median cut |")
    print("|---" * (len(NAMES) + 2) + "|")
    print(_row("20k from empty", empty, ref))
    print(_row("20k from empty, kept", kept, ref, cuts))
    print(_row("20k steady windows", steady, ref))
    print(_row("20k steady, kept", steady_kept, ref, steady_cuts))


def _mm1(n: int, rho: float, seed: int, w0: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = rng.exponential(1.0, n)
    a = rng.exponential(1.0 / rho, n)
    walk = np.concatenate([[w0], w0 + np.cumsum(s[:-1] - a[1:])])
    return walk - np.minimum(0.0, np.minimum.accumulate(walk)) + s


def _plain_mser(x: np.ndarray) -> int:
    k = x.size // BATCH
    z = x[: k * BATCH].reshape(k, BATCH).mean(axis=1)
    z = z - z.mean()
    h = k // 2
    s1 = np.cumsum(z[::-1])[::-1][: h + 1]
    s2 = np.cumsum((z * z)[::-1])[::-1][: h + 1]
    m = np.arange(k, k - h - 1, -1, dtype=float)
    return int(np.argmin(np.maximum(s2 - s1 * s1 / m, 0) / (m * m))) * BATCH


def mm1_table(seeds: int = 60) -> None:
    print("\nM/M/1 sojourn, 20,000 customers; P90 / P99 against the exact stationary law\n")
    print("| rho | from empty | stationary start | empty, plain MSER-5 | empty, one-sided |")
    print("|---|---|---|---|---|")
    for rho in (0.9, 0.95, 0.97):
        exact = np.log([10.0, 100.0]) / (1 - rho)
        rows: dict[str, list] = {k: [] for k in ("empty", "stat", "plain", "one")}
        for s in range(seeds):
            t = _mm1(W, rho, s)
            rows["empty"].append(np.percentile(t, (90, 99)))
            rows["plain"].append(np.percentile(t[_plain_mser(t) :], (90, 99)))
            rows["one"].append(np.percentile(t[mser(t).requests :], (90, 99)))
            rng = np.random.default_rng(10_000 + s)
            w0 = rng.exponential(1 / (1 - rho)) if rng.random() < rho else 0.0
            rows["stat"].append(np.percentile(_mm1(W, rho, s, w0), (90, 99)))
        cells = [
            " / ".join(f"{x:+.1%}" for x in np.mean(v, axis=0) / exact - 1) for v in rows.values()
        ]
        print(f"| {rho} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--util", type=float, default=0.9)
    ap.add_argument("--cv", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--arch", default="pdd")
    ap.add_argument("--no-mm1", action="store_true")
    a = ap.parse_args(argv)
    replay_table(a.arch, a.util, a.cv, a.seeds)
    if not a.no_mm1:
        mm1_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
