"""Request classes from per-request data: hit-rate bin x input-length bucket."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from pdd_plan.common.errors import InputError
from pdd_plan.workload.requests import RequestClasses, Requests
from pdd_plan.workload.stats import HIT_BIN_EDGES, hit_bin_index

# Strata behind the classes, whatever their count: each class is split into
# max(MIN_STRATA, ceil(STRATA / classes)) strata by uncached tokens, halving toward the top
# (the slowest half of a class, its slowest quarter, ...). Prefill time grows faster than linearly
# in tokens, so a class's mean request understates its mean service time (with 8 classes on
# benchmarks/scenarios/large.yaml by 26%, the second moment 7x), and a P99 target is decided by
# the slowest 1% of requests: a long class judged at its mean misses for all its members or for
# none, so the plan flipped with the class count. Strata make both independent of the count.
STRATA = 192
MIN_STRATA = 4


def _check_edges(hit_bins: Sequence[float]) -> tuple[float, ...]:
    e = tuple(float(x) for x in hit_bins)
    ok = len(e) >= 2 and e[0] == 0.0 and e[-1] == 1.0 and all(a < b for a, b in pairwise(e))
    if not ok:
        raise InputError(
            None,
            "hit_bins",
            f"bad hit-rate bin edges {list(e)}",
            "give increasing fractions from 0.0 to 1.0, e.g. [0, 0.2, 0.4, 0.6, 0.8, 1]",
        )
    return e


def classes_from_requests(
    requests: Requests,
    n_input_buckets: int = 4,
    hit_bins: Sequence[float] = HIT_BIN_EDGES,
    output_split: float | None = None,
) -> RequestClasses:
    """Group requests by ``hit_p`` bin x input-length quantile bucket (x, with
    ``output_split``, output at most that many tokens or more).

    ``hit_bins`` are bin edges as fractions ([lo, hi), the last bin closed). Input
    buckets split the input lengths at quantiles ``k / n_input_buckets`` ([lo, hi),
    the last closed); tied quantiles leave buckets empty. ``output_split`` (the policy's
    singular cap) puts requests with output <= it apart from the rest, so a class is wholly
    singular or wholly not, as the simulator decides per request. Each non-empty class holds
    the mean input, output, ``hit_p`` and ``hit_d`` of its members (``hit_d`` taken as
    ``hit_p`` where it is NaN: unknown, or the request ended on relay decode) and a
    weight = its share of requests. Classes are ordered hit bin first, then length, then
    (split) singular before the rest.
    ``rate_rps`` = requests / duration (None for a zero duration).
    """
    n = len(requests)
    if n == 0:
        raise InputError(
            None, "requests", "no requests to build classes from", "give a non-empty trace"
        )
    if int(n_input_buckets) < 1:
        raise InputError(
            None, "n_input_buckets", f"must be >= 1, got {n_input_buckets}", "use 1 or more"
        )
    edges = _check_edges(hit_bins)
    hp = np.asarray(requests.hit_p, dtype=np.float64)
    n_unknown = int(np.isnan(hp).sum())
    if n_unknown:
        raise InputError(
            None,
            "hit_p",
            f"{n_unknown} of {n} requests have an unknown prefill hit rate",
            "use a trace with hash_ids or a hit_rate column, or assign one with "
            "synthetic.assign_hit_rates",
        )
    hd = np.asarray(requests.hit_d, dtype=np.float64)
    hd = np.where(np.isnan(hd), hp, hd)
    inp = np.asarray(requests.input_tokens, dtype=np.float64)
    out = np.asarray(requests.output_tokens, dtype=np.float64)

    key = _keys(hp, inp, out, int(n_input_buckets), edges, output_split)
    keys, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)

    def mean(x: np.ndarray) -> np.ndarray:
        return np.bincount(inverse, weights=x, minlength=keys.shape[0]) / counts

    dur = requests.duration_s
    nodes, node_class = _strata(inverse, counts, inp, out, hp, hd)
    return RequestClasses(
        input_tokens=mean(inp),
        output_tokens=mean(out),
        hit_p=mean(hp),
        hit_d=mean(hd),
        weight=counts / float(n),
        rate_rps=(n / dur) if dur > 0 else None,
        nodes=nodes,
        node_class=node_class,
    )


def _keys(
    hp: np.ndarray,
    inp: np.ndarray,
    out: np.ndarray,
    n_input_buckets: int,
    edges: tuple[float, ...],
    output_split: float | None,
) -> np.ndarray:
    hb = hit_bin_index(hp, edges)
    qs = np.quantile(inp, np.linspace(0.0, 1.0, n_input_buckets + 1)[1:-1])
    lb = np.searchsorted(qs, inp, side="right")
    key = hb * n_input_buckets + lb
    if output_split is not None:
        # the singular rule reads each request's own output: a class's mean output against the
        # cap routes a whole class one way (narrow-line: a low-hit class of mean output 960 > 500
        # sent its short members, 0.7% of all requests, across the line the replay keeps them off)
        key = key * 2 + (out > float(output_split))
    return key


def class_index(
    requests: Requests,
    n_input_buckets: int = 4,
    hit_bins: Sequence[float] = HIT_BIN_EDGES,
    output_split: float | None = None,
) -> np.ndarray:
    """Each request's class in `classes_from_requests` of the same requests and arguments."""
    hp = np.asarray(requests.hit_p, dtype=np.float64)
    inp = np.asarray(requests.input_tokens, dtype=np.float64)
    out = np.asarray(requests.output_tokens, dtype=np.float64)
    key = _keys(hp, inp, out, int(n_input_buckets), _check_edges(hit_bins), output_split)
    return np.unique(key, return_inverse=True)[1].reshape(-1)


def _strata(
    inverse: np.ndarray,
    counts: np.ndarray,
    inp: np.ndarray,
    out: np.ndarray,
    hp: np.ndarray,
    hd: np.ndarray,
) -> tuple[RequestClasses, np.ndarray]:
    """Each class's members split by uncached input tokens (what prefill time and the KV that
    crosses depend on) into strata that halve toward the top; a stratum holds its members'
    means and its share of all requests."""
    n, k = len(inp), max(MIN_STRATA, int(np.ceil(STRATA / len(counts))))
    new = inp * (1.0 - hp)
    order = np.lexsort((new, inverse))  # by class, then by uncached tokens
    cls_sorted = inverse[order]
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.arange(n) - start[cls_sorted]
    per = np.minimum(k, counts)[cls_sorted]
    # stratum j holds rank fractions [1 - 2^-j, 1 - 2^-(j+1)); the last one the rest of the top
    frac = rank / counts[cls_sorted]
    stratum = np.minimum(per - 1, np.floor(-np.log2(1.0 - frac))).astype(np.int64)
    key = np.empty(n, dtype=np.int64)
    key[order] = cls_sorted.astype(np.int64) * k + stratum
    keys, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)

    def mean(x: np.ndarray) -> np.ndarray:
        return np.bincount(inv, weights=x, minlength=keys.shape[0]) / cnt

    lacked = inp * (1.0 - hd)  # a transfer's time follows these within a stratum too
    sd = np.sqrt(np.maximum(mean(lacked * lacked) - mean(lacked) ** 2, 0.0))
    new_sd = np.sqrt(np.maximum(mean(new * new) - mean(new) ** 2, 0.0))
    nodes = RequestClasses(
        mean(inp), mean(out), mean(hp), mean(hd), cnt / float(n), lacked_sd=sd, new_sd=new_sd
    )
    return nodes, (keys // k).astype(np.int64)
