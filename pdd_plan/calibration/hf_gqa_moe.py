"""The FFN of GQA mixture-of-experts configs that are not Qwen3-MoE: Mixtral, Llama-4, gpt-oss.

Each names the same facts with its own keys; this module reads them into the profile's FFN
section (and the routed experts' dtype where the checkpoint quantizes them), each with the keys
it came from. A profile counts layers, not their order: Llama-4's MoE layers interleaved with
dense ones (`interleave_moe_layer_step`) cost what the same number of leading dense layers
costs, so they are written as `first_dense_layers` and the source says so.
"""

from __future__ import annotations

from typing import Any

from pdd_plan.common.errors import InputError

ARCHS = ("MixtralForCausalLM", "Llama4ForConditionalGeneration", "GptOssForCausalLM")


def text_config(cfg: dict, arch: str) -> dict:
    """The language model's config (Llama-4 nests it under `text_config`)."""
    if arch == "Llama4ForConditionalGeneration" and isinstance(cfg.get("text_config"), dict):
        return {**cfg["text_config"], "architectures": cfg.get("architectures")}
    return cfg


def _int(cfg: dict, key: str, file: str, minimum: int = 1) -> int:
    v = cfg.get(key)
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= minimum
    if not ok:
        raise InputError(
            file, key, f"must be a whole number >= {minimum} (got {v!r})", "fix config.json"
        )
    return int(v)  # type: ignore[arg-type]


def ffn(cfg: dict, arch: str, file: str) -> dict[str, Any]:
    """The FFN section of one of ARCHS."""
    experts = _int(cfg, "num_local_experts", file)
    k = _int(cfg, "num_experts_per_tok", file)
    layers = _int(cfg, "num_hidden_layers", file)
    inter = _int(cfg, "intermediate_size", file)
    moe = {"num_experts": experts, "num_shared_experts": 0, "experts_per_token": k}
    moe["moe_intermediate_size"] = inter
    keys = f"num_local_experts {experts}, num_experts_per_tok {k}, intermediate_size {inter}"
    if arch != "Llama4ForConditionalGeneration":
        return {
            "first_dense_layers": 0,
            "moe": moe,
            "source": f"{file}: MoE in every layer, {keys} (one expert's width), no shared expert.",
        }
    step = _int(cfg, "interleave_moe_layer_step", file)
    if layers % step:
        raise InputError(file, "interleave_moe_layer_step", f"{step} does not divide layers", "")
    moe["num_shared_experts"] = 1
    dense = layers - layers // step
    return {
        "first_dense_layers": dense,
        "intermediate_size": _int(cfg, "intermediate_size_mlp", file),
        "moe": moe,
        "source": f"{file}: interleave_moe_layer_step {step}: {layers // step} MoE layers and "
        f"{dense} dense ones (written as leading dense layers: the perf model counts layers, "
        f"not their order); {keys}, one shared expert of the same width (Llama-4's "
        f"shared_expert); dense layers intermediate_size_mlp {cfg['intermediate_size_mlp']}.",
    }


def expert_dtype(cfg: dict, file: str) -> tuple[str | None, str]:
    """(routed-expert dtype, why) when quantization_config quantizes only the experts."""
    q = cfg.get("quantization_config") or {}
    if str(q.get("quant_method", "")).lower() != "mxfp4":
        return None, ""
    return "fp4", (
        f"{file}: quantization_config quant_method mxfp4 for the routed experts (the "
        "modules_to_not_convert, attention, router, embeddings and LM head, stay bf16)"
    )


def attention_note(cfg: dict, arch: str) -> str:
    """What the GQA profile does not represent of this config's attention (assumptions)."""
    if arch == "GptOssForCausalLM" and cfg.get("sliding_window"):
        n = sum(t == "sliding_attention" for t in cfg.get("layer_types") or [])
        return (
            f" Assumption: the {n} sliding-window layers (sliding_window "
            f"{cfg['sliding_window']}) are counted as full attention (KV bytes and attention "
            "FLOPs are over-stated at long context)."
        )
    if arch == "Llama4ForConditionalGeneration" and cfg.get("attention_chunk_size"):
        return (
            f" Assumption: chunked local attention (attention_chunk_size "
            f"{cfg['attention_chunk_size']}, 3 of 4 layers) is counted as full attention."
        )
    return ""
