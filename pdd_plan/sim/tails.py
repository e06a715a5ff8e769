"""Stationary TTFT tails of a verification replay: the prefill stage replayed long, composed with
the rest of the request's first token from the verification replay.

Why: near saturation the prefill pool's wait relaxes slowly. At the default's 96% busy pool a
20,000-request replay (500 s) holds a few busy periods; its TTFT P90 came out 1.57 s for
IDC-PD against 2.6-3.0 s over 1M-request replays (seeds 0-3), and seeds 0-5 at 20,000 gave
1.6-5.4 s. The rest of a request's first token (its own prefill, the KV's trip, a decode slot)
settles far sooner.

The composition, for the kept requests of a replay:

* ``TTFT = W + R``, ``W`` the prefill wait, ``R`` everything after it;
* ``W``'s law from the prefill stage alone (:func:`stage_waits`), replayed over ``N`` requests
  drawn exactly as a replay of ``N`` requests draws them (same seed, same tables): its waits
  are that replay's, bit for bit, at a fraction of its cost (the line and decode are most of
  a replay's time). ``N`` is set by the pool's relaxation time (:func:`stage_length`);
* ``R``'s law from the verification replay itself;
* ``P(TTFT <= t) = E[F_W(t - R)]``: ``R`` independent of ``W``. Exact for the request's own
  prefill (FCFS: its wait depends on earlier requests only); for the rest an assumption,
  measured on the default's 1M-request replays: corr(W, R) +0.015 (PDD, R mostly the line)
  and -0.08 (IDC-PD: a decode slot is scarcer after the pool's busy periods than during
  them), the composition of the 1M replay's own W and R within +0.5% (PDD) and +1.2% / +2.4%
  (IDC-PD, P90 / P99: the negative correlation makes it lean high) of its TTFT P90 / P99.

Computed on a grid (:func:`composed`): both laws as histograms of ``GRID`` bins, convolved.
Each percentile's interval is by sectioning (Asmussen & Glynn, Stochastic Simulation, 2007,
IV.5): the composition redone with each of ``SECTIONS`` consecutive sections of the stage
replay (and, apart, of the verification replay), the spread of those percentiles giving each
part's variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdd_plan.sim import sequential, setup
from pdd_plan.sim.queues import fifo_least_loaded
from pdd_plan.sim.replay import _groups  # the replay's own grouping: the same tables
from pdd_plan.sim.timings import PrefillTimes, _instance_key
from pdd_plan.sim.warmup import mser

METHOD = "prefill stage x composed"
# relaxation times of the prefill pool's wait the stage replay spans: at the default's 96% busy
# pool (relaxation ~2,400 requests) that is ~1M requests, the reference length, whose
# own TTFT P90 still spread 2.6-3.0 s over seeds 0-3 (IDC-PD): a lighter pool needs fewer
RELAXATIONS = 400
MAX_STAGE = 1_000_000  # requests at most (a 1M prefill stage: ~0.5 s here)
GRID = 8192  # bins of the composition's grid (the default: ~6 ms each, 0.2% of IDC-PD's P90)
SECTIONS = 20  # sections of each replay for a percentile's interval (as sequential.CI_BATCHES)
QS = (0.50, 0.90, 0.99)


@dataclass(frozen=True)
class StageWaits:
    """The prefill stage's waits past its warm-up (seconds, arrival order), and the replay's
    length they came from."""

    waits: np.ndarray
    requests: int
    warmup: int


def relaxation(rho: float, cs2: float, ca2: float = 1.0) -> float:
    """The heavy-traffic relaxation time of a queue's wait, in arrivals: ``(ca2 + cs2) /
    (1 - rho)^2`` (the reflected Brownian motion of the workload: variance ``ca2 + cs2`` per
    arrival in mean-service units, drift ``1 - rho``; Whitt, "Planning queueing simulations",
    Management Science 35, 1989). Infinite at or past saturation."""
    if rho >= 1.0:
        return math.inf
    return (ca2 + cs2) / (1.0 - rho) ** 2


def stage_length(n: int, rho: float, cs2: float, ca2: float = 1.0) -> int:
    """Requests the prefill stage is replayed over: RELAXATIONS relaxation times, at least the
    verification replay's ``n``, at most MAX_STAGE."""
    t = relaxation(rho, cs2, ca2)
    want = MAX_STAGE if not math.isfinite(t) else math.ceil(RELAXATIONS * t)
    return int(min(MAX_STAGE, max(n, want)))


