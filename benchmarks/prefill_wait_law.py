"""The prefill pool's wait law (pdd_plan.latency.prefill) against long prefill-only replays.

Usage: ``python -m benchmarks.prefill_wait_law [--n 4000000] [--seeds 0 1 2 3]``

The default scenario's PDD prefill pool (tests/law_fleets.py DEFAULT_PDD: 6 x 16 H100, chunked
prefill of a 64K context after a skewed prefix hit) at several loads. Each row replays ``--n``
Poisson requests per seed through the simulator's own prefill stage (``sim.queues.
fifo_least_loaded`` on ``sim.timings.PrefillTimes`` of requests drawn as ``sim.setup.requests``
draws them; the first 10% dropped as warm-up) and reads the wait's mean and P50/P90/P99, pooled
over the seeds (the range over seeds beside it). The loads are set by the replay's own service
law (the mean over a 4M-request draw), so "rho" is the load the replay runs at. Three laws:

* ``law``: the pool's law as the planner builds it (its request classes' strata, from a Latin
  hypercube draw of the scenario's distributions);
* ``law, iid classes``: the same (strata timed by the two-point rule) from classes of an
  independent 20k draw, as the planner drew them before (seed 0's mean service is 0.4-0.5%
  high, which 97% busy turns into +13-20% of wait; the law before both fixes, strata also timed
  at their mean request, is stored in results/prefill_wait_law_before.json);
* ``law, exact mix``: the same law (Tijms' expansion, :mod:`pdd_plan.latency.prefill.gigc`) fed
  the service law of the distribution the replay draws from (4,096 quantile points of a 4M
  draw, each at its conditional mean): what is left is the queue approximation's own error.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.latency.prefill.pool import PrefillPool, prefill_strata_service_s
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.perf import grid
from pdd_plan.sim import setup as sim_setup
from pdd_plan.sim.queues import fifo_least_loaded
from pdd_plan.sim.timings import PrefillTimes
from pdd_plan.workload.classes import build_classes, classes_of, scenario_requests
from pdd_plan.workload.distributions import sample_requests
from pdd_plan.workload.requests import Requests
from tests.law_fleets import DEFAULT_PDD, Case, scenario

QS = (0.5, 0.9, 0.99)


def _pool_inputs(tmp: Path):
    c = Case("default_pdd", "pdd", 40.0, DEFAULT_PDD, {}, "shared-25g")
    path = scenario(tmp, c)
    ctx = build_context(load_scenario(path), path)
    ctx, fleets = fleet.from_scenario(ctx)
    cls = build_classes(ctx.class_spec)
    fm = analytic.fleet_model(problem_of(ctx), fleets[c.arch], cls, Caps(decode=1.0))
    spec = ctx.class_spec
    w = spec.workload
    r = sample_requests(w, w.samples, spec.seed, w.rate_rps or 1.0)
    md = spec.policy.md_hit_ratio
    iid = classes_of(
        spec, Requests(r.arrival_s, r.input_tokens, r.output_tokens, r.hit_p, r.hit_p * md)
    )
    chunk = ctx.replay_setup.prefill_chunk_tokens
    iid_law = (
        prefill_strata_service_s(fm.pinst, iid, chunk),
        iid.fine.weight / iid.fine.weight.sum(),
    )
    members = scenario_requests(spec)  # the Latin hypercube draw the classes are built from
    return ctx.replay_setup, fm, cls, iid_law, float(np.mean(_exact_s(fm.pinst, members, chunk)))


def _exact_s(inst, r, chunk: int) -> np.ndarray:
    """The roofline's prefill seconds of each request (perf.grid, no table interpolation)."""
    inp = np.asarray(r.input_tokens, dtype=float)
    cached = np.floor(inp * np.nan_to_num(np.asarray(r.hit_p, dtype=float), nan=0.0))
    return grid.prefill_times(inst, np.maximum(inp - cached, 1.0), cached, chunk)


def _quadrature_mean(rs, inst, points: int = 20_000) -> float | None:
    """E[S] by quadrature over the hit-rate histogram (midpoints, ``points`` per bin), for a
    fixed input length (the default's); None otherwise."""
    w = rs.workload
    if w.input_tokens.fixed is None or w.prefix_hit.histogram is None:
        return None
    b = np.asarray(w.prefix_hit.histogram, dtype=float)
    u = (np.arange(points) + 0.5) / points
    hit = np.concatenate([lo + (hi - lo) * u for lo, hi, _ in b])
    wt = np.repeat(b[:, 2] / b[:, 2].sum() / points, points)
    inp = float(w.input_tokens.fixed)
    cached = np.floor(inp * hit)
    s = grid.prefill_times(inst, np.maximum(inp - cached, 1.0), cached, rs.prefill_chunk_tokens)
    return float(np.dot(wt, s))


