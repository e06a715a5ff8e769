"""`perf --phase serve` against the step-level replay of the same load (sim/serve_replay.py).

Usage: ``python -m benchmarks.serve_vs_replay``

The grid of tests/integration/test_serve_vs_replay.py (two instances, SGLang's and vLLM's
schedulers, three length mixes, concurrency 1 / 16 / 48, 6 C prompts), plus cases outside the
test's bar: fixed lengths at concurrency 64 under vLLM (prompt groups that drift), and open
loops at a finite rate (three seeds of 800 prompts), and the finite open loops and long fixed
prompts of the same test file (their output tokens/s as the replay's run length over the
analytic's), and SGLang polling for requests every R decode steps (--scheduler-recv-interval
10 and 30, the grid's random lengths at concurrency 4 / 16 / 48). Errors: analytic / replay - 1.
"""

from __future__ import annotations

import itertools

import numpy as np

from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.serve import Load, serve
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.perf.serve_step import StepCost
from pdd_plan.sim.serve_replay import replay
from tests.integration import test_serve_vs_replay as grid


def _row(label: str, a, reps) -> tuple[str, float, float, float]:
    thr = np.mean([r.output_tokens_per_s for r in reps])
    tpot = np.mean([np.mean(r.tpot_s) for r in reps])
    p90 = np.mean([np.percentile(r.ttft_s, 90) for r in reps])
    errs = (a.output_tokens_per_s / thr - 1, a.tpot_s.mean / tpot - 1, a.ttft_s.p90 / p90 - 1)
    print(f"| {label} | {errs[0]:+.1%} | {errs[1]:+.1%} | {errs[2]:+.1%} |")
    return (label, *errs)


def main() -> None:
    print("| case | output tok/s | mean TPOT | P90 TTFT |\n|---|---|---|---|")
    worst = np.zeros(3)
    for kind, eng_name, lengths, c in itertools.product(
        sorted(grid.INSTANCES), ["sglang", "vllm"], grid.LENGTHS, grid.CONCURRENCY
    ):
        e = grid._errors(kind, eng_name, lengths, c)
        worst = np.maximum(worst, np.abs(e))
        print(f"| {kind} {eng_name} {lengths} C={c} | {e[0]:+.1%} | {e[1]:+.1%} | {e[2]:+.1%} |")
    print(f"\ngrid worst |error|: throughput {worst[0]:.1%}, TPOT {worst[1]:.1%}, "
          f"P90 TTFT {worst[2]:.1%}\n")  # fmt: skip
    inst = grid._inst("dense")
    print("| outside the bar | output tok/s | mean TPOT | P90 TTFT |\n|---|---|---|---|")
    eng = serve_engine("vllm", 80)
    isl, osl = sl.fixed(512), sl.fixed(1024)
    a = serve(inst, eng, Load(isl, osl, concurrency=64, num_prompts=256))
    _row("dense vllm fixed 512/1024 C=64", a, [replay(inst, eng, isl, osl, 256, 64, seed=1)])
    for name, rate in itertools.product(["sglang", "vllm"], [4.0, 12.0]):
        eng = serve_engine(name, 80)
        cost = StepCost(inst, eng)
        isl, osl = sl.sglang_random(1024, 0.8), sl.sglang_random(256, 0.8)
        a = serve(inst, eng, Load(isl, osl, rate=rate, num_prompts=800), cost=cost)
        reps = [replay(inst, eng, isl, osl, 800, rate=rate, seed=s, cost=cost) for s in (1, 2, 3)]
        _row(f"dense {name} open loop {rate:g}/s", a, reps)
    print(
        "\n| the tests' finite open loops and long prompts | output tok/s | mean TPOT | mean TTFT |"
    )
    print("|---|---|---|---|")
    for name, rate in grid.OPEN:  # 160 prompts, U[1, 1024] / U[1, 512], three seeds
        eng = serve_engine(name, 80)
        cost = StepCost(inst, eng)
        isl, osl = sl.sglang_random(1024, 0.0), sl.sglang_random(512, 0.0)
        a = serve(inst, eng, Load(isl, osl, rate=rate, num_prompts=160), cost=cost)
        reps = [replay(inst, eng, isl, osl, 160, rate=rate, seed=s, cost=cost) for s in (1, 2, 3)]
        _mean_row(f"dense {name} {rate:g}/s, 160 prompts", a, reps)
    for name, (i, o, c, n) in itertools.product(["sglang", "vllm"], grid.LONG):
        eng = serve_engine(name, 80)
        cost = StepCost(inst, eng)
        isl, osl = sl.fixed(i), sl.fixed(o)
        a = serve(inst, eng, Load(isl, osl, concurrency=c, num_prompts=n), cost=cost)
        reps = [replay(inst, eng, isl, osl, n, c, seed=7, cost=cost)]
        _mean_row(f"dense {name} fixed {i}/{o} C={c}, {n} prompts", a, reps)
    _recv_rows()


def _recv_rows() -> None:
    """SGLang's --scheduler-recv-interval R: the requests sent between two polls share one
    prefill batch and wait for the poll (the test file's recv test: 1024/256 at 16 and 48)."""
    print("\n| SGLang, poll every R decode steps | output tok/s | mean TPOT | P90 TTFT |")
    print("|---|---|---|---|")
    lengths = [x for x in grid.LENGTHS if x[2] is not None]  # fixed lengths: waves, no effect
    for kind, (i, o, ratio), c, r in itertools.product(
        sorted(grid.INSTANCES), lengths, [4, 16, 48], [10, 30]
    ):
        inst = grid._inst(kind)
        eng = serve_engine("sglang", inst.gpu.memory.hbm_gb).with_limits(recv_interval=r)
        cost = StepCost(inst, eng)
        isl, osl = sl.drawn(i, ratio, "sglang"), sl.drawn(o, ratio, "sglang")
        n = 6 * c
        a = serve(inst, eng, Load(isl, osl, concurrency=c, num_prompts=n), cost=cost)
        reps = [replay(inst, eng, isl, osl, n, c, seed=7, cost=cost)]
        _row(f"{kind} ({i}, {o}, {ratio}) C={c} R={r}", a, reps)


def _mean_row(label: str, a, reps) -> None:
    """Errors on the run's length (tokens/s at the replay's drawn totals) and the means."""
    dur = np.mean([r.duration_s for r in reps])
    tpot = np.mean([np.mean(r.tpot_s) for r in reps])
    ttft = np.mean([np.mean(r.ttft_s) for r in reps])
    errs = (dur / a.duration_s - 1, a.tpot_s.mean / tpot - 1, a.ttft_s.mean / ttft - 1)
    print(f"| {label} | {errs[0]:+.1%} | {errs[1]:+.1%} | {errs[2]:+.1%} |")


if __name__ == "__main__":
    main()
