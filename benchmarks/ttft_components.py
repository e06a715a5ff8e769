"""The plan's TTFT against a replay's, component by component (issue 13, the microbenchmark).

Usage: ``python -m benchmarks.ttft_components [--scenario wan-microbench] [--rate R]
[--cv CV] [--n 100000]`` (rate and arrival CV default to the scenario's; the microbenchmark's
40 req/s case: ``--rate 40``)

A diagnostic, not a test: it plans PDD for the scenario as tests/unit/latency/test_kv_transfer_law.py does,
replays it (the warm-up left out) and prints, as P50/P90/P99 (s):

* the prefill wait: the plan's law (:attr:`prefill_pool.PrefillPool.wait_law`), the same law on the
  replay's own service draws at its own arrival rate, and the replay's (with P(wait) and the
  conditional wait's mean and SCV);
* the prefill, the KV transfer and the first decode step (KV at main decode -> first token,
  of the requests sent there directly): the plan's (its strata's service, ``kv_transfer_s``,
  its operating step, the step its TPOT reports) and the replay's;
* TTFT: the plan's, the replay's, the replay's with its own waits shuffled (what independence
  of the wait and the rest costs), and the replay's rest plus waits drawn from the plan's law.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import yaml

from benchmarks import line_input_stream as stream
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.latency import ttft as ttft_law
from pdd_plan.latency.prefill.gigc import ggc_wait_law
from pdd_plan.latency.prefill.wait import WaitLaw
from pdd_plan.optimize import problem_of, summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.objectives import solve_architecture
from pdd_plan.sim.queues import P_MD
from pdd_plan.sim.run import run
from pdd_plan.workload.classes import build_classes

QS = (0.5, 0.9, 0.99)


def _pct(x: np.ndarray) -> str:
    x = x[~np.isnan(x)]
    return " / ".join(f"{float(np.percentile(x, 100 * q)):.4f}" for q in QS)


def _law(law: WaitLaw) -> str:
    return " / ".join(f"{law.quantile(q):.4f}" for q in QS)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="wan-microbench")
    ap.add_argument("--rate", type=float, default=None, help="req/s (default: the scenario's)")
    ap.add_argument("--cv", type=float, default=None, help="arrival CV (default: the scenario's)")
    ap.add_argument("--n", type=int, default=100_000)
    a = ap.parse_args(argv)
    data = stream.scenario_data(a.scenario, a.rate, a.cv)
    with TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "s.yaml")
        Path(path).write_text(yaml.safe_dump(data))
        ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    raw = solve_architecture(
        problem_of(ctx),
        "pdd",
        cls,
        ctx.scenario.workload.rate_rps,
        Caps(decode=ctx.scenario.search.decode_utilization),
    )
    s = summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, s, "pdd", a.n)
    k = res.kept()
    pool = raw.pool
    wait = (res.prefill_start_s - res.arrival_s)[k]
    svc = res.prefill_s[k]
    arr = res.arrival_s[k]
    seen = (len(arr) - 1) / float(arr[-1] - arr[0])
    law = pool.wait_law  # one instance: the exact GI/G/1 law; a pool: Tijms' expansion
    es = float(np.dot(pool.weight, pool.service_s))
    print(f"{a.scenario} at {raw.rate:g} req/s: {pool.count} prefill instances, rho {pool.rho:.4f}")
    print(f"  service E[S]: plan {es:.5f} s, replay {svc.mean():.5f} s")
    print(
        f"  wait  plan        {_law(law)}  P(wait) {law.wait_probability:.3f}  mean {law.mean:.4f}"
    )
    if pool.count > 1:
        own = ggc_wait_law(pool.count, seen, svc, np.ones_like(svc), pool.ca2)
        print(f"  wait  law, replay {_law(own)}  (its service draws, {seen:.3f} req/s)")
    w = wait[wait > 1e-9]
    print(
        f"  wait  replay      {_pct(wait)}  P(wait) {len(w) / len(wait):.3f}  mean "
        f"{wait.mean():.4f}  conditional SCV {w.var() / w.mean() ** 2:.2f}"
    )
    mix = ttft_law.mixture_quantiles(pool.service_s, pool.weight, QS)
    print(f"  prefill plan {' / '.join(f'{x:.4f}' for x in mix)}  replay {_pct(svc)}")
    kv = s.kv_transfer_s
    print(
        f"  KV     plan {kv.p50:.4f} / {kv.p90:.4f} / {kv.p99:.4f}  replay "
        f"{_pct(res.kv_transfer_s[k])}"
    )
    direct = res.route[k] == P_MD  # relayed requests make their first token on relay decode
    first = (res.dec.first_s - res.kv_at_decode_s)[k][direct]
    print(f"  first step plan {s.tpot_ms.p50 / 1e3:.4f}  replay mean {np.nanmean(first):.4f}")
    ttft = res.ttft_s[k]
    rest = ttft - wait
    rng = np.random.default_rng(1)
    drawn = np.array([law.quantile(u) for u in rng.random(len(rest))])
    t = s.ttft_s
    print(f"  TTFT plan {t.p50:.4f} / {t.p90:.4f} / {t.p99:.4f}  replay {_pct(ttft)}")
    print(f"  TTFT replay, its waits shuffled {_pct(rest + rng.permutation(wait))}")
    print(f"  TTFT replay's rest + the plan's wait law {_pct(rest + drawn)}")


if __name__ == "__main__":
    main(sys.argv[1:])
