"""How the optimizer scales, and whether the fleet MILP agrees with brute force.

Run: python -m benchmarks.optimizer_scale [--repeat N] [--seeds N] [--skip-dinkelbach]

Prints markdown tables:
1. `optimize(ctx, verify=False)` on the bundled default scenario and on
   benchmarks/scenarios/large.yaml: wall time per architecture (solve + summary) and in total,
   MILPs solved, the objective (minimum $/hour at the scenario's rate) and BCR. Targets: default
   <= 2 s, large <= 30 s in total.
2. The Dinkelbach path (best goodput per dollar, the rate free) on the default scenario with
   `workload.rate_rps` removed: iterations, optimality gap, MILPs, wall time. Target: <= 3 s
   per architecture.
3. Brute force (`benchmarks.oracles.bruteforce`: every integer decision, an independent LP for
   the rest) against the MILP on seeded random small tables and on every combination the
   planner enumerates for a tiny llama-3.1-8b scenario: time and agreement.
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import time
from pathlib import Path

import yaml

from benchmarks.oracles import bruteforce
from pdd_plan.common.errors import InfeasibleError, InputError
from pdd_plan.inputs.context import Context, build_context
from pdd_plan.inputs.profiles import example_path
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import milp, optimize, problem_of, solve_architecture, summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search import fixed_rate
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.workload.classes import build_classes

ROOT = Path(__file__).resolve().parents[1]
LARGE = ROOT / "benchmarks" / "scenarios" / "large.yaml"
TARGET_S = {"default": 2.0, "large": 30.0}
DINKELBACH_TARGET_S = 3.0  # per architecture, default scenario with the rate free


def _ctx(d: dict, file: str = "") -> Context:
    return build_context(Scenario.model_validate(d), file)


def _shape(ctx: Context, n_classes: int) -> str:
    sc = ctx.scenario
    gpus = {g for d in sc.datacenters for g in d.gpus}
    skus = len(sc.link.candidates) if sc.link else 0
    return (
        f"{len(gpus)} GPU types, {len(sc.datacenters)} DCs, {sc.search.parallelisms} sizes, "
        f"{skus} SKUs, {n_classes} classes"
    )


def scale_rows(name: str, d: dict, file: str, repeat: int) -> list[str]:
    ctx = _ctx(d, file)
    cls = build_classes(ctx.class_spec)
    rate = ctx.scenario.workload.rate_rps
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    per: dict[str, list[float]] = {a: [] for a in ctx.scenario.architectures}
    info: dict[str, tuple[int, str, str]] = {}
    for _ in range(repeat):
        for a in ctx.scenario.architectures:
            t0 = time.perf_counter()
            try:
                p = solve_architecture(problem_of(ctx), a, cls, rate, caps)
                s = summary.summarize(p, cls, p.rate, ctx.prefill_dc)
                info[a] = (p.milps, f"{s.cost_per_hour:,.2f}", f"{s.bcr:,.1f}")
            except InfeasibleError:
                info[a] = (0, "infeasible", "-")
            per[a].append(time.perf_counter() - t0)
    totals = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        plan = optimize(_ctx(d, file), verify=False).dump()  # classes built inside, as the CLI does
        totals.append(time.perf_counter() - t0)
    milps = sum(p["solver"]["milps"] for p in plan["plans"].values())
    rows = []
    shape = _shape(ctx, len(cls))
    for a, ts in per.items():
        m, cost, bcr = info[a]
        rows.append(
            f"| {name} | {shape} | {a} | {statistics.median(ts):.2f} | {m} | {cost} | {bcr} | |"
        )
    tot = statistics.median(totals)
    ok = "met" if tot <= TARGET_S[name] else "MISSED"
    rows.append(
        f"| {name} | {shape} | **total** (optimize, verify=False) | **{tot:.2f}** | {milps} | "
        f"| | <= {TARGET_S[name]:g} s: {ok} |"
    )
    return rows


def dinkelbach_rows(d: dict) -> list[str]:
    d = copy.deepcopy(d)
    d["workload"].pop("rate_rps", None)
    d["objective"] = "bcr"
    ctx = _ctx(d)
    t0 = time.perf_counter()
    try:
        plan = optimize(ctx, verify=False, timings=True).dump()  # seconds only with timings
    except InputError as e:  # search.time_limit_s ran out: a row, not a crash of the harness
        took = time.perf_counter() - t0
        return [f"| default, rate free | all | {e.problem[:90]} | | | {took:.2f} | | | | |"]
    total = time.perf_counter() - t0
    rows = []
    for a, p in plan["plans"].items():
        s = p["solver"]
        ok = "met" if s["seconds"] <= DINKELBACH_TARGET_S else "MISSED"
        rows.append(
            f"| default, rate free | {a} | {s.get('dinkelbach_iterations', '-')} | "
            f"{s['optimality_gap']:.2e} | {s['milps']} | {s['seconds']:.2f} | "
            f"{p['goodput_rps']:.2f} | {p['cost_per_hour']:,.2f} | {p['bcr']:,.1f} | "
            f"<= {DINKELBACH_TARGET_S:g} s: {ok} |"
        )
    for a, why in plan["infeasible"].items():
        msg = why["reasons"][0]["message"][:60]
        rows.append(f"| default, rate free | {a} | infeasible: {msg} | | | | | | | |")
    rows.append(f"| default, rate free | **total** | | | | **{total:.2f}** | | | | |")
    return rows


def _tiny() -> dict:
    """benchmarks/scenarios/tiny.yaml (the same case tests/unit/optimize/test_optimizer.py checks)."""
    return yaml.safe_load((Path(__file__).parent / "scenarios" / "tiny.yaml").read_text())


def _cheap_relay() -> dict:
    """The tiny case with relay decode far cheaper per token than main decode, long outputs and
    a tight TTFT (the case where the planner's old bound skipped the optimum)."""
    d = _tiny()
    d["prices"] = {"h100": 0.05, "h200": 10.0}
    d["datacenters"] = [
        {"name": "dc-a", "gpus": {"h100": 64}},
        {"name": "dc-b", "gpus": {"h200": 64}},
    ]
    d["link"] = {"candidates": ["eth-100g"], "max_lines": 2}
    d["workload"]["rate_rps"] = 60
    d["workload"]["output_tokens"]["lognormal"]["mu"] = 6.5
    d["sla"] = {"ttft_p90_s": 0.3, "ttft_p99_s": 0.6, "tpot_ms": 10}
    d["policy"] = {"singular_max_output_tokens": 100000}
    d["architectures"] = ["pdd"]
    return d


def _compare(t) -> tuple[float, float, bool | None, float | None]:
    """(oracle s, MILP s, whether they agree: None where the table is past the oracle's
    enumeration limit, the oracle's cost)."""
    t0 = time.perf_counter()
    try:
        ref = bruteforce.solve(t)
    except ValueError:  # past max_combos: no reference to compare with
        return time.perf_counter() - t0, 0.0, None, None
    tb = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = milp.solve(t)
    tm = time.perf_counter() - t0
    if ref is None or sol is None:
        agree = ref is None and sol is None
    else:
        agree = abs(ref.cost - sol.cost_per_hour) <= 1e-6 * max(1.0, abs(ref.cost))
    return tb, tm, agree, (ref.cost if ref is not None else None)


def brute_rows(seeds: int) -> list[str]:
    rows = []
    tb_all = tm_all = 0.0
    n_ok = n_feas = 0
    for s in range(seeds):
        t = bruteforce.random_tables(s)
        tb, tm, agree, cost = _compare(t)
        tb_all, tm_all = tb_all + tb, tm_all + tm
        n_ok += agree
        n_feas += cost is not None
    rows.append(
        f"| random tables, seeds 0-{seeds - 1} (2-4 classes, 1-2 MD, 0-2 RLD, 1-3 lines) | "
        f"{seeds} ({n_feas} feasible) | {tb_all:.2f} | {tm_all:.2f} | {n_ok}/{seeds} |"
    )
    # every combination the planner enumerates for the tiny real scenarios, bound switched off
    for label, d in (("tiny llama-3.1-8b", _tiny()), ("tiny, cheap relay decode", _cheap_relay())):
        rows += _combination_rows(label, d)
    return rows


def _combination_rows(label: str, d: dict) -> list[str]:
    rows = []
    ctx = _ctx(d)
    cls = build_classes(ctx.class_spec)
    rate = float(d["workload"]["rate_rps"])
    real_solve, real_lb = milp.solve, fixed_rate.decode_lb_per_rps
    for a in ctx.scenario.architectures:
        seen = []

        def spy(t, *args, _seen=seen, **kw):
            _seen.append(t)
            return real_solve(t, *args, **kw)

        milp.solve = spy
        fixed_rate.decode_lb_per_rps = lambda *x, **k: float("-inf")
        try:
            plan_architecture(problem_of(ctx), a, cls, rate, Caps())
        except InfeasibleError:
            pass
        finally:
            milp.solve, fixed_rate.decode_lb_per_rps = real_solve, real_lb
        t0 = time.perf_counter()
        try:
            best = plan_architecture(problem_of(ctx), a, cls, rate, Caps()).cost_per_hour
        except InfeasibleError:
            best = None
        t_plan = time.perf_counter() - t0
        tb_all = tm_all = 0.0
        n_ok = n_feas = n_past = 0
        costs = []
        for t in seen:
            tb, tm, agree, cost = _compare(t)
            tb_all, tm_all = tb_all + tb, tm_all + tm
            n_past += agree is None
            n_ok += bool(agree)
            if cost is not None:
                n_feas += 1
                costs.append(cost)
        lo = min(costs) if costs else None
        same = (best is None and lo is None) or (
            best is not None and lo is not None and abs(best - lo) <= 1e-6 * lo
        )
        plan_txt = f"${best:,.2f}/h" if best is not None else "infeasible"
        past = f" ({n_past} past the oracle's {2_000_000:,} combinations)" if n_past else ""
        rows.append(
            f"| {label}, {a}: every combination | {len(seen)} ({n_feas} feasible) | "
            f"{tb_all:.2f} | {tm_all:.2f} | {n_ok}/{len(seen) - n_past}{past}; planner "
            f"{plan_txt} in {t_plan:.2f} s, {'equals' if same else 'DIFFERS FROM'} the "
            "brute-force minimum |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="runs per scenario (median kept)")
    ap.add_argument("--seeds", type=int, default=40, help="random tables for brute force")
    ap.add_argument("--skip-dinkelbach", action="store_true")
    a = ap.parse_args()
    default = yaml.safe_load(Path(example_path()).read_text())
    large = yaml.safe_load(LARGE.read_text())
    print(
        f"machine: {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}\n"
    )
    print("### Scale (`optimize(ctx, verify=False)`, median of", a.repeat, "runs)\n")
    print("| scenario | shape | architecture | wall s | MILPs | cost $/h | BCR | target |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for r in scale_rows("default", default, str(example_path()), a.repeat):
        print(r)
    for r in scale_rows("large", large, str(LARGE), max(1, a.repeat // 2)):
        print(r)
    if not a.skip_dinkelbach:
        print("\n### Dinkelbach (objective bcr, `workload.rate_rps` removed)\n")
        print(
            "| scenario | architecture | iterations | gap | MILPs | wall s | goodput req/s "
            "| cost $/h | BCR | target |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in dinkelbach_rows(default):
            print(r)
    print("\n### Brute force vs the MILP (cost objective, fixed rate)\n")
    print("| case | tables | brute force s | MILP s | agree |")
    print("|---|---:|---:|---:|---|")
    for r in brute_rows(a.seeds):
        print(r)


if __name__ == "__main__":
    main()
