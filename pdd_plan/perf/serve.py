"""Aggregated serving of one instance as a benchmark client measures it (`perf --phase serve`).

`bench_serving` / `vllm bench serve` at `--max-concurrency C` (closed loop: C requests sent at
t = 0, each completion sends the next) or at `--request-rate R` (open loop, Poisson), for
`num_prompts` requests with lengths drawn from a distribution (serve_lengths.py), report
duration, output and total tokens/s, TTFT, TPOT and ITL statistics and the mean requests in
flight. This module predicts them:

1. The steady state (serve_steady.py) at the decode batch B that the load sets: closed loop,
   B + X TTFT = min(C, running limit) (Little's law over the requests in the engine);
   open loop, X = R. The running limit is the engine's (engines.yaml) and the KV
   pool's (live contexts, not input + output reserved).
2. A finite run's start and end. Closed loop: the first C prompts arrive together, so they
   are prefilled in full batches (their TTFTs spread over that burst) and the run gains the
   burst's time over what the same prompts cost in steady state; at the end the last C
   requests drain, the batch falling as they finish (their residual outputs follow the
   equilibrium law P(residual > k) = E[(O - k)+] / E[O], up to the longest), which costs the
   drain's time over the steady state's for the same tokens. With fixed lengths the C
   requests stay in lockstep where a prompt fits one step (or under SGLang's separate
   prefill, which holds the decodes until the whole wave is prefilled): the run is
   num_prompts / C such waves; a longer prompt under mixed steps is chunked, its wave spreads
   and the run takes the steady path. An open loop with a stated num_prompts is a finite run
   that rarely reaches its steady state: perf/serve_open.py follows it as it unfolds.
3. Percentiles: TTFT = the fixed part + the prompt's own steps (by its length) for the
   steady requests, the burst's times for the first C; TPOT per request = decode step +
   the prompt-carrying steps among its O - 1 (binomial); ITL = the two step kinds. Computed
   over a seeded draw of 20,000 requests (deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pdd_plan.common.errors import InputError
from pdd_plan.perf import layers, serve_open
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve_engine import ServeEngine
from pdd_plan.perf.serve_lengths import Lengths
from pdd_plan.perf.serve_steady import Steady, decode_context, interp, steady
from pdd_plan.perf.serve_step import StepCost

DRAWS = 20_000  # requests drawn for the percentiles
DRAIN_POINTS = 48  # quadrature points over a drain's steps


@dataclass(frozen=True)
class Load:
    isl: Lengths
    osl: Lengths
    concurrency: int | None = None  # closed loop
    rate: float | None = None  # open loop, requests/s
    num_prompts: int | None = None  # None: the steady state of an endless run


@dataclass(frozen=True)
class Stat:
    mean: float
    p50: float
    p90: float
    p99: float

    @staticmethod
    def weighted(x: np.ndarray, w: np.ndarray) -> Stat:
        """Mean and percentiles of values x carrying weights w (the lower value at a tie)."""
        if len(x) == 0 or float(np.sum(w)) <= 0:
            return Stat(0.0, 0.0, 0.0, 0.0)
        order = np.argsort(x, kind="stable")
        xs, cw = x[order], np.cumsum(w[order]) / np.sum(w)
        p = [float(xs[min(int(np.searchsorted(cw, q)), len(xs) - 1)]) for q in (0.5, 0.9, 0.99)]
        return Stat(float(np.dot(x, w) / np.sum(w)), *p)

    @staticmethod
    def of(x: np.ndarray) -> Stat:
        if len(x) == 0:
            return Stat(0.0, 0.0, 0.0, 0.0)
        p = np.percentile(x, [50, 90, 99])
        return Stat(float(np.mean(x)), float(p[0]), float(p[1]), float(p[2]))

    def as_dict(self, scale: float = 1.0) -> dict[str, float]:
        return {k: getattr(self, k) * scale for k in ("mean", "p50", "p90", "p99")}


@dataclass(frozen=True)
class ServeResult:
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    ttft_s: Stat
    tpot_s: Stat
    itl_s: Stat
    in_flight_mean: float
    duration_s: float | None
    steady: Steady
    running_limit: int
    limit: str  # concurrency | engine | kv: what bounds the requests in the engine
    saturated: bool  # open loop: arrivals above what the instance serves
    ramp_s: float  # the run's start over the steady state (closed loop)
    drain_s: float  # its end over the steady state
    waves: bool  # fixed lengths: the closed loop stays in lockstep


def running_limit(inst: Instance, eng: ServeEngine, isl: Lengths, osl: Lengths) -> tuple[int, str]:
    """Requests the engine runs at once: its own limit, and the KV pool holding live contexts
    (a request holds its prompt and the half of its output it has made, on average)."""
    live = isl.mean + osl.mean / 2.0
    per = float(layers.kv_bytes(inst.model, live))
    kv = int(inst.kv_pool_bytes // per) if per > 0 else 0
    eng_cap = eng.max_running or 1 << 30
    return (kv, "kv") if kv < eng_cap else (eng_cap, "engine")


def _solve_closed(cost, eng, load: Load, n_engine: float) -> Steady:
    """The B at which the requests in the engine number n_engine (bisection: it grows in B)."""
    lo, hi = 1e-6, max(n_engine, 1e-6)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        s = steady(cost, eng, load.isl, load.osl, mid, n_engine)
        if s.in_engine > n_engine:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-4 * max(1.0, hi):
            break
    return steady(cost, eng, load.isl, load.osl, lo, n_engine)


def _solve_open(cost, eng, load: Load, cap: int) -> tuple[Steady, bool]:
    top = steady(cost, eng, load.isl, load.osl, float(cap), None)
    if top.requests_per_s <= load.rate:  # type: ignore[operator]
        return _solve_closed(cost, eng, load, float(cap)), True
    lo, hi = 1e-6, float(cap)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if steady(cost, eng, load.isl, load.osl, mid, None).requests_per_s < load.rate:  # type: ignore[operator]
            lo = mid
        else:
            hi = mid
    s = steady(cost, eng, load.isl, load.osl, hi, None)
    return s, bool(s.in_engine > cap)


def _burst(cost: StepCost, eng: ServeEngine, isl: Lengths, n: int) -> np.ndarray:
    """Times at which the prompts of n requests sent together finish (first come first
    served, full prompt batches, the last one partial; under a mixed scheduler the finished
    ones decode inside the later steps)."""
    e_i, per_step = isl.mean, float(eng.step_tokens)
    total = n * e_i
    k = np.arange(1, n + 1)
    passes = np.ceil(k * e_i / per_step - 1e-9)
    n_pass = int(passes[-1])
    riding = n / 2.0 if eng.schedule == "mixed" and n_pass > 1 else 0.0

    def one(tokens: float) -> float:
        if riding and tokens >= e_i:
            return cost.time(riding, e_i, tokens / e_i, e_i)
        return cost.prefill_tokens(tokens, e_i, max(e_i - tokens, 0.0) / 2.0)

    full = one(min(per_step, total))
    last = one(total - (n_pass - 1) * per_step) if n_pass > 1 else full
    return np.where(passes < n_pass, passes * full, (n_pass - 1) * full + last)


def _drain(cost: StepCost, s: Steady, load: Load, n: int, ctx: float) -> tuple[float, float]:
    """(seconds, output tokens) from the last send to the last completion. The n requests
    left have the equilibrium residual law P(residual > k) = E[(O - k)+] / E[O] = p(k); a
    step runs while any remains, P = 1 - (1 - p)^n, at the batch left given that, n p / P;
    the last one's residual reaches the longest output, not the mean."""
    o = load.osl
    k = np.linspace(0.0, o.high, DRAIN_POINTS + 1)[:-1] + o.high / DRAIN_POINTS / 2
    share = np.array([o.mean_of(lambda v, kk=kk: np.maximum(v - kk, 0.0)) for kk in k]) / o.mean
    alive = 1.0 - (1.0 - np.minimum(share, 1.0)) ** n
    b = np.where(alive > 0, n * share / np.maximum(alive, 1e-300), 0.0)
    dt = o.high / DRAIN_POINTS
    t = sum(a * interp(lambda x: cost.decode(x, ctx), max(bb, 1.0)) for a, bb in zip(alive, b))
    return t * dt + s.ttft_s, float(n * share.sum() * dt)


