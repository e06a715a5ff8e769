"""Build a model profile from a HuggingFace `config.json` (the architecture facts perf needs).

Supported: LlamaForCausalLM, Qwen3ForCausalLM (GQA), Qwen3MoeForCausalLM (GQA + MoE), Mixtral,
Llama-4 and gpt-oss (GQA + MoE, hf_gqa_moe.py),
DeepseekV3ForCausalLM (MLA + MoE; Kimi-K2 ships this architecture too), DeepseekV32ForCausalLM
(MLA + DSA indexer) and DeepseekV4ForCausalLM (compressed CSA/HCA attention). Every section
gets a `source:` naming the config file and the keys it came from; the few engine choices that
are not in a config (KV dtype, page size) say so.
"""

from __future__ import annotations

from typing import Any

from pdd_plan.calibration import hf_gqa_moe
from pdd_plan.calibration.json_fields import count
from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema.io import parse
from pdd_plan.inputs.schema.model import ModelProfile

GQA_ARCHS: tuple[str, ...] = (
    "LlamaForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "MistralForCausalLM",
)
GQA_ARCHS += hf_gqa_moe.ARCHS
MLA_ARCHS = ("DeepseekV3ForCausalLM", "KimiK2ForCausalLM")
SUPPORTED = (*GQA_ARCHS, *MLA_ARCHS, "DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM")
# Far above any model's widths, layers, vocabularies and expert counts (about 1e6 at most).
MAX_DIMENSION = 1e9


def _need(cfg: dict, key: str, file: str) -> Any:
    if cfg.get(key) is None:
        raise InputError(file, key, "missing from config.json", "give the model's full config.json")
    return cfg[key]


def _count(cfg: dict, key: str, file: str, default: int | None = None, minimum: int = 1) -> int:
    """A whole number >= `minimum` from the config (`default` when the key is absent): a 0,
    a negative, a fraction, a string, a boolean or 1e300 is named here rather than dividing by
    zero or overflowing later."""
    v = cfg.get(key)
    if v is None and default is not None:
        return default
    v = _need(cfg, key, file)
    return count(v, file, key, "fix config.json", lo=minimum, hi=MAX_DIMENSION)


def _kv_heads(cfg: dict, file: str, heads: int, default: int | None = None) -> int:
    """num_key_value_heads: at most the query heads, and (GQA) a divisor of them."""
    kv = _count(cfg, "num_key_value_heads", file, default=default)
    if kv > heads or heads % kv:
        raise InputError(
            file,
            "num_key_value_heads",
            f"{kv} does not divide num_attention_heads {heads} into whole groups"
            + (" (more KV heads than query heads)" if kv > heads else ""),
            "fix config.json",
        )
    return kv


def _maybe_count(cfg: dict, key: str, file: str) -> int | None:
    """An optional count (absent or null: None)."""
    return None if cfg.get(key) is None else _count(cfg, key, file)


def _architecture(cfg: dict, file: str) -> str:
    """`architectures[0]`, a supported class name."""
    archs = cfg.get("architectures")
    ok = isinstance(archs, list) and archs and isinstance(archs[0], str)
    arch = archs[0] if ok else None  # type: ignore[index]
    if arch not in SUPPORTED:
        got = (
            f"unsupported architecture '{arch}'"
            if ok
            else f"must be a list of class names (got {archs!r})"[:200]
        )
        raise InputError(
            file,
            "architectures",
            got,
            f"supported: {', '.join(SUPPORTED)}; write the profile by hand for others",
        )
    return arch


def _flag(cfg: dict, key: str, file: str) -> bool:
    v = cfg.get(key, False)
    if not isinstance(v, bool):
        raise InputError(file, key, f"must be true or false (got {v!r})"[:200], "fix config.json")
    return v


def _ratios(cfg: dict, file: str) -> list[int]:
    r = _need(cfg, "compress_ratios", file)
    if not isinstance(r, list) or not all(type(x) is int and x >= 0 for x in r):
        raise InputError(file, "compress_ratios", "must be a list of whole numbers >= 0", "")
    return r


