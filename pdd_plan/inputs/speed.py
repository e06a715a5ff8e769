"""The engine's speed against the perf model: GPU profiles whose every pass runs k times as
fast (a deployment's measured `speed_factor`, a draw of the perf error band, or the band's
median the plan stands on), and which factor a profile carries over the perf model's.

The plan's speed (`planned_speed`): the median of the perf error band's speed factor
(inputs/error_band.py: measured / predicted = 1 / (1 + bias)), or of the scenario's stated
`uncertainty.inputs.prefill_speed` / `decode_speed`. The draws' median inputs are then the
plan's inputs, so the headline is the draws' verdict at their medians. It errs neither way
on average (half the band is slower); at the perf model's own speed a plan leans the band's
bias (pessimistic by 0.7% for MoE on the band of 2026-12-07, optimistic by 20% on the band
of 2026-11-30), and at a knife edge that lean alone decided the default's verdict (a 0.2%
faster speed dropped PDD's relay: -17.4% against -7.9% at the band's median).
"""

from __future__ import annotations

import dataclasses
import math

from pdd_plan.inputs import error_band
from pdd_plan.inputs.pieces import Profiles
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.uncertainty import Uncertainty


def _faster(gpu: GPUProfile, k: float, why: str | None = None) -> GPUProfile:
    """`gpu` with every rate a forward pass uses (peak FLOP/s, HBM and scale-up/RDMA
    bandwidth) times k and the per-pass overhead (both families') and the runtime profile's
    fixed costs over k: each term of a pass is FLOPs or bytes over a rate, or such a fixed time
    (perf/roofline.py, perf/comm.py, perf/moe_terms.py), so every prefill, extend and decode
    pass takes exactly 1/k of its time. Memory sizes, and so the KV pool, stay."""
    c, m, ic, e = gpu.compute, gpu.memory, gpu.interconnect, gpu.efficiency

    def times(x: float | None) -> float | None:
        return None if x is None else x * k

    compute = c.model_copy(
        update={f: times(getattr(c, f)) for f in ("bf16_tflops", "fp8_tflops", "fp4_tflops")}
    )
    link = ic.model_copy(
        update={
            "scale_up_gbytes_bidir": ic.scale_up_gbytes_bidir * k,
            "rdma_gbps_per_gpu": ic.rdma_gbps_per_gpu * k,
        }
    )
    moe = (
        e.moe.model_copy(update={"step_overhead_ms": e.moe.step_overhead_ms / k}) if e.moe else None
    )
    eff = e.model_copy(
        update={
            "step_overhead_ms": e.step_overhead_ms / k,
            "moe": moe,
            "fixed_time_scale": e.fixed_time_scale / k,
            "source": f"{e.source} ({why or f'the fleet speed_factor {k:g}'} applied to every pass)",
        }
    )
    return gpu.model_copy(
        update={
            "compute": compute,
            "memory": m.model_copy(update={"hbm_tbps": m.hbm_tbps * k}),
            "interconnect": link,
            "efficiency": eff,
        }
    )


def deployed(profiles: Profiles, speed_factor: float, why: str | None = None) -> Profiles:
    """The profiles a fleet runs with when its engine runs at `speed_factor` times the speed
    the profiles run at. Applied to the GPU profiles, not to one Instance, because the
    simulator builds its own instances from them (sim/setup.py): scaled here, the analytic
    search (through `instance`) and every replay see the same engine. The intra-datacenter KV
    transfer over RDMA scales with the NICs' rate too (sub-millisecond for a 64K context on
    16 GPUs, so immaterial); the line does not."""
    if speed_factor == 1.0:
        return profiles
    return dataclasses.replace(profiles, gpus=at_speed(profiles.gpus, speed_factor, why))


def at_speed(
    gpus: dict[str, GPUProfile], k: float, why: str | None = None
) -> dict[str, GPUProfile]:
    """Every profile of `gpus` at k times its speed (`_faster`), each remembered with the perf
    model's profile it scales and its factor over it (`speed_of`)."""
    out = {name: _faster(g, k, why) for name, g in gpus.items()}
    if len(_BASE) > 4096:
        _BASE.clear()
    for name, g in out.items():
        base, k0 = speed_of(gpus[name])
        _BASE[id(g)] = (g, base, k0 * k)
    return out


# a `deployed` profile's id -> (it, the perf model's profile it scales, the factor); the
# entry keeps the copy alive, so its id stays its own
_BASE: dict[int, tuple[GPUProfile, GPUProfile, float]] = {}


def speed_of(gpu: GPUProfile) -> tuple[GPUProfile, float]:
    """(the profile `gpu` was `deployed` from, the speed factor): every pass on `gpu` takes
    exactly 1/k of its time on the first (`_faster`), so times on `gpu` may be derived from
    the nominal ones. `(gpu, 1.0)` for a profile not made by `deployed`."""
    hit = _BASE.get(id(gpu))
    if hit is None or hit[0] is not gpu:
        return gpu, 1.0
    return hit[1], hit[2]


def band_centre(model: ModelProfile) -> tuple[float | None, str]:
    """The perf error band's median speed factor for `model` (measured / predicted =
    1 / (1 + bias): the band's median signed error where it has one, else its mean, else 0)
    and where it comes from; (None, why) without a band."""
    band, note = error_band.band_for_model(model)
    if band is None:
        return None, note
    b = band.get("bias")
    b = band.get("mean_signed_error") or 0.0 if b is None else b
    src = (
        f"shipped error band ({band['family']}, {band['rows']} held-out rows, {band['basis']}): "
        f"median |error| {band['median_abs_error']:.0%}, bias {b:+.0%}"
    )
    return float(math.exp(-math.log1p(b))), src


def planned_speed(unc: Uncertainty | None, model: ModelProfile) -> tuple[float, str | None]:
    """(the speed factor over the perf model's a plan stands on, why): the median of each
    role's speed input (the scenario's stated band, else the shipped perf band), when prefill
    and decode agree on it; else 1 (the perf model's) with the reason, since one GPU profile
    serves both roles."""
    given = unc.inputs if unc is not None else None
    ks, whys = [], []
    for name in ("prefill_speed", "decode_speed"):
        s = getattr(given, name) if given is not None else None
        if s is not None:
            ks.append(max(float(s.centre()), 0.01))
            whys.append(f"the median of the scenario's uncertainty.inputs.{name} ({s.source})")
        else:
            k, src = band_centre(model)
            if k is None:
                return 1.0, None
            ks.append(k)
            whys.append(f"the median of the {src}")
    if abs(ks[0] - ks[1]) > 1e-12:
        return 1.0, (
            f"the plan stands at the perf model's speed: the prefill and decode speeds' medians "
            f"differ ({ks[0]:.4g}, {ks[1]:.4g}) and one GPU profile runs both roles, so the "
            "draws' median inputs are not the plan's"
        )
    why = whys[0] if whys[0] == whys[1] else f"{whys[0]}; {whys[1]}"
    return ks[0], f"the plan's speed, {ks[0]:.4g} x the perf model's: {why}"


def stated(gpus: dict[str, GPUProfile], k: float) -> float:
    """The factor over `gpus`' speed that puts them at k times the perf model's (a fleet's
    stated `speed_factor`, measured against the perf model); 1, the default, is the speed
    `gpus` run at (the plan's)."""
    if k == 1.0 or not gpus:
        return k
    return k / speed_of(next(iter(gpus.values())))[1]
