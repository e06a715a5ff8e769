"""The optimizer's request classes for a scenario: from its trace or from its distributions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from pdd_plan.common.errors import InputError
from pdd_plan.common.files import require_file
from pdd_plan.inputs.pieces import ClassSpec
from pdd_plan.inputs.schema.scenario import Workload
from pdd_plan.workload.distributions import sample, stratified_requests
from pdd_plan.workload.requests import RequestClasses, Requests
from pdd_plan.workload.stats import HIT_BIN_EDGES
from pdd_plan.workload.traces import read_trace
from pdd_plan.workload.traces.classes import classes_from_requests


def _trace_path(spec: ClassSpec, trace: str) -> Path:
    """A relative trace path is relative to the scenario file's folder (so a scenario works
    from any working directory, the bundled examples from the installed package); a path that
    is only found from the working directory still works."""
    p = Path(trace)
    if p.is_absolute():
        return p
    q = spec.base_dir / trace
    return q if q.exists() or not p.exists() else p


def input_buckets(spec: ClassSpec) -> int:
    """Input-length buckets per hit bin (and output split) for `workload.classes` classes."""
    split = spec.singular_split
    # the output split doubles the classes per hit bin: half the input buckets keep the count
    # (and the optimizer's time) near what workload.classes asks
    per_bin = (len(HIT_BIN_EDGES) - 1) * (2 if split is not None else 1)
    return max(1, spec.workload.classes // per_bin)


def build_classes(spec: ClassSpec) -> RequestClasses:
    """Classes from the scenario's trace, or from its distributions (seeded sample)."""
    return classes_of(spec, scenario_requests(spec))


def trace_requests(spec: ClassSpec) -> Requests:
    """The scenario's trace, its hit rates from its block hashes or the scenario's
    distribution."""
    w = spec.workload
    path = _trace_path(spec, w.trace)  # type: ignore[arg-type]
    if not path.exists():
        raise InputError(
            spec.file,
            "workload.trace",
            f"trace file '{w.trace}' not found",
            "give a path relative to the scenario file or an absolute one",
        )
    require_file(path, "give the path of a trace file", what="trace file")
    req, _info = read_trace(path)
    if np.isnan(req.hit_p).any():  # no block hashes: hit rates from the scenario's distribution
        hit = np.clip(sample(w.prefix_hit, len(req), np.random.default_rng(spec.seed)), 0.0, 1.0)
        req = Requests(
            req.arrival_s,
            req.input_tokens,
            req.output_tokens,
            hit,
            hit * spec.policy.md_hit_ratio,
        )
    return req


def sampled(spec: ClassSpec, w: Workload, n: int, seed: int) -> Requests:
    """n requests drawn from workload `w`'s distributions, each marginal stratified (a Latin
    hypercube: the classes' mean service is the distribution's, not one draw's), the MD-side
    hit from the policy."""
    req = stratified_requests(w, n, seed, w.rate_rps or 1.0)
    md = spec.policy.md_hit_ratio
    return Requests(req.arrival_s, req.input_tokens, req.output_tokens, req.hit_p, req.hit_p * md)


def scenario_requests(spec: ClassSpec) -> Requests:
    w = spec.workload
    if w.trace is not None:
        return trace_requests(spec)
    return sampled(spec, w, w.samples, spec.seed)


def classes_of(spec: ClassSpec, req: Requests) -> RequestClasses:
    """The classes of `req` as the scenario asks (count, singular split, arrival CV, DRC)."""
    w = spec.workload
    split, buckets = spec.singular_split, input_buckets(spec)
    cls = replace(
        classes_from_requests(req, buckets, output_split=split), arrival_ca2=w.arrival_cv**2
    )
    if spec.policy.drc:
        return cls
    nd = cls.fine
    nodes = RequestClasses(
        nd.input_tokens, nd.output_tokens, nd.hit_p, np.zeros(len(nd)), nd.weight, new_sd=nd.new_sd
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
