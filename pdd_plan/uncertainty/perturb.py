"""One draw applied to the models, and a fixed fleet's SLA goodput under it (evaluate's
analytic bisection, `evaluate.analytic.search`, on the drawn inputs).

How each input enters, exactly where the models allow it:

- `prefill_speed`, `decode_speed`: the GPU profiles every prefill (decode) instance is built
  from run every pass at that factor over the perf model's (`inputs.speed.deployed`: peak
  rates times k, fixed times over k; the plan's profiles run at the band's median already,
  so a draw moves them by k over it), so service times, the batch at the TPOT target and
  every TTFT term move;
- `kv_bytes`: the KV a request holds in decode memory times k; what crosses the line is
  carried by a line whose rates (capacity and per connection) are over k, the same transfer
  times and line load as k times the bytes (its RTT and slow start, a few ms, stay); the
  sub-millisecond RDMA copies inside a datacenter stay;
- `request_state_bytes`: the model's per-request state set to the drawn bytes (a model
  copy, so the line bytes, decode KV memory and the batch KV allows all move; `kv_bytes`
  scales it like the rest);
- `line_rate`: one connection's rate times k (`per_connection_gbps`), the line's capacity kept;
- `prefix_hit`: every class's (and stratum's) prefill-side hit shifted, clipped to [0, 1]; the
  MD-side hit keeps its ratio to it;
- `gpu_price`, `line_price`: the fleet's $/hour (cost only); `rate`: the rate the plan is
  judged at (not the goodput).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdd_plan.evaluate import analytic
from pdd_plan.evaluate.fleet import FleetSpec, deployed, speed_of
from pdd_plan.inputs.pieces import Profiles
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency.line import tcp, transfer
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Problem
from pdd_plan.workload.requests import RequestClasses

REL_TOL = 0.01  # the bisection's stop: 1% of the goodput (the bands print 3-4 figures)


@dataclass(frozen=True)
class Applied:
    """The models under one draw (see the module doc)."""

    prefill: Problem  # the planner's inputs, GPU profiles at the drawn prefill speed
    decode: Problem  # the same at the drawn decode speed
    classes: RequestClasses
    kv: float
    gpu_price: float
    line_price: float
    rate: float
    centre: float = 1.0  # the plan's speed over the perf model's (inputs/speed)


def scaled_line(sku: LineSKU, line_rate: float, kv: float) -> LineSKU:
    """`sku` carrying 1/kv of its bytes (kv times the bytes, the same times) with one
    connection's rate times line_rate."""
    if line_rate == 1.0 and kv == 1.0:
        return sku
    per_conn = tcp.path_rate_bytes_s(sku) * line_rate / kv  # bytes/s one connection carries
    return sku.model_copy(
        update={
            "gbps": sku.gbps / kv,
            "per_connection_gbps": per_conn * 8 / 1e9 / sku.tcp_efficiency,
        }
    )


def _shift(c: RequestClasses, s: float) -> RequestClasses:
    hp = np.clip(c.hit_p + s, 0.0, 1.0)
    ratio = np.divide(c.hit_d, c.hit_p, out=np.zeros_like(c.hit_d), where=c.hit_p > 0)
    # a class with no hit had no ratio: MD's hit follows the prefill's where MD had any at all
    some = float(np.max(ratio)) if np.any(c.hit_d > 0) else 0.0
    ratio = np.where(c.hit_p > 0, ratio, some)
    return dataclasses.replace(c, hit_p=hp, hit_d=np.clip(hp * ratio, 0.0, 1.0))


def shifted(classes: RequestClasses, s: float) -> RequestClasses:
    """`classes` with every prefill-side hit fraction moved by s (and their strata too)."""
    if s == 0.0:
        return classes
    out = _shift(classes, s)
    if classes.nodes is not None:
        out = dataclasses.replace(out, nodes=_shift(classes.nodes, s))
    return out


_APPLIED: dict[tuple, tuple[Problem, RequestClasses, Applied]] = {}