def draw_ahead(rs, n: int, seed: int, most: int) -> None:
    """The longest stage a verification replay of ``n`` requests may compose (``most``, at most
    MAX_STAGE) drawn ahead of its rate (`setup.draw_ahead`): a replay child does it while it
    waits for its first plan. A guess: a pool far from saturation replays a shorter stage
    (:func:`stage_length`), whose own draw is then made when asked."""
    m = min(int(most), MAX_STAGE)
    if m > int(n):
        setup.draw_ahead(rs, m, seed)


def _services(rs, fl, reqs) -> tuple[list[np.ndarray], list[int]]:
    """Each prefill group's service of every request, as ``replay._prefill`` computes it."""
    r = reqs.req
    inp = r.input_tokens.astype(float)
    cached = np.floor(inp * np.nan_to_num(r.hit_p, nan=0.0))
    new = np.maximum(inp - cached, 1.0)
    types, counts = _groups(fl.prefill)
    pairs = _distinct(r.input_tokens, cached)
    if pairs is None:
        return [PrefillTimes(t, rs.prefill_chunk_tokens)(new, cached) for t in types], counts
    # each distinct (prompt, cached) pair timed once: the same numbers (a request's service is
    # a function of its pair alone, and each q's table spans the same cached range), gathered
    first, inverse = pairs
    return [
        PrefillTimes(t, rs.prefill_chunk_tokens)(new[first], cached[first])[inverse] for t in types
    ], counts


