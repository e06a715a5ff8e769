"""A finite open-loop run (`bench_serving --request-rate R --num-prompts n`) as it unfolds.

Such a run is rarely in steady state: its n arrivals span only (n - 1) / R seconds, about as
long as one request lives, so the requests in flight ramp up while they arrive and drain after
the last one, and the run ends at its LAST completion - a late arrival with a long output,
decoding alone at the end - not at the last arrival plus a mean latency. Near or past
saturation the steady state says nothing at all about a 200-prompt run. So the run is followed
as a fluid on the engine's step clock:

- Continuous batching advances every running request one token per decode step, so a request
  that starts decoding at step k finishes at step k + O - 1 whatever the batch; the batch at step
  k is sum_j m_j P(O - 1 > k - k_j) over the cohorts j (mass m_j admitted at step k_j).
- Arrivals are a fluid at rate R (the client's Poisson process, its mean path); they wait
  first come first served for the running limit (engine or KV).
- Each block of decode steps costs its decode steps at the block's batch (serve_step.StepCost,
  the steps the replay also uses, at a batch of at least 1: a request decodes at batch 1 when
  alone) plus the prompt work it admits: `separate` (SGLang) prefills what waits first, in
  batches of up to its chunk, then decodes; `mixed` (vLLM, TensorRT-LLM) spreads the prompt
  tokens over the block's steps, up to the token budget left after the decodes.
- The last completion: P(last step <= x) = prod_j P(O - 1 <= x - k_j)^m_j, read through the
  run's step -> time curve. TPOT per request: (t(k_j + O - 1) - t(k_j)) / (O - 1); TTFT: the
  wait for admission (FIFO over the fluid arrivals) plus its prompt's share of the block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdd_plan.perf.serve_engine import ServeEngine
from pdd_plan.perf.serve_lengths import Lengths
from pdd_plan.perf.serve_steady import _prompt_chunks, decode_context, interp
from pdd_plan.perf.serve_step import StepCost

BLOCKS = 1500  # decode-step blocks the run is cut into (about)
O_POINTS = 48  # output lengths a cohort's TPOT is averaged over
MAX_BLOCKS = 200_000  # a bound on the loop
DK_PER_OUTPUT = 8.0  # a block is at most 1/8 of a mean request's decode steps
RESIDUAL = (np.arange(4) + 0.5) / 4.0  # where in the step under way a request arrives


@dataclass(frozen=True)
class OpenRun:
    duration_s: float
    ttft_s: np.ndarray  # per cohort
    tpot_s: np.ndarray  # per (cohort, output length)
    tpot_w: np.ndarray  # their weights
    ttft_w: np.ndarray
    itl_s: np.ndarray  # step times
    itl_w: np.ndarray  # requests decoding through them
    queued_at_last_arrival: float  # requests waiting for admission when the last one arrives
    latency_mean_s: float  # arrival to last token, over the requests
    batch_mean: float  # requests running, time-weighted over the run


class _Survival:
    """P(O - 1 > x) and P(O - 1 <= x) over decode steps x (O the output length)."""

    def __init__(self, osl: Lengths) -> None:
        self.steps = np.maximum(osl.values - 1.0, 0.0)
        self.cdf = np.cumsum(osl.weights)

    def cdf_at(self, x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.steps, x, side="right")
        return np.where(i > 0, self.cdf[np.maximum(i - 1, 0)], 0.0)

    def alive(self, x: np.ndarray) -> np.ndarray:
        return np.where(x < 0, 1.0, 1.0 - self.cdf_at(x))


def _points(d: Lengths) -> tuple[np.ndarray, np.ndarray]:
    """At most O_POINTS lengths of d with weights summing to 1 (quantile bins)."""
    if len(d.values) <= O_POINTS:
        return d.values.astype(float), d.weights
    edges = np.linspace(0.0, 1.0, O_POINTS + 1)
    mid = (edges[:-1] + edges[1:]) / 2.0
    cdf = np.cumsum(d.weights)
    idx = np.minimum(np.searchsorted(cdf, mid), len(d.values) - 1)
    return d.values[idx].astype(float), np.full(O_POINTS, 1.0 / O_POINTS)


def _arrival_time(m: np.ndarray, rate: float) -> np.ndarray:
    """When the m-th request arrives on the fluid path (the first at t = 0)."""
    return np.maximum(m - 1.0, 0.0) / rate


def _prefill_s(cost: StepCost, eng: ServeEngine, tokens: float, e_i: float) -> float:
    """`separate`: seconds to prefill `tokens` prompt tokens in batches of up to the chunk."""
    if tokens <= 0:
        return 0.0
    q = min(float(eng.step_tokens), max(tokens, e_i))
    return tokens / q * cost.prefill_tokens(q, e_i, cached=max(e_i - q, 0.0) / 2.0)


def run(
    cost: StepCost,
    eng: ServeEngine,
    isl: Lengths,
    osl: Lengths,
    rate: float,
    n: int,
    cap: int,
    kv_tokens: float | None = None,
) -> OpenRun | None:
    """Follow n requests arriving at `rate` through the instance (module docstring); None
    when the run is too long for BLOCKS blocks of at most E[O - 1] / DK_PER_OUTPUT steps (a
    block's batch is held over its steps, so a block must be short against a request's life):
    there the ramp and drain are a small share of the run and the steady state reads it.
    `cap` bounds the requests running; with `kv_tokens`, the KV pool bounds them as the
    engine admits (a prompt goes in while the live contexts, prompts and the tokens made so
    far, leave room for it), in place of `cap`'s mean-context reading of the pool."""
    e_i, surv = isl.mean, _Survival(osl)
    ctx = decode_context(isl, osl)
    o_max = float(surv.steps[-1])
    t_one = interp(lambda x: cost.decode(x, ctx), 1.0)
    span = (n - 1) / rate
    # decode steps the run takes: its arrivals' span at one step per t_one, or (past what the
    # running limit lets decode at once) its tokens over that limit; then the longest output
    steps = max(span / max(t_one, 1e-9), n * max(osl.mean - 1.0, 0.0) / max(cap, 1)) + o_max
    dk = max(1.0, math.ceil(steps / BLOCKS))
    if dk > max(1.0, (osl.mean - 1.0) / DK_PER_OUTPUT):
        return None  # a run many lifetimes long: its steady state is the reading
    k_adm: list[float] = []  # cohorts: the step they start decoding at, mass, TTFT
    m_adm: list[float] = []
    ttft: list[np.ndarray] = []  # per cohort, over (input length, residual)
    i_pts, i_w = _points(isl)
    i_w_r = np.repeat(i_w, len(RESIDUAL)) / len(RESIDUAL)  # over (input length, residual)
    ks, ts, itl, itl_w = [0.0], [0.0], [], []
    t = k = admitted = prev = busy = 0.0
    queued_at_last = 0.0
    for _ in range(MAX_BLOCKS):
        arrived = min(n, 1.0 + rate * t)
        km, mm = np.array(k_adm), np.array(m_adm)
        alive = surv.alive(k - km) if len(km) else np.zeros(0)
        running = float(mm @ alive) if len(km) else 0.0
        room_n = cap - running
        if kv_tokens is not None:  # live contexts: each alive request's prompt and output so far
            live = float(mm @ (alive * (e_i + np.maximum(k - km, 0.0)))) if len(km) else 0.0
            room_n = min(room_n, (kv_tokens - live) / e_i)
        x = max(min(arrived - admitted, room_n), 0.0)
        if eng.schedule != "separate":  # prompt tokens ride the steps, up to the budget left
            x = min(x, dk * max(eng.step_tokens - running, 1.0) / e_i)
        b = running + x
        t_d = interp(lambda y: cost.decode(y, ctx), max(b, 1.0))
        t_pre = 0.0
        if eng.schedule == "separate":
            t_pre = _prefill_s(cost, eng, x * e_i, e_i)
            block = t_pre + dk * t_d
            # its own prompt, batched with the others sent within the same block (Poisson:
            # a request sees x others beside it on average, x the block's mean arrivals)
            own = [_prefill_s(cost, eng, x * e_i + v, e_i) for v in i_pts]
        else:
            # whole prompts ride a share f of the steps (as the engine takes them, one request
            # at a time), not a smear over all of them: a step's time is not linear in tokens
            room = max(eng.step_tokens - b, 1.0)
            if x > 0:
                q = min(room, max(e_i, x * e_i / dk))
                f = min(x * e_i / (dk * q), 1.0)
                t_d = f * _prompt_chunks(cost, max(b, 1.0), ctx, q, e_i) + (1.0 - f) * t_d
            block = dk * t_d
            # its prompt's own steps, each carrying what the budget left after the decodes holds
            # (first come first served: half the others' prompts go before it)
            own = [math.ceil((x * e_i / 2.0 + v) / room)
                   * _prompt_chunks(cost, max(b, 1.0), ctx, min(x * e_i + v, room), v)
                   for v in i_pts]  # fmt: skip
        if x > 0:
            # the queue: from arrival (the slice's mean, FIFO) to this block, less the half
            # block the fluid adds by admitting at block starts; then the step under way
            arr = float(np.mean(_arrival_time(np.array([admitted, admitted + x]), rate)))
            wait = max(t - arr - prev / 2.0, 0.0)
            k_adm.append(k)
            m_adm.append(x)
            ttft.append((wait + np.array(own)[:, None] + t_d * RESIDUAL[None, :]).ravel())
            admitted += x
        if running > 0:  # the gaps the running requests see: one spans the prefill batch
            itl += [t_d, t_d + t_pre]
            itl_w += [running * (dk - 1.0), running]
        busy += b * block
        t += block
        prev = block
        k += dk
        ks.append(k)
        ts.append(t)
        if arrived >= n and queued_at_last == 0.0:
            queued_at_last = max(n - admitted, 0.0) + 1e-12
        if admitted >= n - 1e-9 and k > max(k_adm) + o_max:
            break
    km, mm = np.array(k_adm), np.array(m_adm)
    kk, tt = np.array(ks), np.array(ts)
    # the last completion: its distribution over the step grid, read as time
    with np.errstate(divide="ignore"):
        logc = np.log(surv.cdf_at(kk[:, None] - km[None, :])) @ mm
    g = np.exp(logc)
    duration = float(np.sum(np.diff(g, prepend=0.0) * tt))
    # TPOT over each cohort's output lengths
    o, w_o = _points(osl)
    keep = o > 1
    o, w_o = o[keep], w_o[keep] / max(w_o[keep].sum(), 1e-12)
    start = np.interp(km, kk, tt)
    end = np.interp(km[:, None] + (o[None, :] - 1.0), kk, tt)
    tpot = (end - start[:, None]) / (o[None, :] - 1.0)
    w = mm[:, None] * w_o[None, :]
    ttft_m = np.array(ttft)  # cohorts x input lengths
    lat = (ttft_m @ i_w_r)[:, None] + end - start[:, None]
    return OpenRun(
        duration_s=duration,
        ttft_s=ttft_m.ravel(),
        tpot_s=tpot.ravel(),
        tpot_w=w.ravel(),
        ttft_w=(mm[:, None] * i_w_r[None, :]).ravel(),
        itl_s=np.array(itl),
        itl_w=np.array(itl_w),
        queued_at_last_arrival=float(queued_at_last),
        latency_mean_s=(
            float(np.sum(lat * w) / np.sum(w)) if np.sum(w) > 0 else float(ttft_m @ i_w_r @ mm / n)
        ),
        batch_mean=busy / max(t, 1e-12),
    )