def faster(pb: Problem, k: float) -> Problem:
    """`pb` with every GPU profile's passes k times as fast (`inputs.speed.deployed`)."""
    prof = deployed(Profiles(pb.model, pb.catalog.gpus, pb.lines, pb.catalog.engine), k)
    if prof.gpus is pb.catalog.gpus:
        return pb
    return dataclasses.replace(pb, catalog=dataclasses.replace(pb.catalog, gpus=prof.gpus))


def with_state(pb: Problem, state_bytes: float) -> Problem:
    """`pb` with the model's per-request state (`kv_cache.per_request_state_bytes`) set to
    `state_bytes`: a model copy, swapped in as `faster` swaps the GPU profiles."""
    m = pb.model
    if state_bytes == m.kv_cache.per_request_state_bytes:
        return pb
    kv = m.kv_cache.model_copy(update={"per_request_state_bytes": float(state_bytes)})
    model = m.model_copy(update={"kv_cache": kv})
    return dataclasses.replace(pb, catalog=dataclasses.replace(pb.catalog, model=model))


def apply(pb: Problem, classes: RequestClasses, values: dict[str, float]) -> Applied:
    """The models under a draw (`values`: input name -> drawn value; a missing input is nominal).
    Memoized: the same draw applied again hands back the same GPU profiles and classes, so the
    perf memos (keyed by profile) are hit for every fleet and architecture evaluated under it."""
    key = (id(pb), id(classes), tuple(sorted(values.items())))
    hit = _APPLIED.get(key)
    if hit is not None and hit[0] is pb and hit[1] is classes:  # entries keep both alive
        return hit[2]
    if len(_APPLIED) > 2048:
        _APPLIED.clear()
    out = _apply(pb, classes, values)
    _APPLIED[key] = (pb, classes, out)
    return out


def _apply(pb: Problem, classes: RequestClasses, values: dict[str, float]) -> Applied:
    kv = values.get("kv_bytes", 1.0)
    lr = values.get("line_rate", 1.0)
    lines = [scaled_line(s, lr, kv) for s in pb.lines]
    base = dataclasses.replace(pb, lines=lines) if (kv, lr) != (1.0, 1.0) else pb
    if "request_state_bytes" in values:
        base = with_state(base, values["request_state_bytes"])
    c = centre(pb)  # the draws are over the perf model's speed, the plan's profiles at c
    kp, kd = values.get("prefill_speed", c) / c, values.get("decode_speed", c) / c
    p_pb = faster(base, kp)
    d_pb = p_pb if kd == kp else faster(base, kd)
    return Applied(
        p_pb,
        d_pb,
        shifted(classes, values.get("prefix_hit", 0.0)),
        kv,
        values.get("gpu_price", 1.0),
        values.get("line_price", 1.0),
        values.get("rate", 1.0),
        c,
    )


def centre(pb: Problem) -> float:
    """The speed over the perf model's that `pb`'s GPU profiles run at (the plan's)."""
    gpus = pb.catalog.gpus
    return speed_of(next(iter(gpus.values())))[1] if gpus else 1.0


def fleet_model(ap: Applied, fs: FleetSpec, caps: Caps | None = None) -> analytic.FleetModel:
    """The fleet's analytic model under the draw, checked under `caps`: a plan's own (those
    its verification ended with, so the draws ask the question the plan answered), or by
    default decode up to its TPOT-target batch, as `evaluate` measures an existing fleet."""
    p_pb, d_pb = ap.prefill, ap.decode
    if fs.speed_factor != 1.0:  # a deployment's measured speed in place of the plan's, moved
        k = fs.speed_factor / ap.centre  # by the draw as the plan's is
        p_pb, d_pb = faster(p_pb, k), faster(d_pb, k)
    caps = caps or Caps(decode=1.0)
    fm = analytic.fleet_model(p_pb, fs, ap.classes, caps, decode_pb=d_pb)
    if ap.kv != 1.0:
        fm.shared = dataclasses.replace(fm.shared, kv_bytes=fm.shared.kv_bytes * ap.kv)
    return fm


