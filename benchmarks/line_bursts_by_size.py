"""What bursty arrivals do to each transfer size on the line (issue 13, narrow-line at cv 2).

Usage: ``python -m benchmarks.line_bursts_by_size [--scenario narrow-line] [--cv 2] [--rate R]
[--n 100000]``

A diagnostic, not a test: it plans PDD for the scenario as tests/unit/latency/test_kv_transfer_law.py does,
replays it, and measures on the transfers the line received (the first 5% dropped as warm-up):

* the line: its load, the time-average work and the work arrivals find (fluid, at the usable
  rate), the number in system an arrival finds, against the GI/G/1 wait law
  (:func:`gig1.gi_g1_wait`: ``E[W]``, ``P(W = 0)``) with Gamma gaps of the measured and of
  QNA's gap SCV;
* per size decile: ``P(N = 0)`` and ``E[N]`` at arrival (N the transfers on the line), the work
  found, ``P(no delay)``, the mean delay beyond the bare transfer and its ratio to the size (the
  number of transfers it shared with), the arrivals during its stay; and the plan's law's mean
  delay at those sizes;
* the KV-transfer P50/P90/P99/mean, analytic against the replay.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import yaml

from benchmarks import line_input_stream as stream
from pdd_plan.inputs.context import build_context, load_scenario  # noqa: E402
from pdd_plan.latency.prefill import gig1  # noqa: E402
from pdd_plan.optimize import (
    problem_of,
    summary,  # noqa: E402
)
from pdd_plan.optimize.caps import Caps  # noqa: E402
from pdd_plan.optimize.search.objectives import solve_architecture  # noqa: E402
from pdd_plan.sim import replay  # noqa: E402
from pdd_plan.sim.run import run  # noqa: E402
from pdd_plan.workload.classes import build_classes  # noqa: E402


def _plan_and_replay(a: argparse.Namespace):
    data = stream.scenario_data(a.scenario, a.rate, a.cv)
    replay.run_line = stream._spy("line", replay.run_line)
    replay._prefill = stream._spy("prefill", replay._prefill)
    with TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "s.yaml")
        Path(path).write_text(yaml.safe_dump(data))
        ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(problem_of(ctx), "pdd", cls, ctx.scenario.workload.rate_rps, caps)
    s = summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, s, "pdd", a.n)
    return raw, cls, s, res


def _line(raw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ready times, bytes, ends) of the transfers the replay's line received, warm-up dropped."""
    li = stream._SEEN["line"][0][0]
    st, en, sent, _, _ = stream._SEEN["line"][1]
    pf = stream._SEEN["prefill"][1]
    order = np.asarray(li.rid)[~np.isnan(st[li.rid])]
    order = order[len(order) // 20 :]
    return pf.ready[order], sent[order], en[order]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="narrow-line")
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--cv", type=float, default=2.0)
    ap.add_argument("--n", type=int, default=100_000)
    a = ap.parse_args(argv)
    raw, cls, s, res = _plan_and_replay(a)
    line, pool = raw.line, raw.pool
    r, x, e = _line(raw)
    usable = line.usable_bytes_s
    tau = x / usable
    delay = e - r - x / min(line.capacity_bytes_s, line.flow_cap_bytes_s)
    na = np.arange(len(r)) - np.searchsorted(np.sort(e), r, side="right")  # on the line
    during = np.searchsorted(r, e, side="left") - np.arange(len(r)) - 1
    found, avg = stream._fluid_found(r, x, usable)
    found = found / usable
    m = float((tau * tau).mean() / (2 * tau.mean()))
    lam = (len(r) - 1) / float(r[-1] - r[0])
    gap_scv = stream._scv(np.diff(r))
    print(
        f"{a.scenario} cv {a.cv:g}: line load {lam * tau.mean():.3f} (plan {raw.line_rho:.3f}), "
        f"E[tau] {tau.mean():.3f} s, m {m:.3f} s; gap SCV {gap_scv:.3f} "
        f"(QNA {pool.departure_ca2:.3f})"
    )
    print(
        f"replay: time-average work {avg / usable:.3f} s, found {found.mean():.3f} s, "
        f"P(found idle) {np.mean(found == 0):.3f}, E[N found] {na.mean():.3f}"
    )
    w = np.ones_like(tau) / len(tau)
    for ca2 in (gap_scv, pool.departure_ca2):
        law = gig1.gi_g1_wait(tau, w, lam, ca2)
        print(
            f"  GI/G/1 wait law, Gamma gaps SCV {ca2:.3f}: E[W] {law.mean:.3f} s, "
            f"P(W = 0) {1 - law.wait_probability:.3f}"
        )
    ft, _ = summary._mixture(raw, cls, summary._shares(raw, raw.rate))
    o = np.argsort(ft.line_bytes)
    law_d = np.interp(x, ft.line_bytes[o], ft.line_wait("p_md")[o])
    dec = np.minimum((np.argsort(np.argsort(x)) * 10) // len(x), 9)
    print("decile tau s | P(N=0) E[N] | found s | P(no delay) delay s delay/tau | during | law s")
    for b in range(10):
        k = dec == b
        print(
            f"{b:6d} {tau[k].mean():5.3f} | {np.mean(na[k] == 0):.3f} {na[k].mean():5.2f} | "
            f"{found[k].mean():7.3f} | {np.mean(delay[k] < 1e-6):11.3f} {delay[k].mean():7.3f} "
            f"{delay[k].mean() / tau[k].mean():9.2f} | {during[k].mean():6.2f} | "
            f"{law_d[k].mean():5.3f}"
        )
    print(stream.kv_comparison(s, res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
