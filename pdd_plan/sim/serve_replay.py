"""Replay of one aggregated instance serving a benchmark client, step by step.

The client is `bench_serving` / `vllm bench serve`: closed loop at a concurrency C (C requests
sent at t = 0, each completion sends the next until `num_prompts` are sent) or open loop
(Poisson arrivals at a rate). The engine runs iterations as its scheduler does
(perf/serve_engine.py): admission up to its running-request limit and the KV pool (live
contexts), then either a prefill batch apart from the decodes (`separate`, SGLang) or every
running decode plus prompt chunks first come first served in one step (`mixed`, vLLM,
TensorRT-LLM). A request sent reaches the scheduler at its next poll: every
`recv_interval` decode steps, at once after a step with prompt tokens or while the engine is
idle (SGLang's scheduler_recv_skipper). Step times come from perf/serve_step.py, the same as the analytic serve phase,
so the two differ only in how they treat queueing, batching and the run's start and end.

What it reports is what the benchmark prints: duration from the first request to the last
completion, output and total tokens per second over it, per-request TTFT and TPOT
((latency - TTFT) / (output - 1)), the inter-token gaps, and the mean requests in flight
(sum of latencies / duration, as bench_serving's `concurrency`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve_engine import ServeEngine
from pdd_plan.perf.serve_lengths import Lengths
from pdd_plan.perf.serve_step import StepCost

MAX_STEPS = 5_000_000  # a bound on the loop; a run this long is refused before it starts


@dataclass(frozen=True)
class ReplayResult:
    duration_s: float
    output_tokens: float
    input_tokens: float
    ttft_s: np.ndarray  # per request
    tpot_s: np.ndarray  # per request with more than one output token
    itl_s: np.ndarray  # every inter-token gap
    latency_s: np.ndarray
    steps: int

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s

    @property
    def total_tokens_per_s(self) -> float:
        return (self.output_tokens + self.input_tokens) / self.duration_s

    @property
    def in_flight_mean(self) -> float:
        return float(self.latency_s.sum() / self.duration_s)


class _State:
    """Per-request arrays of one replay."""

    def __init__(self, isl: np.ndarray, osl: np.ndarray) -> None:
        n = len(isl)
        self.isl, self.osl = isl.astype(float), np.maximum(osl, 1).astype(float)
        self.arrival = np.full(n, np.nan)
        self.done_prompt = np.zeros(n)
        self.generated = np.zeros(n)
        self.first = np.full(n, np.nan)
        self.last = np.zeros(n)
        self.finish = np.full(n, np.nan)
        self.gaps: list[np.ndarray] = []


def _plan_prompt(st: _State, prefilling: list[int], budget: float) -> list[tuple[int, float]]:
    """Prompt tokens of this step, first come first served under the token budget."""
    out = []
    for i in prefilling:
        if budget <= 0:
            break
        take = min(st.isl[i] - st.done_prompt[i], budget)
        out.append((i, take))
        budget -= take
    return out


def _step_time(cost: StepCost, st: _State, dec: list[int], chunks) -> float:
    b = len(dec)
    ctx = float(np.mean(st.isl[dec] + st.generated[dec])) if b else 0.0
    if not chunks:
        return cost.decode(b, ctx)
    new = np.array([c[1] for c in chunks])
    cached = np.array([st.done_prompt[c[0]] for c in chunks])
    return cost.time(b, ctx, len(chunks), float(new.mean()), float(cached.mean()))


def _advance(st: _State, dec: list[int], chunks, now: float) -> list[int]:
    """Apply a step that ended at `now`; the requests that finished."""
    done = []
    if dec:
        d = np.array(dec)
        st.gaps.append(now - st.last[d])
        st.generated[d] += 1
        st.last[d] = now
        done += [i for i in dec if st.generated[i] >= st.osl[i]]
    for i, take in chunks:
        st.done_prompt[i] += take
        if st.done_prompt[i] >= st.isl[i]:
            st.first[i] = st.last[i] = now
            st.generated[i] = 1
            if st.osl[i] <= 1:
                done.append(i)
    for i in done:
        st.finish[i] = now
    return done


def replay(
    inst: Instance,
    engine: ServeEngine,
    isl: Lengths,
    osl: Lengths,
    num_prompts: int,
    concurrency: int | None = None,
    rate: float | None = None,
    seed: int = 0,
    cost: StepCost | None = None,
) -> ReplayResult:
    """Replay `num_prompts` requests (lengths drawn with `seed`) through the instance."""
    rng = np.random.default_rng(seed)
    st = _State(isl.sample(rng, num_prompts), osl.sample(rng, num_prompts))
    cost = cost or StepCost(inst, engine)
    kv_tokens = inst.kv_capacity_tokens
    cap = engine.max_running or num_prompts
    if rate is not None:
        times = np.cumsum(rng.exponential(1.0 / rate, num_prompts))
        times -= times[0]
    else:
        times = None
    waiting: deque[int] = deque()
    inbox: list[int] = []  # sent, not yet received by the scheduler
    running: list[int] = []
    sent, now, steps, polled = 0, 0.0, 0, engine.recv_interval

    def send(t: float) -> None:
        nonlocal sent
        st.arrival[sent] = t
        inbox.append(sent)
        sent += 1

    if times is None:
        for _ in range(min(concurrency or 1, num_prompts)):
            send(0.0)
    while steps < MAX_STEPS:
        if times is not None:
            while sent < num_prompts and times[sent] <= now:
                send(times[sent])
        if polled >= engine.recv_interval or not running:  # the scheduler's poll
            waiting.extend(inbox)
            inbox.clear()
            polled = 0
        live = float(np.sum(st.isl[running] + st.generated[running])) if running else 0.0
        while waiting and len(running) < cap and live + st.isl[waiting[0]] <= kv_tokens:
            i = waiting.popleft()
            running.append(i)
            live += st.isl[i]
        if not running:
            if times is not None and sent < num_prompts:
                now = max(now, times[sent])
                continue
            break
        prefilling = [i for i in running if st.done_prompt[i] < st.isl[i]]
        decoding = [i for i in running if st.done_prompt[i] >= st.isl[i]]
        if engine.schedule == "separate" and prefilling:
            dec, chunks = [], _plan_prompt(st, prefilling, engine.step_tokens)
        else:
            budget = engine.step_tokens - len(decoding) if engine.schedule == "mixed" else 0
            dec, chunks = decoding, _plan_prompt(st, prefilling, budget)
        now += _step_time(cost, st, dec, chunks)
        steps += 1
        # a decode step counts 1 toward the next poll, a step with prompt tokens the interval
        polled += 1 if not chunks else engine.recv_interval
        for i in _advance(st, dec, chunks, now):
            running.remove(i)
            if times is None and sent < num_prompts:
                send(now)
    ok = ~np.isnan(st.finish)
    lat = st.finish[ok] - st.arrival[ok]
    multi = ok & (st.osl > 1)
    tpot = (st.finish[multi] - st.first[multi]) / (st.osl[multi] - 1)
    start = float(np.nanmin(st.arrival))
    return ReplayResult(
        duration_s=float(np.nanmax(st.finish) - start),
        output_tokens=float(st.osl[ok].sum()),
        input_tokens=float(st.isl[ok].sum()),
        ttft_s=st.first[ok] - st.arrival[ok],
        tpot_s=tpot,
        itl_s=np.concatenate(st.gaps) if st.gaps else np.zeros(0),
        latency_s=lat,
        steps=steps,
    )
