"""What a simulation runs on: the plan's fleet and line as objects, and the requests to replay."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdd_plan import architectures
from pdd_plan.architectures import ROLES, Architecture
from pdd_plan.common.errors import InputError
from pdd_plan.inputs.pieces import Profiles, ReplaySetup
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency.line.transfer import LineConfig
from pdd_plan.outputs.plan import ArchitecturePlan, InstanceGroup, Plan
from pdd_plan.perf.instance import Instance
from pdd_plan.workload.cache import CacheSpec
from pdd_plan.workload.distributions import UnitDraw, at_rate, sample, sample_requests, unit_draw
from pdd_plan.workload.requests import Requests
from pdd_plan.workload.traces import TraceReader, read_trace

PlanLike = Plan | ArchitecturePlan


@dataclass(frozen=True)
class Fleet:
    """A plan's instances (one entry per instance, not per row) and its line."""

    architecture: str
    prefill: list[Instance]
    relay: list[Instance]  # relay decode (architectures that relay; may be empty)
    decode: list[Instance]  # the architecture's decode role (main_decode, or decode in A)
    line: LineConfig | None  # None: decode reached over RDMA
    rate_rps: float | None  # the rate the plan was sized for
    # the plan's routing: relay requests whose prefill-side hit is at or below this (None:
    # none), finishing on relay decode those with at most singular_max output tokens
    relay_below: float | None = None
    singular_max: int | None = None
    handoff_payload: str | None = None  # the plan's choice (recompute | kv); None: not said


def spec(architecture: str) -> Architecture:
    """The architecture's spec, or a one-line error naming the known ones."""
    try:
        return architectures.get(architecture)
    except KeyError:
        raise InputError(
            None,
            "--architecture",
            f"unknown architecture '{architecture}'",
            f"use one of {', '.join(architectures.names())}",
        ) from None


def arch_plan(plan: PlanLike, architecture: str) -> ArchitecturePlan:
    """One architecture's typed plan from a whole Plan or one ArchitecturePlan."""
    if isinstance(plan, Plan):
        return plan.arch(architecture)
    return plan


def row_instance(profiles: Profiles, g: InstanceGroup) -> Instance:
    """The instance one plan row describes (its GPU must be in the scenario's datacenters)."""
    return Instance(
        profiles.model,
        profiles.gpus[g.gpu],
        g.gpus_per_instance,
        tp=g.tp,
        ep=g.ep,
        dp=g.dp,
        redundant_experts=g.redundant_experts or 0,
        limits=profiles.engine,
    )


def _pools(
    profiles: Profiles, file: str, p: ArchitecturePlan, architecture: str
) -> dict[str, list[Instance]]:
    pools: dict[str, list[Instance]] = {r: [] for r in ROLES}
    for i, g in enumerate(p.instances):
        if g.gpu not in profiles.gpus:
            raise InputError(
                None,
                f"plans.{architecture}.instances[{i}].gpu",
                f"GPU '{g.gpu}' is not in the scenario's datacenters",
                "use the plan with the scenario it was made from",
            )
        try:
            inst = row_instance(profiles, g)
            inst.require_fit()
        except InputError as e:  # name the plan row, not the bare instance field
            where = f"plans.{architecture}.instances[{i}]"
            raise InputError(file, f"{where}.{e.field}", e.problem, e.fix) from None
        pools[g.role].extend([inst] * g.count)
    return pools


def _line(skus: list[LineSKU], p: ArchitecturePlan, architecture: str) -> LineConfig:
    ln = p.line
    if ln is None:
        raise InputError(
            None, f"plans.{architecture}.line", "no line in a cross-datacenter plan", ""
        )
    sku = next((s for s in skus if s.name == ln.sku), None)
    if sku is None:
        have = ", ".join(s.name for s in skus) or "none"
        raise InputError(
            None,
            f"plans.{architecture}.line.sku",
            f"line '{ln.sku}' is not among the scenario's candidates ({have})",
            "use the plan with the scenario it was made from",
        )
    return LineConfig(sku, ln.count)


def fleet(profiles: Profiles, file: str, arch_plan: ArchitecturePlan, architecture: str) -> Fleet:
    """Rebuild the instances and line of one architecture's plan."""
    a = spec(architecture)
    pools = _pools(profiles, file, arch_plan, architecture)
    decode = pools[a.decode_role]
    for role, got in (("prefill", pools["prefill"]), (a.decode_role, decode)):
        if not got:
            raise InputError(
                None, f"plans.{architecture}.instances", f"no {role} instances", "re-run optimize"
            )
    # every role in one datacenter: the KV moves over RDMA and the plan leases no line
    one_dc = len({g.datacenter for g in arch_plan.instances}) == 1
    line = _line(profiles.lines, arch_plan, architecture) if a.crosses_line and not one_dc else None
    relay = pools["relay_decode"] if a.relays else []
    rate = arch_plan.goodput_rps
    ro = arch_plan.routing
    return Fleet(
        architecture,
        pools["prefill"],
        relay,
        decode,
        line,
        float(rate) if rate else None,
        ro.relay_at_or_below_hit_rate,
        ro.singular_max_output_tokens,
        ro.handoff_payload,
    )


@dataclass(frozen=True)
class SimRequests:
    """Requests to replay; with ``hashes`` the DRC is simulated from block ids during the run."""

    req: Requests
    source: str  # "distribution" or the trace path
    flat: np.ndarray | None = None  # every request's block hash ids, concatenated
    offsets: np.ndarray | None = None  # request r: flat[offsets[r]:offsets[r + 1]]
    block_tokens: int = 512

    @property
    def hashes(self) -> bool:
        return self.flat is not None

    def __len__(self) -> int:
        return len(self.req)