def recounted(fm: analytic.FleetModel, fs: FleetSpec) -> analytic.FleetModel | None:
    """`fm` for `fs`, the same groups with other counts (a resized fleet: uncertainty/sizing),
    without rebuilding its instances: the counts enter the model only through the prefill
    pool's size, the decode groups' counts and the line's (one prefill group: its service
    times are per instance). None where `fs` differs otherwise (rebuild it)."""
    old, new = fm.fleet.instances, fs.instances
    same = len(old) == len(new) and all(
        a.model_copy(update={"count": 0, "cost_per_hour": 0.0})
        == b.model_copy(update={"count": 0, "cost_per_hour": 0.0})
        for a, b in zip(old, new)
    )
    prefill = [g for g in new if g.role == "prefill"]
    if not same or len(prefill) != 1 or (fs.line is None) != (fm.fleet.line is None):
        return None
    counts = {}
    for k in fm.counts:
        i = int(k.rsplit(":", 1)[1])
        counts[k] = new[i].count
    line = fm.line
    if line is not None and fs.line is not None and fs.line.count != line.count:
        line = transfer.LineConfig(line.sku, fs.line.count)
    return dataclasses.replace(fm, fleet=fs, n_prefill=prefill[0].count, counts=counts, line=line)


@dataclass(frozen=True)
class Edge:
    """Where a fleet's SLA goodput lies: `lo` is served (0: no rate found that is), no rate
    above `hi` is; hi <= lo x (1 + REL_TOL) once found."""

    lo: float
    hi: float
    # the last served probe: (its rate, each resource's use there); the LINEAR uses scale with
    # the rate, so a fleet's uses at another rate need no new check (None: none probed)
    served: tuple[float, dict] | None = None

    def linear_use(self, rate: float) -> dict[str, float] | None:
        """The LINEAR resources' use at `rate`, scaled from the served probe."""
        if self.served is None:
            return None
        r, use = self.served
        return {k: use[k] * rate / r for k in LINEAR if k in use}


# the resources whose use grows in proportion to the rate and whose use over cap no routing
# avoids (evaluate's early-outs and the decode rows' sum): a probe at r with use L past them
# puts the goodput at or below r / L (the others, TTFT, KV and relay, only guide the next probe)
LINEAR = ("prefill_queue", "line", "decode_tpot")


def goodput(ap: Applied, fs: FleetSpec, caps: Caps | None = None) -> float:
    """The fleet's SLA goodput (req/s) under the draw; 0 where it meets the SLA at no rate."""
    return edge(ap, fs, caps=caps).lo


def edge(
    ap: Applied,
    fs: FleetSpec,
    lo: float = 0.0,
    hi: float | None = None,
    caps: Caps | None = None,
    fm: analytic.FleetModel | None = None,
) -> Edge:
    """The fleet's SLA goodput under the draw to REL_TOL, by evaluate's analytic check
    (`analytic.at_rate`); `lo` (served) and `hi` (an upper bound) may come from draws that
    dominate (see paired.Evaluator). The first probe is just under the rate bound (every
    rate-linear resource at its cap): where one of them binds, as on the default, that one
    probe is the answer. After that each probe is placed by the resources' use (`_next`), kept
    inside the bracket; feasibility is taken as monotone in the rate (analytic.search's
    premise). `fm`: the fleet's model under the draw where it is built already."""
    fm = fm or fleet_model(ap, fs, caps)
    if fm.n_prefill == 0 or not fm.md:
        return Edge(0.0, 0.0)
    bound = analytic.rate_bound(fm)
    hi = bound if hi is None else min(hi, bound)
    floor = bound * 1e-3
    guess = hi / (1 + REL_TOL)
    seen: dict[bool, tuple[float, dict]] = {}  # served / not -> (rate, use of each) last
    down = 2 * REL_TOL
    bounded = bool(fm.rld)  # relay decode: no lower bound (its gate moves with the rate)
    while not (lo > 0 and hi <= lo * (1 + REL_TOL)):
        r = _inside(guess, lo, hi, floor)
        a = analytic.at_rate(fm, r)
        if not a.ok and r <= floor:  # no rate worth serving (analytic.search's floor)
            return Edge(0.0, floor)
        over = {k: v for k, v in a.limits.items() if v >= 1.0}
        if a.ok:
            lo = r
        else:
            hi = min([r] + [r / over[k] for k in LINEAR if k in over])
            if lo == 0 and not bounded and not any(k in over for k in LINEAR):
                bounded = True
                if not analytic.at_rate(warm(fm), floor).ok:
                    return Edge(0.0, floor)  # what the walk down (~10 checks) would reach
        seen[a.ok] = (r, a.limits)
        guess, down = _next(seen, over, lo, hi, down)
    return Edge(float(lo), float(hi), seen.get(True))


