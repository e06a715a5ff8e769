"""The steady state of one aggregated instance under a stream of requests, for a given mean
decode batch B (perf/serve.py solves for the B a concurrency or a rate sets).

Lengths I (prompt) and O (output) per request; E[O - 1] decode steps each (the first token
comes out of the step that finishes the prompt). Per decode step the batch needs
d = B E[I] / E[O - 1] prompt tokens to replace the requests it finishes.

mixed (vLLM, TensorRT-LLM): every step carries the B decodes and up to c = budget - B prompt
  tokens. Prompts come one request at a time, so a step that carries prompt carries
  q = min(c, max(d, E[I])) tokens; a share f = d / q of the steps do.
  step = f t(B, q) + (1 - f) t(B, 0);  TPOT = step.
separate (SGLang): a prefill batch runs between decode steps whenever a request is waiting.
  Completions per decode step are about Poisson with mean a = B / E[O - 1]; the scheduler
  polls for requests every R decode steps (--scheduler-recv-interval), so the prompts of the
  requests sent over R steps are prefilled together, q = min(chunk, E[I] aR / (1 - e^-aR)),
  in d / q prefill batches per decode step (each pays its launch cost once: fewer, larger
  batches as R grows). TPOT = t(B, 0) + (d / q) t_prefill(q). A request sent while others
  decode waits (R - 1) / 2 decode steps for the poll.
TTFT = the wait for the step in progress (mixed; open loop), the queue for prompt capacity
(M/G/1 on prompt tokens: rho = d / capacity per step) and the prompt's own steps.
Requests/s X = B / (E[O - 1] TPOT); in the engine: B + X TTFT (Little).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdd_plan.perf.serve_engine import ServeEngine
from pdd_plan.perf.serve_lengths import Lengths
from pdd_plan.perf.serve_step import StepCost


@dataclass(frozen=True)
class Steady:
    batch: float  # B: mean requests decoding
    tpot_s: float  # mean time per decode step seen by a decoding request
    cycle_s: float  # mean time per decode step, every request's prompt work included
    t_decode_s: float  # a decode-only step
    t_prompt_s: float  # the extra of a step that carries prompt (mixed) / a prefill batch
    prompt_share: float  # f: prompt-carrying steps (mixed) or prefill batches per decode step
    prompt_tokens: float  # q
    ttft_s: float  # mean, from arrival at the engine
    ttft_fixed_s: float  # the part of TTFT that does not depend on the prompt's length
    prompt_step_s: float  # time of one prompt step a request's own chunks take
    prompt_capacity: float  # prompt tokens one such step carries
    requests_per_s: float
    in_engine: float  # B + X TTFT
    queue_s: float  # mean wait for prompt capacity
    arrivals_per_step: float  # requests sent within one step: their prompts share it
    rho: float = 0.0  # utilization of the prompt capacity (the share of arrivals that wait)
    long_step_s: float = 0.0  # open loop: the long step kind an arrival may land in
    long_share: float = 0.0  # the share of time in it (length-biased landing)
    poll_s: float = 0.0  # separate: the longest wait for the scheduler's poll (uniform)


def decode_context(isl: Lengths, osl: Lengths) -> float:
    """Mean context of a decoding request, weighted by its decode steps."""
    o1 = max(osl.mean - 1.0, 1e-9)
    return isl.mean + osl.mean_of(lambda v: (v - 1.0) ** 2) / (2.0 * o1)


def interp(fn, b: float) -> float:
    """fn at a fractional batch, linear between the whole batches around it."""
    lo = math.floor(b)
    if lo == b or b < 1:
        return fn(max(b, 0.0) if b < 1 else b)
    w = b - lo
    return (1 - w) * fn(lo) + w * fn(lo + 1)


def _mg1_wait(rho: float, s_mean: float, s2: float) -> float:
    """Pollaczek-Khinchine mean wait for service moments (s_mean, s2) at utilization rho."""
    if rho >= 1.0:
        return math.inf
    return rho * s2 / (2.0 * max(s_mean, 1e-12) * (1.0 - rho))


def prompt_passes(isl: Lengths, a: float, cap: float) -> float:
    """E[ceil((J E[I] + I) / cap)]: the prompt steps a request waits for its own prompt and the
    J prompts sent before it in the same step, J uniform over 0..K, K ~ Poisson(a) others."""
    kmax = int(a + 6.0 * math.sqrt(a) + 3.0)
    k = np.arange(kmax + 1)
    pk = np.exp(k * math.log(max(a, 1e-300)) - a - np.array([math.lgamma(x + 1) for x in k]))
    out = 0.0
    for kk, p in zip(k, pk):
        j = np.arange(kk + 1)[:, None]
        passes = np.ceil((j * isl.mean + isl.values[None, :]) / cap).mean(axis=0)
        out += p * float(passes @ isl.weights)
    return out / max(float(pk.sum()), 1e-12)


def _prompt_chunks(cost: StepCost, b: float, ctx: float, q: float, e_i: float) -> float:
    """t(B, q): a decode step at batch b that also carries q prompt tokens."""
    if q >= e_i:
        return interp(lambda x: cost.time(x, ctx, q / e_i, e_i, 0.0), b)
    return interp(lambda x: cost.time(x, ctx, 1.0, q, e_i / 2.0 - q / 2.0), b)


def mixed(
    cost: StepCost, eng: ServeEngine, isl: Lengths, osl: Lengths, b: float, others: float
) -> Steady:
    e_i, o1 = isl.mean, max(osl.mean - 1.0, 1e-9)
    ctx = decode_context(isl, osl)
    d = b * e_i / o1
    cap = max(eng.step_tokens - b, 1.0)
    q = min(cap, max(d, e_i))
    f = min(d / q, 1.0)
    t_d = interp(lambda x: cost.decode(x, ctx), b)
    t_m = _prompt_chunks(cost, b, ctx, q, e_i)
    step = f * t_m + (1 - f) * t_d
    tpot = t_d + others * (step - t_d)
    x = b / (o1 * tpot)  # each decoding request makes a token per TPOT
    # prompt capacity as a server: each request needs I / cap steps of it
    rho = d / cap
    s1, s2 = e_i / cap, isl.second_moment / cap**2
    wait = _mg1_wait(rho, s1, s2) * t_m if rho > 0 else 0.0
    a = x * step
    own = prompt_passes(isl, a, cap) * t_m
    # open loop: the step under way when the request arrives (closed loop: it is sent as a
    # step ends and the next one takes it)
    # length-biased: E[step^2] / (2 E[step])
    long_share = f * t_m / step if others >= 1.0 else 0.0
    residual = (f * t_m**2 + (1 - f) * t_d**2) / (2.0 * step) if others >= 1.0 else 0.0
    ttft = residual + wait + own
    return Steady(
        b, tpot, step, t_d, t_m - t_d, f, q, ttft, residual + wait, t_m, cap, x, b + x * ttft,
        wait, a, min(rho, 1.0), t_m, long_share,
    )  # fmt: skip


def separate(
    cost: StepCost, eng: ServeEngine, isl: Lengths, osl: Lengths, b: float, others: float
) -> Steady:
    e_i, o1 = isl.mean, max(osl.mean - 1.0, 1e-9)
    ctx = decode_context(isl, osl)
    d = b * e_i / o1
    chunk = float(eng.step_tokens)
    a = b / o1  # completions (hence new requests) per decode step
    r = float(eng.recv_interval)
    ar = a * r  # requests sent between two polls: received, and prefilled, together
    per_batch = e_i * ar / (-math.expm1(-ar)) if ar > 1e-9 else e_i
    q = min(chunk, per_batch)
    n_batches = d / q
    t_d = interp(lambda x: cost.decode(x, ctx), b)
    t_p = cost.prefill_tokens(q, e_i, cached=max(e_i - q, 0.0) / 2.0)
    cycle = t_d + n_batches * t_p
    tpot = t_d + others * (cycle - t_d)
    x = b / (o1 * tpot)  # each decoding request makes a token per TPOT
    # a request's own prefill batch holds its prompt and those sent with it (size-biased)
    seen = min(chunk, e_i * (1.0 + ar))
    t_seen = cost.prefill_tokens(seen, e_i, cached=max(e_i - seen, 0.0) / 2.0)
    own = prompt_passes(isl, ar, chunk) * t_seen
    rho = min(x * isl.mean * (t_p / q), 0.999999) if q > 0 else 0.0
    s1 = e_i / q * t_p
    s2 = isl.second_moment / q**2 * t_p**2
    wait = _mg1_wait(rho, s1, s2) if e_i > chunk else 0.0
    # closed loop: a request is sent as a decode step ends, and its prefill batch runs next;
    # open loop: it also waits for the decode step under way
    # open loop, length-biased: in a prefill batch (time share rho) or a decode step
    long_share = rho if others >= 1.0 else 0.0
    residual = (rho * t_p + (1.0 - rho) * t_d) / 2.0 if others >= 1.0 else 0.0
    # the poll: R - 1 decode steps apart while others decode (an idle engine polls at once)
    poll = (r - 1.0) * t_d * min(1.0, b * others)
    ttft = residual + wait + poll / 2.0 + own
    return Steady(
        b, tpot, cycle, t_d, t_p, n_batches, q, ttft, residual + wait + poll / 2.0, t_seen, chunk,
        x, b + x * ttft, wait, ar, rho, t_p, long_share, poll,
    )  # fmt: skip


def steady(
    cost: StepCost, eng: ServeEngine, isl: Lengths, osl: Lengths, b: float, n: float | None
) -> Steady:
    """The steady state at decode batch b with n requests in the engine (closed loop: a
    request's own next prompt never interrupts it, so it sees the prompt work of (n - 1) / n
    of them) or None (open loop, Poisson arrivals: all of it, and the step under way)."""
    others = 1.0 if n is None else max(n - 1.0, 0.0) / max(n, 1.0)
    fn = separate if eng.schedule == "separate" else mixed
    return fn(cost, eng, isl, osl, b, others)
