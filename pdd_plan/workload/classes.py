"""The optimizer's request classes for a scenario: from its trace or from its distributions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from pdd_plan import architectures
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import require_file
from pdd_plan.inputs.context import Context
from pdd_plan.inputs.schema.scenario import Workload
from pdd_plan.workload.distributions import sample, sample_requests
from pdd_plan.workload.requests import RequestClasses, Requests
from pdd_plan.workload.stats import HIT_BIN_EDGES
from pdd_plan.workload.traces import read_trace
from pdd_plan.workload.traces.classes import classes_from_requests


def _trace_path(ctx: Context, trace: str) -> Path:
    """A relative trace path is relative to the scenario file's folder (so a scenario works
    from any working directory, the bundled examples from the installed package); a path that
    is only found from the working directory still works."""
    p = Path(trace)
    if p.is_absolute():
        return p
    q = ctx.base_dir / trace
    return q if q.exists() or not p.exists() else p


def singular_split(ctx: Context) -> int | None:
    """The output length the classes are split at: the policy's singular cap when some
    architecture of the scenario lets singular requests finish on relay decode, else None."""
    sc = ctx.scenario
    lim = sc.policy.singular_max_output_tokens
    if lim is None or not any(architectures.get(a).singular_on_relay for a in sc.architectures):
        return None
    return int(lim)


def input_buckets(ctx: Context) -> int:
    """Input-length buckets per hit bin (and output split) for `workload.classes` classes."""
    split = singular_split(ctx)
    # the output split doubles the classes per hit bin: half the input buckets keep the count
    # (and the optimizer's time) near what workload.classes asks
    per_bin = (len(HIT_BIN_EDGES) - 1) * (2 if split is not None else 1)
    return max(1, ctx.scenario.workload.classes // per_bin)


def build_classes(ctx: Context) -> RequestClasses:
    """Classes from the scenario's trace, or from its distributions (seeded sample)."""
    return classes_of(ctx, scenario_requests(ctx))


def trace_requests(ctx: Context) -> Requests:
    """The scenario's trace, its hit rates from its block hashes or the scenario's
    distribution."""
    w, sc = ctx.scenario.workload, ctx.scenario
    path = _trace_path(ctx, w.trace)
    if not path.exists():
        raise InputError(
            ctx.file,
            "workload.trace",
            f"trace file '{w.trace}' not found",
            "give a path relative to the scenario file or an absolute one",
        )
    require_file(path, "give the path of a trace file", what="trace file")
    req, _info = read_trace(path)
    if np.isnan(req.hit_p).any():  # no block hashes: hit rates from the scenario's distribution
        hit = np.clip(sample(w.prefix_hit, len(req), np.random.default_rng(sc.seed)), 0.0, 1.0)
        req = Requests(
            req.arrival_s,
            req.input_tokens,
            req.output_tokens,
            hit,
            hit * sc.policy.md_hit_ratio,
        )
    return req


def sampled(ctx: Context, w: Workload, n: int, seed: int) -> Requests:
    """n requests drawn from workload `w`'s distributions, the MD-side hit from the policy."""
    req = sample_requests(w, n, seed, w.rate_rps or 1.0)
    md = ctx.scenario.policy.md_hit_ratio
    return Requests(req.arrival_s, req.input_tokens, req.output_tokens, req.hit_p, req.hit_p * md)


def scenario_requests(ctx: Context) -> Requests:
    w = ctx.scenario.workload
    if w.trace is not None:
        return trace_requests(ctx)
    return sampled(ctx, w, w.samples, ctx.scenario.seed)


def classes_of(ctx: Context, req: Requests) -> RequestClasses:
    """The classes of `req` as the scenario asks (count, singular split, arrival CV, DRC)."""
    sc, w = ctx.scenario, ctx.scenario.workload
    split, buckets = singular_split(ctx), input_buckets(ctx)
    cls = replace(
        classes_from_requests(req, buckets, output_split=split), arrival_ca2=w.arrival_cv**2
    )
    if sc.policy.drc:
        return cls
    nd = cls.fine
    nodes = RequestClasses(
        nd.input_tokens, nd.output_tokens, nd.hit_p, np.zeros(len(nd)), nd.weight
    )
    return RequestClasses(
        cls.input_tokens,
        cls.output_tokens,
        cls.hit_p,
        np.zeros(len(cls)),
        cls.weight,
        cls.rate_rps,
        nodes if cls.nodes is not None else None,
        cls.node_class,
        cls.arrival_ca2,
    )