def _weights(cfg: dict, file: str) -> dict:
    q = cfg.get("quantization_config") or {}
    if not isinstance(q, dict):
        raise InputError(file, "quantization_config", "must be a JSON object", "fix config.json")
    method = str(q.get("quant_method", "")).lower()
    exp, exp_why = hf_gqa_moe.expert_dtype(cfg, file)
    if exp is not None:
        return {"dtype": "bf16", "expert_dtype": exp, "source": f"{exp_why}."}
    if method == "fp8":
        dtype, why = "fp8", "quantization_config quant_method fp8 for the linear layers"
    elif method:
        raise InputError(
            file,
            "quantization_config",
            f"quant_method '{method}' is not supported",
            "import the BF16 or FP8 config, then set weights.dtype by hand",
        )
    else:
        tdt = str(cfg.get("torch_dtype", "bfloat16"))
        if tdt not in ("bfloat16", "float16"):
            raise InputError(file, "torch_dtype", f"'{tdt}' is not supported", "use bf16 weights")
        dtype, why = "bf16", f"torch_dtype {tdt}, no quantization_config (2 bytes per weight)"
    out: dict[str, Any] = {"dtype": dtype}
    if cfg.get("expert_dtype"):
        exp = str(cfg["expert_dtype"]).lower()
        if exp not in ("bf16", "fp8", "fp4"):
            raise InputError(file, "expert_dtype", f"'{exp}' is not supported", "bf16, fp8, fp4")
        out["expert_dtype"] = exp
        why += f"; expert_dtype {exp} for the routed experts"
    out["source"] = f"{file}: {why}; embeddings and LM head bf16."
    return out


def _moe(cfg: dict, file: str, experts_key: str, shared_key: str | None) -> dict:
    moe = {
        "num_experts": _count(cfg, experts_key, file),
        "num_shared_experts": _count(cfg, shared_key, file, 0, 0) if shared_key else 0,
        "experts_per_token": _count(cfg, "num_experts_per_tok", file),
        "moe_intermediate_size": _count(cfg, "moe_intermediate_size", file),
    }
    if moe["experts_per_token"] > moe["num_experts"]:
        raise InputError(
            file,
            "num_experts_per_tok",
            f"{moe['experts_per_token']} is above the {moe['num_experts']} experts",
            "fix config.json",
        )
    return moe


