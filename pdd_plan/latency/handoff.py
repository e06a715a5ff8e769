"""The handoff's payload, priced both ways, and the plan's choice between them.

Relay decode hands a request to main decode once its KV is there; the tokens relay decode
generated meanwhile must reach main decode's cache too, in one of two payloads
(`policy.handoff_payload`):

- `recompute`: their token IDs cross (a few hundred bytes) and main decode extends them in a
  pass joined to its running decode batch (:func:`pdd_plan.perf.handoff.joined_extend`);
- `kv`: their KV crosses the line as one more transfer (the k tokens' KV plus the fixed
  window state, :func:`pdd_plan.perf.layers.kv_bytes`), on the line at the plan's
  utilization (:func:`pdd_plan.latency.line.law.transfer_law`, its P99 from the same law's
  two-moment shape).

`auto` takes the payload with the shorter worst case at the largest handoff the plan can make
(`relay_max_tokens` tokens): the handoff sits on the request's token stream, and a bounded
worst case is what the PDD report chose recompute for (pdd-facts.md: "for its bounded worst
case and low variance, not its mean"). A tie goes to recompute (nothing more crosses the line).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.inputs.schema.scenario import Policy
from pdd_plan.latency.line import delay_shape, transfer
from pdd_plan.latency.line import law as line_law
from pdd_plan.perf import layers
from pdd_plan.perf.handoff import joined_extend, same_profiles, shape_key
from pdd_plan.perf.instance import Instance


@dataclass(frozen=True)
class Payload:
    """One payload's time for a handoff of k tokens: mean and worst (recompute: the wait's
    end; kv: the line law's P99)."""

    mean_s: float
    worst_s: float


@dataclass(frozen=True)
class Choice:
    payload: str  # recompute | kv
    why: str
    recompute: Payload
    kv: Payload | None  # None without a line (nothing to send the KV over)


# (shape_key(md), k, context, batch, chunk) -> (md, Payload): the optimizer prices the same
# few handoffs under every line option and rate, and the draws' sizing search on fresh but
# equal instances; the entry keeps its instance's profiles alive (their ids unique)
_RECOMPUTE: dict[tuple, tuple[Instance, Payload]] = {}


def recompute(md: Instance, k: float, context: float, batch: float, chunk: int) -> Payload:
    """Main decode extends the k tokens joined to its running batch (at the same context)."""
    key = (shape_key(md), float(k), float(context), round(float(batch), 6), int(chunk))
    hit = _RECOMPUTE.get(key)
    if hit is None or not same_profiles(hit[0], md):
        if len(_RECOMPUTE) > 100_000:
            _RECOMPUTE.clear()
        j = joined_extend(md, k, context, batch, context, chunk)
        hit = _RECOMPUTE[key] = (md, Payload(j.mean_s, j.max_s))
    return hit[1]


def kv(md: Instance, k: np.ndarray | float, line: transfer.LineConfig, rho: float) -> list[Payload]:
    """The k tokens' KV (and the window state) as one transfer on `line` at utilization `rho`,
    per entry of `k`: the law's mean, and its P99 from the law's two-moment delay (closed
    form: a delay of probability q, then shift + an exponential of the scale)."""
    ks = np.atleast_1d(np.asarray(k, dtype=float))
    size = np.asarray(layers.kv_bytes(md.model, ks), dtype=float)
    law = line_law.transfer_law(size, np.ones(len(ks)), line, min(max(rho, 0.0), 0.999))
    d = delay_shape.two_moment(law.line_wait, law.line_wait_var, law.atom)
    with np.errstate(divide="ignore"):
        tail = d.shift + d.scale * np.log(np.maximum(d.q, 1e-300) / 0.01)
    p99 = law.bare + np.where(d.q > 0.01, tail, 0.0)
    return [Payload(float(m), float(max(w, m))) for m, w in zip(law.total, p99)]


# (shape_key(md), kmax, id(line.sku), line.count, rho) -> (md, line.sku, k grid, payloads)
_KV_GRID: dict[tuple, tuple] = {}


def _kv_grid(
    md: Instance, kmax: float, line: transfer.LineConfig, rho: float
) -> tuple[np.ndarray, list[Payload]]:
    """The KV payload from one token to `kmax` on a grid (its last point `kmax`), for
    interpolation: one law evaluation per plan instead of one per class."""
    key = (shape_key(md), float(kmax), id(line.sku), int(line.count), float(rho))
    hit = _KV_GRID.get(key)
    if hit is None or not same_profiles(hit[0], md) or hit[1] is not line.sku:
        if len(_KV_GRID) > 10_000:
            _KV_GRID.clear()
        kg = np.unique(np.rint(np.geomspace(1.0, max(kmax, 1.0), 12)))
        hit = _KV_GRID[key] = (md, line.sku, kg, kv(md, kg, line, rho))
    return hit[2], hit[3]


def choose(
    policy: Policy,
    md: Instance,
    context: float,
    batch: float,
    chunk: int,
    line: transfer.LineConfig | None,
    rho: float,
) -> Choice:
    """The plan's payload (see the module doc), priced at `relay_max_tokens` tokens."""
    k = float(policy.relay_max_tokens)
    rc = recompute(md, k, context, batch, chunk)
    kp = _kv_grid(md, k, line, rho)[1][-1] if line is not None else None
    if policy.handoff_payload == "recompute" or kp is None:
        why = "policy.handoff_payload: recompute" if kp is not None else "no line to send KV over"
        return Choice("recompute", why, rc, kp)
    if policy.handoff_payload == "kv":
        return Choice("kv", "policy.handoff_payload: kv", rc, kp)
    pick = "kv" if kp.worst_s < rc.worst_s else "recompute"
    why = (
        f"shorter worst case at {int(k)} tokens: recompute {rc.worst_s * 1e3:.0f} ms "
        f"(mean {rc.mean_s * 1e3:.0f}), KV over the line P99 {kp.worst_s * 1e3:.0f} ms "
        f"(mean {kp.mean_s * 1e3:.0f})"
    )
    return Choice(pick, why, rc, kp)


def times(
    c: Choice,
    md: Instance,
    k: np.ndarray,
    context: np.ndarray,
    batch: float,
    chunk: int,
    line: transfer.LineConfig | None,
    rho: float,
    kmax: float,
) -> np.ndarray:
    """Mean handoff seconds per class (k tokens, at most `kmax`, at each class's context) in the
    chosen payload; each distinct (k, context) pair priced once."""
    kk = np.rint(np.maximum(np.asarray(k, dtype=float), 1.0))
    if c.payload == "kv" and line is not None:  # the KV's size does not depend on the context
        kg, pay = _kv_grid(md, float(kmax), line, rho)
        mean = np.array([p.mean_s for p in pay])
        return np.interp(kk, kg, mean)  # bytes are linear in k, the law smooth in the bytes
    cc = np.rint(np.asarray(context, dtype=float)).astype(np.int64).tolist()
    pairs = list(zip(kk.astype(np.int64).tolist(), cc))
    got = {p: recompute(md, p[0], p[1], batch, chunk).mean_s for p in dict.fromkeys(pairs)}
    return np.array([got[p] for p in pairs], dtype=float)