def head(reqs: SimRequests, n: int) -> SimRequests:
    """The first ``n`` requests of ``reqs`` (arrival order), their block ids with them."""
    r = reqs.req
    cut = Requests(
        r.arrival_s[:n], r.input_tokens[:n], r.output_tokens[:n], r.hit_p[:n], r.hit_d[:n]
    )
    flat, off = reqs.flat, reqs.offsets
    if flat is not None and off is not None:
        flat, off = flat[: off[n]], off[: n + 1]
    return SimRequests(cut, reqs.source, flat, off, reqs.block_tokens)


def _trace_path(base_dir: Path, trace: str) -> Path:
    p = Path(trace)
    if p.exists() or p.is_absolute():
        return p
    q = base_dir / trace
    return q if q.exists() else p


def _read_hashes(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw arrivals and block ids of a hashed trace, in file order (compact int64)."""

    arr, lens, flat = [], [], []
    for ch in TraceReader(path):
        arr.append(ch.arrival_s)
        for h in ch.hash_ids or ():
            lens.append(len(h))
            flat.extend(h)
    a = np.concatenate(arr) if arr else np.zeros(0)
    off = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    return a, np.asarray(flat, dtype=np.int64), off


# a distribution's requests drawn before their rate is known (`draw_ahead`), by workload,
# length and seed: one at a time (the long prefill stage's, ~30 MB at 1M requests)
_AHEAD: dict[tuple, UnitDraw] = {}


def draw_ahead(setup: ReplaySetup, n: int, seed: int) -> None:
    """Draw what ``requests(setup, n, seed, rate)`` will draw at any rate, so that it only
    scales the arrivals: for a process that knows the workload and seed while it waits for the
    plan whose rate it will replay at. Its arrays are read-only (each call's requests share
    them). Nothing for a trace."""
    w = setup.workload
    if w.trace is not None:
        return
    key = (w.model_dump_json(), int(n), int(seed))
    if key in _AHEAD:  # drawn already (a plan made again in the same process)
        return
    d = unit_draw(w, int(n), int(seed))
    for a in (d.input_tokens, d.output_tokens, d.hit, d.gaps):
        a.setflags(write=False)
    _AHEAD.clear()
    _AHEAD[key] = d


def requests(
    setup: ReplaySetup,
    n: int | None,
    seed: int,
    rate_rps: float | None,
    trace: str | None = None,
) -> SimRequests:
    """The workload to replay: the scenario's trace (or ``trace``), else its distributions.

    Distributions: ``n`` Poisson arrivals at ``rate_rps`` (default 20,000 requests), with the
    sampled prefill-side hit rate and ``hit_d = hit_p * policy.md_hit_ratio`` (0 without DRC).
    Traces: the first ``n`` requests (all by default); arrivals are rescaled when the scenario
    states ``workload.rate_rps``. Hashed traces get ``hit_p`` from an unbounded prefill-side
    cache; their DRC is simulated during the run (it depends on routing). Traces without hashes
    take ``hit_rate`` if given, else hits drawn from ``workload.prefix_hit``.
    """
    w, pol = setup.workload, setup.policy
    path_s = trace or w.trace
    if path_s is None:
        if rate_rps is None or rate_rps <= 0:
            raise InputError(
                setup.file, "workload.rate_rps", "no request rate to simulate", "give rate_rps"
            )
        k = int(n) if n is not None else 20_000
        drawn = _AHEAD.get((w.model_dump_json(), k, int(seed))) if _AHEAD else None
        r = at_rate(drawn, rate_rps) if drawn is not None else sample_requests(w, k, seed, rate_rps)
        hd = r.hit_p * pol.md_hit_ratio if pol.drc else np.zeros(len(r))
        return SimRequests(
            Requests(r.arrival_s, r.input_tokens, r.output_tokens, r.hit_p, hd), "distribution"
        )

    path = _trace_path(setup.base_dir, path_s) if trace is None else Path(trace)
    if not path.is_file():
        raise InputError(
            str(path), None, "trace file not found", "give an existing trace file path"
        )
    req, info = read_trace(path, cache=CacheSpec(drc=False))
    flat = off = None
    if info.has_hashes:
        raw, flat_all, off_all = _read_hashes(path)
        order = np.argsort(raw, kind="stable")  # the order read_trace sorted into
        lens = np.diff(off_all)[order]
        off = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        idx = np.arange(int(off[-1])) + np.repeat(off_all[order] - off[:-1], lens)
        flat = flat_all[idx]
    hp = req.hit_p
    if np.isnan(hp).any():
        hp = np.where(
            np.isnan(hp),
            np.clip(sample(w.prefix_hit, len(req), np.random.default_rng(seed)), 0.0, 1.0),
            hp,
        )
    hd = hp * pol.md_hit_ratio if pol.drc else np.zeros(len(req))
    arrival = req.arrival_s - req.arrival_s[0]
    if w.rate_rps and len(req) > 1 and arrival[-1] > 0:
        arrival = arrival * ((len(req) - 1) / arrival[-1]) / w.rate_rps
    k = len(req) if n is None else min(int(n), len(req))
    if flat is not None:
        flat, off = flat[: off[k]], off[: k + 1]  # type: ignore[index]
    out = Requests(
        arrival[:k], req.input_tokens[:k], req.output_tokens[:k], hp[:k].copy(), hd[:k].copy()
    )
    return SimRequests(out, str(path), flat, off)
