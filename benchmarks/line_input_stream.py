"""What the prefill pool does to the line's input stream (issue 13, the capped-line KV tails).

Usage: ``python -m benchmarks.line_input_stream [--scenario pdd-paper] [--rate R] [--cv CV]
[--n 200000] [--seed 5]``

A diagnostic, not a test: it plans PDD for the scenario as tests/unit/latency/test_kv_transfer_law.py does,
replays it, and measures the transfers the line received (the first 5% dropped as warm-up):

* the stream: gap SCV (against QNA's departure SCV of the prefill pool), the correlation of a
  transfer's size with the merged gap before it and with its own prefill service (the gap its
  own prefill instance left before it);
* the line: time-average transfers in service against the Poisson-fed law at the measured
  load (:func:`queueing.limited_ps_numbers`, insensitive to the size law while the pool does
  not bind);
* control replays of the same line (:func:`sim.queues.run_line`) with the input rebuilt:
  Poisson arrivals and i.i.d. sizes; the replay's ready times with the sizes shuffled; a
  renewal stream (gaps shuffled); the (gap before, size) pairs shuffled;
* the fluid work (bytes at the line's rate) found by arrivals, big (top 10%) and the rest;
* the work's index of dispersion over windows of ``t`` seconds, ``Var[A(t)] / (lambda t
  E[x^2])`` (1 for a Poisson stream of i.i.d. sizes), against the planner's analytic curve
  (:func:`input_stream.work_dispersion`, the pool as M/M/c) and its value at the line's time
  scale ``t*`` (:func:`input_stream.dispersion_ratio`, the factor the plan's line law now takes);
* per size decile: the transfers' own prefill, the work they found on the line (beyond the
  average transfer's) against :func:`found_work.found_shift` (their instance's silence), and
  their mean delay beyond the bare transfer in the replay, a Poisson-fed control (same sizes)
  and the plan's law (its strata's delays at each transfer's size), with the share of the
  transfers over the replay's P99 that each decile holds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import yaml

from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.latency.closed_forms import limited_ps_numbers
from pdd_plan.latency.line import found_work, input_stream
from pdd_plan.latency.prefill import gig1
from pdd_plan.optimize import problem_of
from pdd_plan.optimize import summary as optimize_summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.objectives import solve_architecture
from pdd_plan.outputs.plan import ArchitecturePlan
from pdd_plan.sim import queues, replay
from pdd_plan.sim.run import run
from pdd_plan.workload.classes import build_classes

_SEEN: dict[str, object] = {}


def _spy(name: str, fn):
    """Wrap a replay stage to keep its inputs and output (the product is not changed)."""

    def wrapped(*args, **kw):
        out = fn(*args, **kw)
        _SEEN[name] = (args, out)
        return out

    return wrapped


def _scv(v: np.ndarray) -> float:
    return float(v.var() / v.mean() ** 2)


def _control(ready: np.ndarray, size: np.ndarray, line) -> tuple[float, float, list[float]]:
    """(load, time-average in service, sojourn P50/P90/P99/mean in ms) of one line replay."""
    n = len(ready)
    li = queues.LineInputs(
        ready, np.arange(n), size, line.capacity_bytes_s, line.flow_cap_bytes_s, line.pool, 0.0
    )
    st, en, *_ = queues.run_line(li)
    span = float(ready[-1] - ready[0])
    t = (en - ready) * 1e3
    rho = n / span * float(size.mean()) / line.usable_bytes_s
    pct = [float(np.percentile(t, q)) for q in (50, 90, 99)]
    return rho, float((en - st).sum()) / span, [*pct, float(t.mean())]


def _fluid_found(ready: np.ndarray, size: np.ndarray, cap: float) -> tuple[np.ndarray, float]:
    """Work (bytes) each arrival finds on a server of ``cap`` bytes/s, and its time average."""
    found = np.empty(len(ready))
    v, last = 0.0, float(ready[0])
    for k, (t, x) in enumerate(zip(ready.tolist(), size.tolist())):
        v = max(0.0, v - (t - last) * cap)
        last, found[k] = t, v
        v += x
    after = found[:-1] + size[:-1]
    tt = np.minimum(np.diff(ready), after / cap)
    area = float((after * tt - cap * tt * tt / 2.0).sum())
    return found, area / float(ready[-1] - ready[0])


def _deciles(r, x, own, line, raw, classes, pois) -> None:
    """Per size decile: prefill, work found (replay, model), delay (replay, Poisson, law)."""
    f = min(line.capacity_bytes_s, line.flow_cap_bytes_s)
    ls = lambda rr, xx: queues.run_line(  # noqa: E731
        queues.LineInputs(
            rr, np.arange(len(rr)), xx, line.capacity_bytes_s, line.flow_cap_bytes_s, line.pool, 0
        )
    )[1]
    delay = ls(r, x) - r - x / f
    perm = np.random.default_rng(7).permutation(len(x))
    dp = np.empty(len(x))
    dp[perm] = ls(pois, x[perm]) - pois - x[perm] / f
    ft, _ = optimize_summary._mixture(raw, classes, optimize_summary._shares(raw, raw.rate))
    o = np.argsort(ft.line_bytes)
    law = np.interp(x, ft.line_bytes[o], ft.line_wait("p_md")[o])
    usable = line.usable_bytes_s
    found = _fluid_found(r, x, usable)[0]
    tau = x / usable
    pool = raw.pool
    _, t_star = input_stream.ratio_and_scale(tau, np.ones_like(tau), raw.line_rho, 1.0, pool)
    shift = found_work.found_shift(own, np.ones_like(own), raw.line_rho, pool.count, t_star)
    dec = np.minimum((np.argsort(np.argsort(x)) * 10) // len(x), 9)
    top = delay + x / f > np.quantile(delay + x / f, 0.99)
    print(
        "decile  size MB  prefill s | found MB: replay model | delay ms: replay Poisson law | P99"
    )
    for b in range(10):
        m = dec == b
        print(
            f"{b:6d} {x[m].mean() / 1e6:8.1f} {own[m].mean():10.3f} | "
            f"{(found[m].mean() - found.mean()) / 1e6:+15.0f} {shift[m].mean() * usable / 1e6:+5.0f} | "
            f"{delay[m].mean() * 1e3:16.1f} {dp[m].mean() * 1e3:7.1f} {law[m].mean() * 1e3:6.1f} | "
            f"{top[m].mean() / top.mean() / 10:.0%}"
        )
    print(
        f"   all {x.mean() / 1e6:8.1f} {own.mean():10.3f} | {'':21s} | "
        f"{delay.mean() * 1e3:16.1f} {dp.mean() * 1e3:7.1f} {law.mean() * 1e3:6.1f}"
    )


def scenario_data(name: str, rate: float | None, cv: float | None) -> dict:
    """A bundled example's scenario, its rate and arrival CV replaced where given."""
    data = yaml.safe_load(example_path(name).read_text())
    if rate is not None:
        data["workload"]["rate_rps"] = rate
    if cv is not None:
        data["workload"]["arrival_cv"] = cv
    return data