def profile_from_hf(cfg: dict, name: str, file: str = "config.json") -> ModelProfile:
    """A validated ModelProfile from a parsed config.json; `file` names it in the sources."""
    if not isinstance(cfg, dict):
        raise InputError(file, None, "config.json is not a JSON object", "give a config.json")
    arch = _architecture(cfg, file)
    cfg = hf_gqa_moe.text_config(cfg, arch)
    layers = _count(cfg, "num_hidden_layers", file)
    hidden = _count(cfg, "hidden_size", file)
    heads = _count(cfg, "num_attention_heads", file)
    attn: dict[str, Any]
    ffn: dict[str, Any]
    if arch in GQA_ARCHS:
        kv_heads = _kv_heads(cfg, file, heads, default=heads)
        if cfg.get("head_dim") is None and hidden % heads:
            raise InputError(
                file,
                "hidden_size",
                f"{hidden} is not a multiple of num_attention_heads {heads} (and no head_dim)",
                "give head_dim, or fix config.json",
            )
        head_dim = _count(cfg, "head_dim", file, default=hidden // heads)
        hd_src = "head_dim" if cfg.get("head_dim") else f"hidden_size / heads = {head_dim}"
        attn = {
            "kind": "gqa",
            "num_heads": heads,
            "num_kv_heads": kv_heads,
            "head_dim": int(head_dim),
            "source": f"{file}: num_attention_heads {heads}, num_key_value_heads {kv_heads}, "
            f"{hd_src}." + hf_gqa_moe.attention_note(cfg, arch),
        }
        if arch in hf_gqa_moe.ARCHS:
            ffn = hf_gqa_moe.ffn(cfg, arch, file)
        elif arch == "Qwen3MoeForCausalLM":
            if _count(cfg, "decoder_sparse_step", file, default=1) != 1 or cfg.get(
                "mlp_only_layers"
            ):
                raise InputError(
                    file,
                    "mlp_only_layers",
                    "interleaved dense/MoE layers are not supported",
                    "write the profile by hand",
                )
            moe = _moe(cfg, file, "num_experts", None)
            ffn = {
                "first_dense_layers": 0,
                "moe": moe,
                "source": f"{file}: MoE in every layer (decoder_sparse_step 1, no mlp_only_layers): "
                f"num_experts {moe['num_experts']}, num_experts_per_tok "
                f"{moe['experts_per_token']}, moe_intermediate_size "
                f"{moe['moe_intermediate_size']}, no shared expert.",
            }
        else:
            inter = _count(cfg, "intermediate_size", file)
            ffn = {
                "intermediate_size": inter,
                "source": f"{file}: dense SwiGLU FFN, intermediate_size {inter}.",
            }
        kv_dtype, kv_src = "bf16", "assumption: BF16 KV, the engine default for this checkpoint."
        page = 1
    else:
        if _count(cfg, "moe_layer_freq", file, default=1) != 1:
            raise InputError(file, "moe_layer_freq", "must be 1", "write the profile by hand")
        moe = _moe(cfg, file, "n_routed_experts", "n_shared_experts")
        first_dense = _count(cfg, "first_k_dense_replace", file, default=0, minimum=0)
        ffn = {
            "first_dense_layers": first_dense,
            "moe": moe,
            "source": f"{file}: first_k_dense_replace {first_dense}, n_routed_experts "
            f"{moe['num_experts']}, n_shared_experts {moe['num_shared_experts']}, "
            f"num_experts_per_tok {moe['experts_per_token']}, moe_intermediate_size "
            f"{moe['moe_intermediate_size']}.",
        }
        if first_dense:
            ffn["intermediate_size"] = _count(cfg, "intermediate_size", file)
            ffn["source"] += f" Dense layers: intermediate_size {ffn['intermediate_size']}."
        q_lora = _maybe_count(cfg, "q_lora_rank", file)
        if arch == "DeepseekV4ForCausalLM":
            ratios = _ratios(cfg, file)
            attn = {
                "kind": "compressed",
                "num_heads": heads,
                "num_kv_heads": _kv_heads(cfg, file, heads),
                "head_dim": _count(cfg, "head_dim", file),
                "qk_rope_head_dim": _count(cfg, "qk_rope_head_dim", file),
                "q_lora_rank": q_lora,
                "o_groups": _maybe_count(cfg, "o_groups", file),
                "o_lora_rank": _maybe_count(cfg, "o_lora_rank", file),
                "index_n_heads": _count(cfg, "index_n_heads", file),
                "index_head_dim": _count(cfg, "index_head_dim", file),
                "index_topk": _count(cfg, "index_topk", file),
                "sliding_window": _count(cfg, "sliding_window", file),
                "compress_ratios": ratios,
                "source": f"{file}: compressed attention (num_key_value_heads, head_dim, "
                "qk_rope_head_dim, q_lora_rank, o_groups, o_lora_rank, index_n_heads, "
                f"index_head_dim, index_topk, sliding_window); compress_ratios copied whole "
                f"({len(ratios)} entries: {ratios.count(4)} CSA, {ratios.count(128)} HCA).",
            }
            kv_dtype = "fp8"
            kv_src = (
                "hardware.md §4.2 (SGLang DSV4PoolConfigurator): compressed KV rows are FP8 nope "
                "+ BF16 rope + 8 B scale; FP8 indexer keys."
            )
            page = 128
        else:
            attn = {
                "kind": "dsa" if arch == "DeepseekV32ForCausalLM" else "mla",
                "num_heads": heads,
                "q_lora_rank": q_lora,
                "kv_lora_rank": _count(cfg, "kv_lora_rank", file),
                "qk_nope_head_dim": _count(cfg, "qk_nope_head_dim", file),
                "qk_rope_head_dim": _count(cfg, "qk_rope_head_dim", file),
                "v_head_dim": _count(cfg, "v_head_dim", file),
                "source": f"{file}: MLA with num_attention_heads {heads}, q_lora_rank {q_lora}, "
                f"kv_lora_rank {cfg.get('kv_lora_rank')}, qk_nope_head_dim "
                f"{cfg.get('qk_nope_head_dim')}, qk_rope_head_dim {cfg.get('qk_rope_head_dim')}, "
                f"v_head_dim {cfg.get('v_head_dim')}.",
            }
            if attn["kind"] == "dsa":
                for k in ("index_n_heads", "index_head_dim", "index_topk"):
                    attn[k] = _count(cfg, k, file)
                attn["source"] += (
                    " DSA lightning indexer: index_n_heads, index_head_dim, index_topk."
                )
                kv_dtype = "fp8"
                kv_src = (
                    "hardware.md §4.1 (sglang pool_configurator.py): SGLang stores V3.2's latent "
                    "in the FlashMLA-FP8 layout (656 B/layer) plus FP8 indexer keys (132 B/layer)."
                )
            else:
                kv_dtype = "bf16"
                kv_src = "assumption: BF16 latent KV (kv_lora_rank + qk_rope_head_dim values)."
            page = 64
        attn = {k: v for k, v in attn.items() if v is not None}
    data = {
        "name": name,
        "display_name": name,
        "num_layers": layers,
        "hidden_size": hidden,
        "vocab_size": _count(cfg, "vocab_size", file),
        "tie_word_embeddings": _flag(cfg, "tie_word_embeddings", file),
        "attention": attn,
        "ffn": ffn,
        "weights": _weights(cfg, file),
        "kv_cache": {"dtype": kv_dtype, "source": kv_src},
        "page_size": page,
        "source": f"imported by pdd-plan profiles import-hf from {file} ({arch}): num_layers is "
        "num_hidden_layers (MTP layers excluded); hidden_size, vocab_size, tie_word_embeddings "
        f"from the same file. page_size {page}: the SGLang page size for this attention kind "
        "(runtime.md).",
    }

    return parse(ModelProfile, data, file, "fix config.json")