def _distinct(inp: np.ndarray, cached: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(one request of each distinct (prompt, cached) pair, each request's pair) where the
    pairs index a table no larger than 4 per request (a long stage of few prompt lengths: the
    default's fixed 64K prompt has at most 65,537 pairs in 1M requests), else None."""
    n = inp.size
    if n < 50_000:  # too few to pay for the table
        return None
    lo, hi = int(inp.min()), int(inp.max())
    width = hi + 1  # cached tokens lie in [0, prompt]
    if (hi - lo + 1) * width > 4 * n:
        return None
    key = (inp.astype(np.int64) - lo) * width + cached.astype(np.int64)
    slot = np.full((hi - lo + 1) * width, -1, dtype=np.int64)
    slot[key[::-1]] = np.arange(n - 1, -1, -1)  # each pair's first request (the last write wins)
    distinct = np.flatnonzero(slot >= 0)
    where = np.empty_like(slot)
    where[distinct] = np.arange(distinct.size)
    return slot[distinct], where[key]


def load(rs, fl, reqs) -> tuple[float, float]:
    """The prefill pool's busy share and its service's squared CV on ``reqs`` (the
    verification replay's draw): the relaxation time's inputs."""
    services, counts = _services(rs, fl, reqs)
    a = reqs.req.arrival_s
    span = float(a[-1] - a[0]) if a.size > 1 else 0.0
    if span <= 0:
        return 0.0, 0.0
    rate = (a.size - 1) / span
    capacity = sum(c / float(np.mean(s)) for s, c in zip(services, counts))
    s = services[0]
    m = float(np.mean(s))
    return rate / capacity, float(np.var(s)) / (m * m) if m > 0 else 0.0


_CACHE: dict[tuple, StageWaits] = {}  # a process replays one prefill pool for several plans


def stage_waits(rs, fl, rate_rps: float, n: int, seed: int) -> StageWaits:
    """The prefill waits of ``n`` requests drawn as a replay of ``n`` draws them, through the
    prefill stage alone; the one-sided MSER-5 warm-up (``sim.warmup``) left out. Memoized by
    the pool, rate, length and seed (optimize replays several plans on one prefill pool)."""
    key = (  # by value: each replay in optimize's child gets its own copy of the setup
        tuple(_instance_key(i) for i in fl.prefill),
        rs.workload.model_dump_json(),
        int(rs.prefill_chunk_tokens),
        float(rate_rps),
        int(n),
        int(seed),
    )
    if key in _CACHE:
        return _CACHE[key]
    reqs = setup.requests(rs, n, seed, rate_rps)
    services, counts = _services(rs, fl, reqs)
    a = reqs.req.arrival_s
    start, _ = fifo_least_loaded(a, services, counts)
    w = start - a
    cut = mser(w)
    keep = cut.requests if cut.settled else 0
    out = StageWaits(np.ascontiguousarray(w[keep:]), int(len(a)), int(keep))
    if len(_CACHE) > 8:
        _CACHE.clear()
    _CACHE[key] = out
    return out


def _pmf(x: np.ndarray, h: float, bins: int) -> np.ndarray:
    i = np.minimum((x / h).astype(np.int64), bins - 1)
    return np.bincount(i, minlength=bins).astype(float) / x.size


def _quantiles(pmf_w: np.ndarray, pmf_r: np.ndarray, h: float, qs) -> np.ndarray:
    """Percentiles of the sum of two independent grid laws (bin ``i`` of each holds
    ``[i h, (i + 1) h)``; a sum of bins ``i`` and ``j`` is centred at ``(i + j + 1) h``)."""
    m = 1 << int(math.ceil(math.log2(pmf_w.size + pmf_r.size)))
    pmf = np.fft.irfft(np.fft.rfft(pmf_w, m) * np.fft.rfft(pmf_r, m), m)
    cdf = np.cumsum(np.maximum(pmf[: pmf_w.size + pmf_r.size - 1], 0.0))
    cdf /= cdf[-1]
    centres = (np.arange(cdf.size) + 1.0) * h
    out = []
    for q in qs:
        k = int(np.searchsorted(cdf, q, side="left"))
        if k == 0:
            out.append(centres[0] * q / max(cdf[0], 1e-300))
            continue
        lo, hi = cdf[k - 1], cdf[k]
        f = (q - lo) / (hi - lo) if hi > lo else 0.0
        out.append(centres[k - 1] + f * h)
    return np.asarray(out)


@dataclass(frozen=True)
class Composed:
    """Percentiles (``QS``) of ``W + R`` and their 95% sectioning intervals."""

    points: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mean: float


def _grid(w: np.ndarray, rest: np.ndarray) -> tuple:
    """(W, R shifted to >= 0, the shift, the bin width, W's and R's grid laws)."""
    w = np.asarray(w, dtype=float)
    r = np.asarray(rest, dtype=float)
    r = r[~np.isnan(r)]
    if w.size == 0 or r.size == 0:
        raise ValueError("nothing to compose")
    w = np.maximum(w, 0.0)
    shift = min(float(r.min()), 0.0)  # R >= 0 in a replay; a negative one moves the grid
    r = r - shift
    top = float(w.max()) + float(r.max())
    bins = GRID // 2
    h = max(top, 1e-9) / (bins - 1)
    return w, r, shift, h, _pmf(w, h, bins), _pmf(r, h, bins)


def composed_sample(w: np.ndarray, rest: np.ndarray, k: int = 2000) -> np.ndarray:
    """``k`` quantiles of ``W + R`` at ``(i + 1/2) / k``, read from the grid :func:`composed`
    reads its percentiles from: an even sample of the composed law, whose empirical CDF is
    that law's (the report draws the TTFT CDF of a composed verification from it)."""
    w, r, shift, h, pw, pr = _grid(w, rest)
    return _quantiles(pw, pr, h, (np.arange(k) + 0.5) / k) + shift


def composed(w: np.ndarray, rest: np.ndarray, qs=QS, sections: int = SECTIONS) -> Composed:
    """``W + R`` for independent ``W`` (a long series, e.g. :func:`stage_waits`) and ``R`` (a
    short one), both in time order: percentiles on a ``GRID``-bin grid, each with a 95%
    interval from the sections' spread (W's and R's variances added: independent runs)."""
    w, r, shift, h, pw, pr = _grid(w, rest)
    bins = pw.size
    est = _quantiles(pw, pr, h, qs)
    var = np.zeros(len(qs))
    for x, other, is_w in ((w, pr, True), (r, pw, False)):
        k = x.size // sections
        if k < 1:
            var[:] = np.inf
            continue
        got = []
        for b in range(sections):
            part = _pmf(x[b * k : (b + 1) * k], h, bins)
            got.append(_quantiles(part, other, h, qs) if is_w else _quantiles(other, part, h, qs))
        var += np.var(np.asarray(got), axis=0, ddof=1) / sections
    t = sequential.t_quantile(1.0 - sequential.CI_TAIL, sections - 1)
    half = t * np.sqrt(var)
    est = est + shift
    return Composed(est, est - half, est + half, float(w.mean() + r.mean() + shift))