def kv_comparison(summary: ArchitecturePlan, res) -> str:
    """One line: the plan's KV-transfer P50/P90/P99/mean against the replay's (requests that
    moved KV to main decode)."""
    kv = res.kv_transfer_s[~np.isnan(res.kv_at_decode_s)]
    sim = [*(float(np.percentile(kv, q)) for q in (50, 90, 99)), float(kv.mean())]
    an = [getattr(summary.kv_transfer_s, k) for k in ("p50", "p90", "p99", "mean")]
    return (
        "KV P50/P90/P99/mean analytic "
        + "/".join(f"{v:.3f}" for v in an)
        + " replay "
        + "/".join(f"{v:.3f}" for v in sim)
        + " ("
        + "/".join(f"{p / q - 1:+.0%}" for p, q in zip(an, sim))
        + ")"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="pdd-paper")
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--cv", type=float, default=None)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args(argv)
    data = scenario_data(a.scenario, a.rate, a.cv)
    replay.run_line = _spy("line", replay.run_line)
    replay._prefill = _spy("prefill", replay._prefill)
    with TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "s.yaml")
        Path(path).write_text(yaml.safe_dump(data))
        ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(problem_of(ctx), "pdd", cls, ctx.scenario.workload.rate_rps, caps)
    s = optimize_summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, s, "pdd", a.n)
    line, pool = raw.line, raw.pool
    li = _SEEN["line"][0][0]
    st, _, sent, _, _ = _SEEN["line"][1]
    pf = _SEEN["prefill"][1]
    order = np.asarray(li.rid)[~np.isnan(st[li.rid])]
    order = order[len(order) // 20 :]  # warm-up
    r, x = pf.ready[order], sent[order]
    print(
        f"{a.scenario} rate {raw.rate:g} cv {a.cv or 1}: {line.count} x {line.sku.name}, cap "
        f"{line.flow_cap_bytes_s * 8e-9:.2f} of {line.capacity_bytes_s * 8e-9:.2f} Gb/s, pool "
        f"{line.pool}; plan line {raw.line_rho:.3f}, prefill {pool.rho:.3f} x {pool.count}"
    )
    gaps = np.diff(r)
    es = float(np.dot(pool.weight, pool.service_s))
    cs2 = float(np.dot(pool.weight, pool.service_s**2)) / es**2 - 1.0
    qna = gig1.departure_ca2(pool.count, min(pool.rho, 1.0), pool.ca2, cs2)
    print(f"gap SCV {_scv(gaps):.3f} (QNA departure {qna:.3f}); size SCV {_scv(x):.2f}")
    own = pf.ready[order] - pf.start[order]  # its own prefill service: its instance's gap
    print(
        f"corr(size, merged gap before) {np.corrcoef(x[1:], gaps)[0, 1]:+.3f}; "
        f"corr(size, own prefill service) {np.corrcoef(x, own)[0, 1]:+.3f}"
    )
    # a prefill instance emits bytes at x / S while busy: the whole pool busy feeds the line
    # at most c E[x] / E[S] on average, (line load) / (prefill load) of the usable rate
    peak = pool.count * float(x.mean()) / float(own.mean()) / line.usable_bytes_s
    print(f"all {pool.count} prefill instances busy emit {peak:.2f} x the line's usable rate")
    rho, n_s, t = _control(r, x, line)
    law = limited_ps_numbers(line.pool, rho, line.capacity_bytes_s, line.flow_cap_bytes_s)[0]
    print(f"load {rho:.3f}: in service {n_s:.3f}, Poisson-fed law {law:.3f} ({law / n_s - 1:+.1%})")
    rng = np.random.default_rng(a.seed)
    lam = (len(r) - 1) / float(r[-1] - r[0])
    pois = r[0] + np.cumsum(rng.exponential(1.0 / lam, len(r)))
    idx = rng.permutation(len(gaps))
    ren = r[0] + np.r_[0.0, np.cumsum(gaps[idx])]
    cases = {
        "replay": (r, x),
        "Poisson, iid sizes": (pois, rng.permutation(x)),
        "replay ready, shuffled sizes": (r, rng.permutation(x)),
        "renewal (gaps shuffled), iid sizes": (ren, rng.permutation(x)),
        "(gap before, size) pairs shuffled": (ren, np.r_[x[0], x[1:][idx]]),
    }
    print(f"{'line input':36s} {'in service':>10s}  sojourn P50/P90/P99/mean ms")
    for name, (rr, xx) in cases.items():
        _, n_s, t = _control(rr, xx, line)
        print(f"{name:36s} {n_s:10.3f}  " + "/".join(f"{v:.1f}" for v in t))
    for name in ("replay", "Poisson, iid sizes"):
        rr, xx = cases[name]
        found, avg = _fluid_found(rr, xx, line.usable_bytes_s)
        big = xx > np.quantile(xx, 0.9)
        print(
            f"{name}: work time-average {avg / 1e6:.0f} MB, found {found.mean() / 1e6:.0f} MB "
            f"(big {found[big].mean() / 1e6:.0f}, rest {found[~big].mean() / 1e6:.0f}), "
            f"P(found empty) big {np.mean(found[big] == 0):.3f} rest "
            f"{np.mean(found[~big] == 0):.3f}"
        )
    ex2 = float((x * x).mean())
    idw = []
    for w in (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0):
        work = np.bincount(((r - r[0]) // w).astype(int), weights=x)[:-1]
        idw.append(f"{w:g} s {work.var() / (lam * w * ex2):.2f}")
    print("work dispersion vs Poisson: " + ", ".join(idw))
    es = float(np.dot(pool.weight, pool.service_s)) / float(np.sum(pool.weight))
    ts = np.array([0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0])
    model = input_stream.work_dispersion(pool.rate_rps, es, pool.count, _scv(x), ts)
    print("analytic (M/M/c pool): " + ", ".join(f"{w:g} s {v:.2f}" for w, v in zip(ts, model)))
    tau = x / line.usable_bytes_s
    i_star = input_stream.dispersion_ratio(
        pool.rate_rps, es, pool.count, tau, np.ones_like(tau), rho
    )
    t_star = rho * float((tau * tau).mean()) / (2 * float(tau.mean()) * (1 - rho) ** 2)
    print(f"at the line's time scale t* {t_star:.2f} s: I(t*) {i_star:.3f}")
    _deciles(r, x, own, line, raw, cls, pois)
    print(kv_comparison(s, res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
