"""The deployed engine's limits on an instance's running batch: the `engine:` section of a
scenario, each field the engine's launch flag and each overriding the default of
data/profiles/runtime/engines.yaml (SGLang's, the planner's engine).

```yaml
engine:
  max_running_requests: 256   # SGLang --max-running-requests, vLLM --max-num-seqs
  cuda_graph_max_batch: 128   # SGLang --cuda-graph-max-bs
  max_num_tokens: 8192        # vLLM --max-num-batched-tokens, TensorRT-LLM --max_num_tokens
```

A decode instance's batch is the smallest of its KV pool's capacity, these limits and the
TPOT target's; the planner's tables, the analytic check and the simulator read the same one
(perf/engine_limits.py).
"""

from pydantic import PositiveInt, field_validator

from pdd_plan.common import limits
from pdd_plan.inputs.schema.common import Strict


class EngineLimits(Strict):
    """The deployed engine's configured limits (omitted: the engine's defaults)."""

    max_running_requests: PositiveInt | None = None
    """Most requests one instance runs at once, over all its attention-DP ranks (SGLang
    `--max-running-requests`, divided among the ranks; vLLM `--max-num-seqs`; TensorRT-LLM
    `--max_batch_size`). Default: SGLang's, none (as many as the KV pool holds)."""
    cuda_graph_max_batch: PositiveInt | None = None
    """Largest decode batch one scheduler (one attention-DP rank) runs from a captured CUDA
    graph (SGLang `--cuda-graph-max-bs`); read as a cap, since a larger batch runs eager.
    Default: SGLang's, 256 at TP < 4 on a GPU under 160 GB, else 512."""
    max_num_tokens: PositiveInt | None = None
    """Tokens one forward pass of one scheduler may carry (vLLM `--max-num-batched-tokens`,
    TensorRT-LLM `--max_num_tokens`): a decode batch carries one per request. Default: SGLang's
    chunked-prefill size by GPU memory (8192 under 160 GB, 16384 above). The prefill
    instances' chunk is `search.prefill_chunk_tokens`."""

    @field_validator("max_running_requests", "cuda_graph_max_batch")
    @classmethod
    def _batch(cls, v: int | None) -> int | None:
        if v is not None and v > limits.value("BATCH"):
            raise ValueError(limits.exceeded("BATCH", v))
        return v

    @field_validator("max_num_tokens")
    @classmethod
    def _tokens(cls, v: int | None) -> int | None:
        if v is not None and v > limits.value("TOKENS"):
            raise ValueError(limits.exceeded("TOKENS", v))
        return v