def warm(fm: analytic.FleetModel) -> analytic.FleetModel:
    """The fleet as if its line's connections never went idle (``slow_start: first_use`` for
    ``after_idle``): at a rate, its checks are no harder than the fleet's own (the restart's
    ramp only adds to a transfer's time and hold), and they grow harder with the rate (more
    queueing everywhere; the idle restarts, the one effect that falls with the rate, left
    out). So where it misses the SLA at the search's floor, the fleet itself misses at every
    rate from there up, and `edge`'s walk down would end at the floor: it asks this once, after
    its first refusal. Not for a fleet with relay decode: its relay gate moves with the rate,
    and feasibility there is monotone in the rate on the tested fleets but not proven so
    (`paired.Evaluator.meets`)."""
    line = fm.line
    if line is None or line.sku.slow_start != "after_idle":
        return fm
    sku = line.sku.model_copy(update={"slow_start": "first_use"})
    return dataclasses.replace(fm, line=dataclasses.replace(line, sku=sku))


def _next(seen: dict, over: dict, lo: float, hi: float, down: float) -> tuple[float, float]:
    """The next probe (and the next step down). A rate-linear resource over its cap: just
    under where it reaches it. Served and refused probes both seen: where the use of what the
    refused one ran out of reaches 1, interpolated in its logarithm (TTFT misses grow about exponentially near the
    edge). Nothing served yet: a step down from hi, doubling each time (2%, 4%, 8%, ...).
    Otherwise the bracket's (geometric) middle."""
    if any(k in over for k in LINEAR):
        return hi * (1 - REL_TOL / 4), down
    if True in seen and False in seen:
        (r0, l0), (r1, l1) = seen[True], seen[False]
        k = max(l1, key=l1.get)  # the resource the refused probe ran out of
        u0, u1 = l0.get(k, 0.0), l1[k]
        if 0 < u0 < 1 < u1:
            f = float(np.log(1 / u0) / np.log(u1 / u0))
            return r0 + (r1 - r0) * min(max(f, 0.1), 0.9), down
        return float(np.sqrt(lo * hi)), down
    if False in seen:
        return hi / (1 + down), down * 2
    return float(np.sqrt(lo * hi)), down  # served, with only the bound above


def _inside(g: float, lo: float, hi: float, floor: float) -> float:
    """`g` if it shrinks the bracket (lo, hi) enough, else its middle (geometric, or a
    quarter of hi with nothing served yet), never under the floor."""
    a, b = (lo if lo > 0 else None), hi
    ok = g == g and (a is None or g > a * (1 + REL_TOL / 8)) and g < b * (1 - REL_TOL / 8)
    if not ok:
        g = float(np.sqrt(a * b)) if a is not None else b / 4
    return max(g, floor)


def cost_per_hour(fs: FleetSpec, gpu_price: float = 1.0, line_price: float = 1.0) -> float:
    """The fleet's $/hour at drawn prices."""
    line = fs.line.cost_per_hour if fs.line is not None else 0.0
    return gpu_price * sum(g.cost_per_hour for g in fs.instances) + line_price * line
