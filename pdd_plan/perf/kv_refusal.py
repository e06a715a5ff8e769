"""Why a batch's KV does not fit an instance, per GPU, and what would fit it."""

from __future__ import annotations

import dataclasses

from pdd_plan.common.errors import InputError
from pdd_plan.perf import layers


def dp_alternative(inst):
    """The same GPUs with data-parallel attention that keeps one copy of each request's KV
    (attention TP no wider than the KV heads; every rank for a latent), or None."""
    a = inst.model.attention
    if inst.kv_replication <= 1:
        return None
    width = min(inst.tp, a.num_kv_heads) if a.kind == "gqa" else 1
    dp = inst.tp // width
    if dp <= inst.dp or inst.tp % dp:
        return None
    try:
        return dataclasses.replace(inst, dp=dp)
    except InputError:
        return None


def kv_refusal(inst, batch: int, ctx: float) -> tuple[str, str]:
    """(what is wrong, how to fix it) for `batch` requests of `ctx` tokens on `inst`: the KV
    each GPU must hold against its pool, and where TP replicates the KV (TP wider than the KV
    heads, or a latent on every rank) the DP-attention layout that keeps one copy."""
    cap = inst.kv_max_batch(ctx)
    per_token = float(layers.kv_bytes(inst.model, ctx))  # one request's KV, one copy
    per_gpu_need = batch * per_token * inst.kv_replication / inst.n_gpus / 1e9
    per_gpu_pool = inst.kv_pool_bytes * inst.kv_replication / inst.n_gpus / 1e9
    what = (
        f"{batch} requests at {ctx:,.0f} tokens need {per_gpu_need:,.1f} GB of KV on each of "
        f"the {inst.n_gpus} GPUs, whose pool holds {per_gpu_pool:,.1f} GB ({cap} requests)"
    )
    alt = dp_alternative(inst)
    if inst.kv_replication > 1:
        what += f"; TP {inst.attn_tp} keeps {inst.kv_replication:g} copies of each request's KV"
    if alt is not None:
        fix = (
            f"use --dp-attention (--dp {alt.dp}: one copy, up to {alt.kv_max_batch(ctx)} "
            f"requests), --batch <= {cap} or more GPUs"
        )
    else:
        fix = f"use --batch <= {cap} or more GPUs"
    return what, fix
