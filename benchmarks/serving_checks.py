"""Serving checks: the measurement rows that are not instance throughput, predicted with the
serving simulation (issue 12).

Usage: ``python -m benchmarks.serving_checks [--requests MIN] [--seed S] [--no-held-out]``

``data/calibration/readings.yaml`` marks each row of ``calibration_measurements.csv``
``predict`` (the perf model: ``benchmarks/accuracy.py``), ``simulate`` (a serving figure) or
``out``. For every ``simulate`` row this harness builds the scenario its reading describes
(model, GPU, engine size and count, precision from the reading; the arrivals, lengths and SLO
from ``CHECKS`` below, each with its source) and predicts the row's metric with pdd-plan's
own machinery: the perf model with the GPU's efficiency factors as shipped
(``data/calibration/<gpu>.yaml``) and the simulator (``pdd_plan.sim.run.run``) on a
one-datacenter IDC-PD fleet of the source's engines. Nothing is tuned to these rows.

* ``rate_at_slo`` (MLPerf Server): the highest Poisson rate whose replay meets the SLO
  (p99 TTFT and p99 TPOT, MLPerf's percentile), found by bisection over rate with one seed,
  for every split of the source's engines into prefill and decode engines (the tool cannot
  run one engine as both: MLPerf's engines are colocated); the prediction is the best split,
  the one a user of the tool would deploy. The figure is that rate x the mean output length.
* ``ttft_alone`` (a first-token latency at batch 1): requests so far apart that none waits
  (one per 100 s); the prediction is the replay's median TTFT. The perf model's prefill pass,
  which is the whole TTFT of a colocated engine, is printed beside it.

With held-out factors (default on) each row is predicted a second time with its GPU's factors
fitted without the row's source document (``benchmarks/accuracy.py``'s leave-one-source-out
profile), since the shipped calibration was fitted on the same documents' offline rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration import joint
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import Context
from pdd_plan.outputs.plan import InstanceGroup
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance
from pdd_plan.sim.run import run


def _sibling(name: str) -> ModuleType:
    """A module beside this file in the benchmarks package."""
    return importlib.import_module(f"benchmarks.{name}")


scen = _sibling("serving_scenarios")
Row, SLO = scen.Row, scen.SLO

ALONE_RATE_RPS = 0.01  # ttft_alone: one request per 100 s, so none waits for another
ALONE_REQUESTS = 50
# MLPerf Server runs at least 600 s (mlperf.conf *.Server.min_duration = 600000 ms): each replay
# spans that many seconds of arrivals, so an overloaded queue grows as long as it would there
WINDOW_S = 600.0
MIN_REQUESTS = 2_000


# ------------------------------------------------------------------ the rate search


@dataclass
class RateSearch:
    """The highest rate that met the SLO (None: none did), the lowest that did not (None:
    none failed), and every (rate, met) tried in order."""

    passed: float | None
    failed: float | None
    runs: list[tuple[float, bool]] = field(default_factory=list)


def max_rate(
    meets: Callable[[float], bool],
    start: float,
    rel_tol: float = 0.01,
    max_runs: int = 24,
    floor: float = 1e-6,
) -> RateSearch:
    """Bracket then bisect a monotone predicate over rate: double (or halve) from `start`
    until one rate passes and one fails, then bisect geometrically until failed / passed
    <= 1 + rel_tol. At most `max_runs` evaluations."""
    out = RateSearch(None, None)
    r = float(start)
    while len(out.runs) < max_runs:
        ok = bool(meets(r))
        out.runs.append((r, ok))
        if ok:
            out.passed = r if out.passed is None else max(out.passed, r)
        else:
            out.failed = r if out.failed is None else min(out.failed, r)
        if out.passed is None:
            r /= 2.0
            if r < floor:
                break
        elif out.failed is None:
            r *= 2.0
        elif out.failed <= out.passed * (1.0 + rel_tol):
            break
        else:
            r = math.sqrt(out.passed * out.failed)
    return out


def slo_met(summary: dict, slo: SLO) -> bool:
    """MLPerf's verdict on a replay: p99 TTFT and p99 TPOT within the limits; and, as
    `pdd-plan evaluate` rules, no rate whose prefill load reaches 100 % passes (its queue has no
    steady state: a finite replay's percentiles would only say how long it ran)."""
    ttft, tpot = summary["ttft_s"]["p99"], summary["tpot_ms"]["p99"]
    load = summary["utilization"]["prefill"]
    if load is None or load >= 1.0 or ttft is None:
        return False
    return ttft <= slo.ttft_p99_s and (tpot is None or tpot <= slo.tpot_p99_ms)


def requests_for(rate: float, min_requests: int = MIN_REQUESTS) -> int:
    """Requests in a replay at `rate`: WINDOW_S seconds of arrivals, at least `min_requests`.
    Fixed lengths draw nothing, so every rate replays a prefix of one time-scaled stream."""
    return max(int(min_requests), math.ceil(rate * WINDOW_S))


def capacity_rps(ctx: Context, r: Row, prefill: int, decode: int) -> float:
    """The perf model's bound on the rate (no queueing): prefill engines over one request's
    prefill, decode engines at the batch the TPOT limit and KV allow over the output length.
    Only the search's starting point."""
    rd = r.reading
    inst = Instance(ctx.model, ctx.gpus[rd.gpu], rd.tp or 1, tp=rd.tp or 1, ep=1)
    p = roofline.prefill_time(inst, rd.isl).total_s
    mean_ctx = rd.isl + rd.osl / 2.0
    b, _ = roofline.max_batch_for_tpot(inst, mean_ctx, ctx.scenario.sla.tpot_ms / 1e3)
    b = min(b, inst.max_batch(rd.isl + rd.osl))  # the simulator reserves the final context
    step = roofline.decode_step(inst, max(b, 1), mean_ctx).total_s
    return min(prefill / p, decode * max(b, 1) / (step * max(rd.osl, 1)))


# ------------------------------------------------------------------ the checks


def _replay(ctx: Context, gs: list[InstanceGroup], rate: float, n: int, seed: int) -> dict:
    """One replay at `rate` over WINDOW_S seconds of arrivals (at least `n` requests)."""
    return run(ctx, scen.plan(gs, rate), "idc_pd", requests_for(rate, n), seed).summary()


def rate_at_slo(ctx: Context, r: Row, n: int, seed: int) -> dict:
    """Every prefill/decode split of the row's engines: its highest rate meeting the SLO; the
    best split is the prediction (in the row's units: rate x mean output tokens)."""
    splits = []
    for k in range(1, r.engines):
        gs = scen.groups(r, k, r.engines - k)
        start = capacity_rps(ctx, r, k, r.engines - k)
        s = max_rate(lambda x, gs=gs: slo_met(_replay(ctx, gs, x, n, seed), r.check.slo), start)
        at = _replay(ctx, gs, s.passed, n, seed) if s.passed else None
        splits.append(
            {"prefill": k, "decode": r.engines - k, "bound_rps": start, "search": s, "at": at}
        )
    best = max(splits, key=lambda d: d["search"].passed or 0.0)
    rate = best["search"].passed or 0.0
    return {"predicted": rate * r.reading.osl, "rate_rps": rate, "best": best, "splits": splits}


def ttft_alone(ctx: Context, r: Row, seed: int) -> dict:
    """Median TTFT (ms) of requests that never meet another, and the parts it is made of."""
    rd = r.reading
    gs = scen.groups(r, 1, 1)
    res = run(ctx, scen.plan(gs, ALONE_RATE_RPS), "idc_pd", ALONE_REQUESTS, seed)
    inst = Instance(ctx.model, ctx.gpus[rd.gpu], rd.tp or 1, tp=rd.tp or 1, ep=1)
    med = lambda a: float(np.median(a)) * 1e3  # noqa: E731
    return {
        "predicted": med(res.ttft_s),
        "prefill_ms": med(res.prefill_s),
        "kv_move_ms": med(res.kv_transfer_s),
        "wait_ms": med(res.prefill_start_s - res.arrival_s),
        "pass_ms": roofline.prefill_time(inst, rd.isl).total_s * 1e3,
    }


def predict(r: Row, n: int, seed: int, gpu_profile=None) -> dict:
    ctx = scen.context(r, gpu_profile)
    if r.check.kind == "rate_at_slo":
        return rate_at_slo(ctx, r, n, seed)
    return ttft_alone(ctx, r, seed)


def held_out_profile(r: Row):
    """The row's GPU with factors fitted without the row's document (accuracy.py's method:
    the joint fit of the other documents' rows), and how it was made."""
    rows, _ = cal.read_rows(scen.CSV)
    train = [m for m in rows if m.document != r.document]
    analytic = {g: cal.analytic_gpu(g) for g in sorted({m.gpu for m in rows} | {r.reading.gpu})}
    jf = joint.fit_joint(train, analytic)
    fam = "moe" if profiles.model(r.reading.model).ffn.moe is not None else "dense"
    return jf.profile(analytic[r.reading.gpu]), jf.basis(r.reading.gpu, fam)


# ------------------------------------------------------------------ output


def lines(r: Row, p: dict) -> list[tuple[str, float, str]]:
    """(method, predicted, what it assumed) for one prediction: what the tool's layout is and
    how it differs from the source's."""
    rd = r.reading
    if r.check.kind == "ttft_alone":
        sim = (
            f"IDC-PD, 1 prefill + 1 decode {rd.gpu} (source: {r.check.layout}); TTFT = prefill "
            f"{p['prefill_ms']:.1f} + KV over RDMA {p['kv_move_ms']:.1f} + first decode step "
            f"{p['predicted'] - p['prefill_ms'] - p['kv_move_ms']:.1f} ms"
        )
        alone = "the perf model's prefill pass of the prompt: a colocated engine's whole TTFT"
        return [("simulate", p["predicted"], sim), ("perf prefill pass", p["pass_ms"], alone)]
    b = p["best"]
    at = b["at"] or {}
    tt, tp = at.get("ttft_s", {}), at.get("tpot_ms", {})
    text = (
        f"IDC-PD, {b['prefill']} prefill + {b['decode']} decode TP{rd.tp or 1} {rd.gpu} engines "
        f"(best of {len(p['splits'])} splits; source: {r.check.layout}); fixed {rd.isl}/{rd.osl} "
        f"tokens, Poisson, {WINDOW_S:.0f} s replays; at {p['rate_rps']:.1f} req/s: TTFT p99 "
        f"{_ms(tt.get('p99'), 1e3)}, TPOT mean {_ms(tp.get('mean'))}, p99 {_ms(tp.get('p99'))}"
    )
    return [("simulate", p["predicted"], text)]


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def _ms(x: float | None, k: float = 1.0) -> str:
    return "-" if x is None else f"{x * k:.0f} ms"


def _splits(r: Row, p: dict) -> None:
    print(f"\nRow {r.row}: every split of the {r.engines} engines (highest rate meeting the SLO)\n")
    print(
        "| prefill | decode | perf-model bound req/s | max rate req/s | tokens/s | replays "
        "| at that rate |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|")
    for s in p["splits"]:
        rate = s["search"].passed or 0.0
        at = s["at"] or {}
        util = at.get("utilization", {})
        lim = _limit(util)
        print(
            f"| {s['prefill']} | {s['decode']} | {s['bound_rps']:.1f} | {rate:.1f} | "
            f"{rate * r.reading.osl:,.0f} | {len(s['search'].runs)} | {lim} |"
        )


def _limit(util: dict) -> str:
    if not util:
        return "-"
    dec = max(util.get("decode_batch") or [0.0])
    return (
        f"prefill load {util.get('prefill') or 0:.2f}; decode mean batch {dec:.2f} of its TPOT cap"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=MIN_REQUESTS, help="fewest requests per replay")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-held-out", action="store_true", help="skip the held-out factors")
    args = ap.parse_args(argv)
    rows = scen.simulate_rows()
    print("## Serving checks: rows that are not instance throughput\n")
    print(
        "| row | metric | measured | method | GPU factors | predicted | error "
        "| what the prediction assumed |"
    )
    print("|---:|---|---:|---|---|---:|---:|---|")
    details = []
    for r in rows:
        p = predict(r, args.requests, args.seed)
        kinds = [("shipped", p)]
        if not args.no_held_out:
            prof, note = held_out_profile(r)
            kinds.append((f"held-out ({note})", predict(r, args.requests, args.seed, prof)))
        for factors, q in kinds:
            for method, pred, text in lines(r, q):
                print(
                    f"| {r.row} | {r.metric} ({r.unit}) | {r.measured:,.5g} | {method} | "
                    f"{factors} | {_num(pred)} | {pred / r.measured - 1.0:+.1%} | {text} |"
                )
        details.append((r, p))
    for r, p in details:
        if r.check.kind == "rate_at_slo":
            _splits(r, p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
