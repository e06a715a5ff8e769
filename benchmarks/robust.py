"""Robust plans out of sample: a Q = 0.9 plan, planned over N independent draws, replayed in
the simulator under M fresh independent draws (another seed: not the ones it was planned on).

Run: python -m benchmarks.robust [--scenario FILE] [--q 0.9] [--draws 64] [--fresh 100]
     [--sim-requests 4000] [--arch pdd,cdc_pd,idc_pd]

Default scenario: benchmarks/scenarios/robust-check.yaml (the default scenario with a perf
band of an engine measured on the deployment, sigma 8%, and twice the H100s and four times
the H200s: with the shipped MoE band, whose median draw is 19% slower than the model, or with
the default's GPUs, the decode pools at the TPOT target do not fit and there is no robust
fleet). Prints, per
architecture: the nominal and robust $/hour, the share of the N design draws the robust fleet
meets, the share of the M fresh draws it meets by the analytic check and in the simulator
(with a one-sided 95% Clopper-Pearson lower bound), the seconds spent, and which drawn inputs
the simulator could not take (uncertainty/replay.py).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from scipy import stats

from pdd_plan.evaluate import fleet
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from pdd_plan.uncertainty import block, paired, perturb, replay, robust
from pdd_plan.workload.classes import build_classes

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "robust-check.yaml"
FRESH_SEED_OFFSET = 1_000_003  # the fresh draws' seed: far from the design draws'


def lower_bound(k: int, n: int, conf: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower bound on a share from k of n."""
    return 0.0 if k == 0 else float(stats.beta.ppf(1 - conf, k, n - k + 1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default=str(SCENARIO))
    ap.add_argument("--q", type=float, default=0.9)
    ap.add_argument("--draws", type=int, default=64)
    ap.add_argument("--fresh", type=int, default=100)
    ap.add_argument("--sim-requests", type=int, default=4000)
    ap.add_argument("--arch", default="")
    a = ap.parse_args()
    ctx = build_context(load_scenario(a.scenario), a.scenario)
    cls = build_classes(ctx.class_spec)
    t0 = time.perf_counter()
    plan = optimize(ctx, verify=False)
    t_plan = time.perf_counter() - t0
    design, _, u = block.make_draws(ctx, block.Options(draws=a.draws, iid=True))
    t0 = time.perf_counter()
    found = robust.robust_plans(ctx, plan, cls, design, a.q)
    t_robust = time.perf_counter() - t0
    fresh, _, _ = block.make_draws(
        ctx, block.Options(draws=a.fresh, seed=u.seed + FRESH_SEED_OFFSET, iid=True)
    )
    archs = [x for x in (a.arch.split(",") if a.arch else plan.plans) if x in found]
    print(f"scenario {ctx.scenario.name}; Q = {a.q}; {len(design)} design draws, "
          f"{len(fresh)} fresh; {a.sim_requests} requests per replay; "
          f"nominal plans {t_plan:.1f} s, robust plans {t_robust:.1f} s; "
          f"{platform.machine()} {platform.python_version()}")  # fmt: skip
    print()
    print("| arch | nominal $/h | robust $/h | design met | fresh met, analytic | "
          "fresh met, simulator | 95% lower bound | partial | s |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for arch in archs:
        r = found[arch]
        if r.plan is None:
            print(f"| {arch} | {r.nominal_cost_per_hour:,.1f} | none | {r.met}/{len(design)} "
                  f"| - | - | - | - | - |  ({r.why})")  # fmt: skip
            continue
        t0 = time.perf_counter()
        fs = fleet.from_plan(ctx, robust._one(ctx, arch, r.plan), "robust")[arch]
        an = sim = 0
        partial = False
        rate = float(r.plan.goodput_rps)
        for i in range(len(fresh)):
            v = fresh.draw(i)
            ap = perturb.apply(paired.pb_of(ctx), cls, v)
            an += robust.meets(ap, fs, rate * v.get("rate", 1.0))
            rep = replay.replay(ctx, cls, r.plan, arch, v, a.sim_requests, i)
            sim += rep.sla_met
            partial = partial or rep.partial
        n = len(fresh)
        print(f"| {arch} | {r.nominal_cost_per_hour:,.1f} | {r.plan.cost_per_hour:,.1f} | "
              f"{r.met}/{len(design)} | {an}/{n} | {sim}/{n} | {lower_bound(sim, n):.2f} | "
              f"{'yes' if partial else 'no'} | {time.perf_counter() - t0:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