def _slopes(x: np.ndarray) -> list[float]:
    """The wait's local decay rates, d(-ln P(W > t)) / dt, between its P50, P90, P99, P99.9."""
    qs = np.array([0.5, 0.9, 0.99, 0.999])
    t = np.quantile(x, qs)
    return list(np.diff(-np.log(1 - qs)) / np.diff(t))


def _services(rs, fm, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Arrival times (at 1 req/s) and prefill service seconds of ``n`` requests, as a replay
    draws them."""
    r = sim_setup.requests(rs, n, seed, 1.0).req
    inp = r.input_tokens.astype(float)
    cached = np.floor(inp * np.nan_to_num(r.hit_p, nan=0.0))
    new = np.maximum(inp - cached, 1.0)
    return r.arrival_s, PrefillTimes(fm.pinst, rs.prefill_chunk_tokens)(new, cached)


def _quantile_law(s: np.ndarray, points: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """``s`` as ``points`` equal-count bins, each at its conditional mean (the mean is exact)."""
    s = np.sort(s)
    parts = np.array_split(s, points)
    return np.array([p.mean() for p in parts]), np.array([len(p) for p in parts], float)


def _law_row(law) -> list[float]:
    return [law.mean, *(law.quantile(q) for q in QS)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4_000_000, help="requests per replay")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--rho", type=float, nargs="+", default=[0.80, 0.90, 0.95, 0.97])
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        rs, fm, cls, (iid_s, iid_w), es_members = _pool_inputs(Path(d))
    c = fm.n_prefill
    _, big = _services(rs, fm, 4_000_000, 99)
    es = float(big.mean())
    xs, xw = _quantile_law(big)
    w = cls.fine.weight / cls.fine.weight.sum()
    es_law = float(np.dot(w, fm.strata_service))
    print(
        f"prefill pool: {c} instances; E[S] {es * 1e3:.2f} ms (replay's mix), "
        f"{es_law * 1e3:.2f} ms (planner's strata, {es_law / es - 1:+.2%})"
    )
    exact = _quadrature_mean(rs, fm.pinst)
    if exact is not None:
        ck = float(rs.prefill_chunk_tokens)
        at = grid.prefill_times(fm.pinst, np.array([ck, ck + 1]), np.array([0.0, 0.0]), int(ck))
        print(
            f"E[S] exact (quadrature of the hit histogram, roofline times) {exact * 1e3:.3f} ms; "
            f"the classes' Latin hypercube members {es_members * 1e3:.3f} ms "
            f"({es_members / exact - 1:+.3%}); their strata, two-point rule "
            f"{es_law * 1e3:.3f} ms ({es_law / exact - 1:+.3%}); the replay's mix "
            f"{es * 1e3:.3f} ms ({es / exact - 1:+.3%}). Prefill time steps up "
            f"{(at[1] - at[0]) * 1e3:.1f} ms where one more chunk pass starts ({ck:.0f} -> "
            f"{ck + 1:.0f} uncached tokens)"
        )
    print()
    print(
        "rho   what               mean     P50     P90     P99   (s; replays: min-max over seeds)"
    )
    draws = {s: _services(rs, fm, args.n, s) for s in args.seeds}
    for rho in args.rho:
        rate = rho * c / es
        t0 = time.perf_counter()
        waits, per = [], []
        for a1, svc in draws.values():
            a = a1 / rate
            start, _ = fifo_least_loaded(a, [svc], [c])
            wt = (start - a)[len(a) // 10 :]
            waits.append(wt)
            per.append([wt.mean(), *np.quantile(wt, QS)])
        pooled = np.concatenate(waits)
        sim = [pooled.mean(), *np.quantile(pooled, QS)]
        lo, hi = np.min(per, axis=0), np.max(per, axis=0)
        planner = _law_row(PrefillPool(fm.pinst, c, fm.strata_service, rate, w, 1.0).wait_law)
        iid = _law_row(PrefillPool(fm.pinst, c, iid_s, rate, iid_w, 1.0).wait_law)
        exact = _law_row(PrefillPool(fm.pinst, c, xs, rate, xw / xw.sum(), 1.0).wait_law)
        print(f"{rho:.2f}  replay           " + " ".join(f"{v:7.3f}" for v in sim))
        print("      seeds range      " + " ".join(f"{a:.2f}-{b:.2f}" for a, b in zip(lo, hi)))
        delta = getattr(PrefillPool(fm.pinst, c, xs, rate, xw / xw.sum(), 1.0).wait_law, "delta", 0)
        print(
            "      local decay /s   "
            + " ".join(f"{v:.3f}" for v in _slopes(pooled))
            + f"  (P50-P90, P90-P99, P99-P99.9; the law's exact asymptotic rate {delta:.3f})"
        )
        for name, law in (("law", planner), ("law, iid classes", iid), ("law, exact mix", exact)):
            err = " ".join(f"{v / s - 1:+6.1%}" for v, s in zip(law, sim))
            print(f"      {name:<16} " + " ".join(f"{v:7.3f}" for v in law) + "   err " + err)
        print(f"      ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