def _waves(cost, eng, load: Load, n: int, n_total: int) -> tuple[float, float, np.ndarray, float]:
    """Fixed lengths in lockstep: (first wave's seconds, each later wave's, TTFTs over the
    run, TPOT). Under a mixed scheduler the first wave's prompts finish in groups of what one
    step carries, one step apart, and stay so: each later group's prompts ride one step of
    the others' decodes."""
    ctx = decode_context(load.isl, load.osl)
    e_i, e_o = load.isl.mean, load.osl.mean
    first = _burst(cost, eng, load.isl, n)
    t_d = cost.decode(n, ctx)
    tpot, later, t_later = t_d, first, float(first[-1] + (e_o - 1.0) * t_d)
    t_first = None
    if eng.schedule == "separate":
        # the decodes start when the wave's last prefill batch ends: a request prefilled
        # earlier waits for it between its first and second token
        tpot = t_d + float(np.mean(first[-1] - first)) / max(e_o - 1.0, 1.0)
        t_first = t_later
    elif e_i > eng.step_tokens:
        # long prompts: request j decodes through the chunk steps of the prompts behind it
        n_pass = float(np.ceil(n * e_i / eng.step_tokens))
        done_at = np.ceil(np.arange(1, n + 1) * e_i / eng.step_tokens)
        k = np.minimum(n_pass - done_at, e_o - 1.0)
        t_full = float(first[-1]) / n_pass
        tpot = float(np.mean((k * t_full + (e_o - 1.0 - k) * t_d) / max(e_o - 1.0, 1.0)))
    elif eng.schedule == "mixed":
        g = max(min(n, int(eng.step_tokens // e_i)), 1)
        sizes = [g] * (n // g) + ([n % g] if n % g else [])
        t_g = [cost.time(n - k, ctx, k, e_i) for k in sizes]
        later = np.repeat(t_g, sizes)
        extra = sum(max(t - t_d, 0.0) for t in t_g)
        t_later = extra + e_o * t_d
        tpot = t_d + extra * (len(sizes) - 1) / len(sizes) / max(e_o - 1.0, 1.0)
    share = min(n / max(n_total, 1), 1.0)
    m = int(round(DRAWS * share))
    ttft = np.concatenate([first[(np.arange(m) * n) // max(m, 1)], np.resize(later, DRAWS - m)])
    if t_first is None:
        t_first = float(first[-1] + (e_o - 1.0) * tpot)
    return t_first, t_later, ttft, tpot


def _percentiles(s: Steady, load: Load, burst: np.ndarray, n_total: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    i = load.isl.sample(rng, DRAWS)
    o = np.maximum(load.osl.sample(rng, DRAWS), 1.0)
    others = rng.poisson(s.arrivals_per_step, DRAWS)
    ahead = np.floor(rng.random(DRAWS) * (others + 1)) * load.isl.mean
    own = np.ceil((ahead + i) / s.prompt_capacity) * s.prompt_step_s
    # the wait for prompt capacity: none for a share 1 - rho of the arrivals, exponential for
    # the rest (the M/G/1 waiting-time law's usual two-moment form), mean s.queue_s; the step
    # under way: uniform over a step
    rho = min(max(s.rho, 1e-9), 1.0)
    wait = (rng.random(DRAWS) < rho) * rng.exponential(max(s.queue_s, 0.0) / rho, DRAWS)
    residual = rng.random(DRAWS) * s.poll_s  # the wait for the scheduler's poll (separate)
    if s.ttft_fixed_s - s.queue_s - s.poll_s / 2.0 > 1e-12:  # open loop: the step it lands in
        long = rng.random(DRAWS) < s.long_share
        residual += rng.random(DRAWS) * np.where(long, s.long_step_s, s.t_decode_s)
    ttft = residual + wait + own
    if len(burst) and n_total:
        m = int(round(DRAWS * min(len(burst) / n_total, 1.0)))
        ttft[:m] = burst[(np.arange(m) * len(burst)) // max(m, 1)]
    steps = np.maximum(o - 1.0, 1.0)
    # the share of a request's decode steps that carry (or wait for) others' prompts
    seen = (s.tpot_s - s.t_decode_s) / max(s.cycle_s - s.t_decode_s, 1e-12)
    f = min(s.prompt_share, 1.0) * min(max(seen, 0.0), 1.0)
    extra = s.t_prompt_s * max(s.prompt_share, 1.0)
    k = rng.binomial(steps.astype(np.int64), f)
    tpot = s.t_decode_s + extra * k / steps
    tpot = tpot[o > 1]
    n_prompt = int(round(DRAWS * f))
    itl = np.full(DRAWS, s.t_decode_s)
    itl[:n_prompt] += extra
    return Stat.of(ttft), Stat.of(tpot), Stat.of(itl)


def serve(
    inst: Instance, eng: ServeEngine, load: Load, cost: StepCost | None = None
) -> ServeResult:
    """What a benchmark client reports for `load` on `inst` under `eng` (module docstring)."""
    if (load.concurrency is None) == (load.rate is None):
        raise InputError(None, "--concurrency", "give one of --concurrency or --rate", "")
    cost = cost or StepCost(inst, eng)
    cap, limit = running_limit(inst, eng, load.isl, load.osl)
    if cap < 1:
        raise InputError(
            None,
            "--input-tokens",
            "one request's context does not fit the KV pool",
            "use more GPUs",
        )
    n_prompts = load.num_prompts
    if load.rate is not None:
        s, saturated = _solve_open(cost, eng, load, cap)
        if n_prompts:  # a finite run: followed as it unfolds (perf/serve_open.py)
            lim = eng.max_running or n_prompts
            r = serve_open.run(cost, eng, load.isl, load.osl, float(load.rate), n_prompts, lim,
                               inst.kv_capacity_tokens)  # fmt: skip
            if r is not None:
                return _finite_open(load, s, r, cap, limit)
        return _open_result(s, load, cap, limit, saturated)
    c = int(load.concurrency)  # type: ignore[arg-type]
    n_engine = min(c, cap)
    limit = "concurrency" if c <= cap else limit
    s = _solve_closed(cost, eng, load, float(n_engine))
    outside = (c - n_engine) / s.requests_per_s if c > n_engine else 0.0
    n = n_prompts or 0
    e_o, e_i = load.osl.mean, load.isl.mean
    # fixed lengths stay in lockstep only while a prompt fits one step: a longer one is
    # chunked over several, so a wave's first tokens come one prompt's chunks apart, its
    # completions as far apart, and the next wave is sent as a stream, not a burst (the
    # replay: Qwen3-235B 30K-token prompts at C = 64, TTFT 13.5 s, not the 25.9 s of a
    # second burst)
    # (SGLang's separate prefill keeps it: the decodes wait until the whole wave is prefilled)
    lockstep = eng.schedule == "separate" or e_i <= eng.step_tokens
    waves = load.isl.fixed and load.osl.fixed and n > 0 and lockstep
    if waves or (n and n <= n_engine):
        w = min(n, n_engine)
        t_first, t_later, ttft_w, tpot = _waves(cost, eng, load, w, n)
        duration = t_first + t_later * (n / w - 1.0)
        t_wave = duration / (n / w)
        wave_s = Steady(w, tpot, t_wave / max(e_o, 1.0), tpot, 0.0, 0.0, 0.0, float(ttft_w.mean()), 0.0, 0.0, 1.0,
                        w / t_wave, w, 0.0, 0.0)  # fmt: skip
        ttft, tp, itl = (
            Stat.of(ttft_w + outside),
            Stat.of(np.array([tpot])),
            Stat.of(np.array([tpot])),
        )
        lat = ttft.mean + (e_o - 1.0) * tpot
        return ServeResult(
            n * e_o / duration, n * (e_o + e_i) / duration, n / duration, ttft, tp, itl,
            n * lat / duration, duration, wave_s, cap, limit, False, 0.0, 0.0, True,
        )  # fmt: skip
    ramp = drain = 0.0
    burst = np.zeros(0)
    x = s.requests_per_s
    if n:
        burst = _burst(cost, eng, load.isl, n_engine)
        marginal = s.prompt_share * s.t_prompt_s / max(s.batch * e_i / max(e_o - 1, 1e-9), 1e-9)
        ramp = max(float(burst[-1]) - n_engine * e_i * marginal, 0.0)
        t_dr, tok_dr = _drain(cost, s, load, n_engine, decode_context(load.isl, load.osl))
        drain = max(t_dr - tok_dr * s.tpot_s / max(s.batch, 1e-9), 0.0)
        duration = n / x + ramp + drain
    else:
        duration = None  # type: ignore[assignment]
    ttft, tpot, itl = _percentiles(s, load, burst, n)
    if outside:
        ttft = Stat(*(v + outside for v in (ttft.mean, ttft.p50, ttft.p90, ttft.p99)))
    rate = n / duration if duration else x
    lat = ttft.mean + (e_o - 1.0) * tpot.mean
    return ServeResult(
        rate * e_o, rate * (e_o + e_i), rate, ttft, tpot, itl, rate * lat, duration, s, cap,
        limit, False, ramp, drain, False,
    )  # fmt: skip


def _open_result(s: Steady, load: Load, cap: int, limit: str, saturated: bool) -> ServeResult:
    """The steady state of an open loop; a finite run many request lifetimes long adds its
    last request's latency to its arrivals' span, and past capacity its queue's growth (a
    request waits half of it on average)."""
    x = s.requests_per_s if saturated else float(load.rate)  # type: ignore[arg-type]
    e_o, e_i = load.osl.mean, load.isl.mean
    ttft, tpot, itl = _percentiles(s, load, np.zeros(0), 0)
    n = load.num_prompts
    duration = None
    if n:
        duration = n / x + ttft.mean + (e_o - 1.0) * tpot.mean
        if saturated:
            grow = 0.5 * (n / x - n / float(load.rate))  # type: ignore[arg-type]
            ttft = Stat(*(v + grow for v in (ttft.mean, ttft.p50, ttft.p90, ttft.p99)))
    rate = n / duration if duration else x
    lat = ttft.mean + (e_o - 1.0) * tpot.mean
    return ServeResult(
        rate * e_o, rate * (e_o + e_i), rate, ttft, tpot, itl, x * lat, duration, s, cap,
        "rate" if not saturated else limit, saturated, 0.0, 0.0, False,
    )  # fmt: skip


def _finite_open(load: Load, s: Steady, r: serve_open.OpenRun, cap: int, limit: str) -> ServeResult:
    """A finite open-loop run: its ramp-up, queue and drain to the last completion."""
    n = int(load.num_prompts)  # type: ignore[arg-type]
    e_o, e_i = load.osl.mean, load.isl.mean
    ttft, tpot = Stat.weighted(r.ttft_s, r.ttft_w), Stat.weighted(r.tpot_s, r.tpot_w)
    itl = Stat.weighted(r.itl_s, r.itl_w)
    x = n / r.duration_s
    saturated = r.queued_at_last_arrival >= 1.0
    s = replace(s, batch=r.batch_mean)  # the run's mean batch, not the steady state's
    return ServeResult(
        x * e_o, x * (e_o + e_i), x, ttft, tpot, itl, x * r.latency_mean_s, r.duration_s, s,
        cap, limit if saturated else "rate", saturated, 0.0, 0.0, False,
    )  # fmt: skip
