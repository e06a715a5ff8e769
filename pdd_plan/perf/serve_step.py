"""One serving step's time, shared by `perf --phase serve` and the closed-loop replay.

A step is `roofline.mixed_pass` (decode tokens of the running requests, prompt chunks, or
both) and the host work of the tokens it streams, which a process beside the GPU worker does
in parallel: step = max(GPU pass, tokens streamed x host cost per token). A step with prompt
tokens on an engine that runs such steps eager (no CUDA graph) takes at least the host's
launches of the pass (fixed_cost.launches_per_pass x engines.yaml eager.per_launch_us): the
host issues them ahead of the GPU, so the longer of the two binds. Memoized on rounded
arguments (a replay asks for the same few thousand shapes again and again): contexts, prompt
tokens per chunk and per step to 1/64 of their size (at least 16), cached tokens to 256.
"""

from __future__ import annotations

import math

from pdd_plan.perf import fixed_cost, roofline
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve_engine import ServeEngine


def _round_rel(x: float, floor: float) -> float:
    """x rounded to a 1/64 step of its own size (at least `floor`)."""
    if x <= 0:
        return 0.0
    if x < floor:  # a short prompt (a few tokens) stays itself: never rounded to nothing
        return float(max(round(x), 1))
    q = max(floor, 2.0 ** math.floor(math.log2(x)) / 64.0)
    return round(x / q) * q


class StepCost:
    """Step times of one instance under one engine's host costs."""

    def __init__(self, inst: Instance, engine: ServeEngine) -> None:
        self.inst = inst
        self.host_per_token_s = engine.host_per_token_s
        # the host's launching of an eager pass: the floor of a step with prompt tokens
        self.eager_pass_s = engine.eager_launch_s * fixed_cost.launches_per_pass(inst)
        self._memo: dict[tuple, float] = {}

    def time(
        self,
        decode: float = 0.0,
        context: float = 0.0,
        seqs: float = 0.0,
        new: float = 0.0,
        cached: float = 0.0,
    ) -> float:
        """Seconds of a step with `decode` running requests at mean `context` and `seqs` prompt
        chunks of `new` tokens each on `cached` ones."""
        b = float(round(decode))
        has = seqs > 0 and new > 0
        per = _round_rel(new, 16.0) if has else 0.0
        total = _round_rel(seqs * new, 16.0) if has else 0.0
        key = (
            b,
            _round_rel(context, 16.0) if b else 0.0,
            total / per if has else 0.0,
            per,
            _round_rel(cached, 256.0) if has else 0.0,
        )
        hit = self._memo.get(key)
        if hit is None:
            if key[0] == 0 and key[2] == 0:
                hit = 0.0
            else:
                p = roofline.mixed_pass(
                    self.inst,
                    decode_batch=key[0],
                    decode_context=key[1],
                    prefill_seqs=key[2],
                    prefill_new=key[3],
                    prefill_cached=key[4],
                )
                hit = max(p.total_s, (key[0] + key[2]) * self.host_per_token_s)
                if key[2]:
                    hit = max(hit, self.eager_pass_s)
            self._memo[key] = hit
        return hit

    def decode(self, b: float, context: float) -> float:
        return self.time(decode=b, context=context)

    def prefill_tokens(self, tokens: float, prompt: float, cached: float = 0.0) -> float:
        """A pure prefill step of `tokens` prompt tokens from prompts of `prompt` tokens
        (whole prompts when tokens >= prompt, one chunk of it otherwise)."""
        if tokens <= 0:
            return 0.0
        if tokens >= prompt:
            return self.time(seqs=tokens / prompt, new=prompt)
        return self.time(seqs=1.0, new=tokens, cached=cached)
