"""Seeded synthetic workloads and a writer for the generic JSONL trace format.

Every generator takes ``seed``: an int or a ``numpy.random.Generator`` (passed through
``numpy.random.default_rng``), so the same seed always gives the same requests.

* lengths: lognormal with a given median and log-space sigma, rounded to whole tokens
  and clipped to ``[min, max]``;
* hit rates: a histogram ``[[lo, hi, share], ...]`` (fractions in [0, 1]; shares are
  normalised to sum to 1), sampled uniformly inside the chosen bin;
* arrivals: Poisson (exponential gaps) or bursty (gamma gaps with a given coefficient of
  variation; ``cv=1`` is Poisson), first arrival at 0.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pdd_plan.common.atomic import atomic_open
from pdd_plan.common.errors import InputError
from pdd_plan.workload.requests import Requests

Seed = int | np.random.Generator | None
HitHistogram = Sequence[Sequence[float]]


def _rng(seed: Seed) -> np.random.Generator:
    return np.random.default_rng(seed)


def _check_n(n: int) -> int:
    if int(n) < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return int(n)


def lognormal_lengths(
    n: int,
    median: float,
    sigma: float,
    *,
    min_tokens: int = 1,
    max_tokens: int | None = None,
    seed: Seed = 0,
    field: str = "length",
) -> np.ndarray:
    """``n`` int64 token counts: ``round(median * exp(sigma * Z))`` clipped to [min, max]."""
    n = _check_n(n)
    if not median > 0:
        raise InputError(
            None, f"{field}.median", f"median must be > 0, got {median}", "give a positive median"
        )
    if not sigma >= 0:
        raise InputError(
            None, f"{field}.sigma", f"sigma must be >= 0, got {sigma}", "give sigma >= 0"
        )
    if max_tokens is not None and max_tokens < min_tokens:
        raise InputError(
            None, f"{field}.max", f"max {max_tokens} < min {min_tokens}", "make max >= min"
        )
    x = _rng(seed).lognormal(mean=np.log(median), sigma=sigma, size=n)
    x = np.rint(x)
    x = np.clip(x, min_tokens, max_tokens if max_tokens is not None else np.inf)
    return x.astype(np.int64)


def _histogram(histogram: HitHistogram, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    fix = "give [[lo, hi, share], ...] with 0 <= lo <= hi <= 1, shares >= 0, some share > 0"
    try:
        h = np.asarray(histogram, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(None, field, "hit-rate histogram is not a table of numbers", fix) from None
    if h.ndim != 2 or h.shape[1] != 3 or h.shape[0] == 0:
        raise InputError(None, field, f"hit-rate histogram has shape {h.shape}, not (bins, 3)", fix)
    lo, hi, share = h[:, 0], h[:, 1], h[:, 2]
    if not np.all(np.isfinite(h)):
        raise InputError(None, field, "hit-rate histogram has a non-finite entry", fix)
    bad = np.flatnonzero((lo < 0) | (hi > 1) | (lo > hi) | (share < 0))
    if bad.size:
        b = int(bad[0])
        raise InputError(None, f"{field}[{b}]", f"bad bin {h[b].tolist()}", fix)
    if share.sum() <= 0:
        raise InputError(None, field, "hit-rate histogram shares sum to 0", fix)
    return lo, hi, share / share.sum()


def sample_hit_rates(
    n: int, histogram: HitHistogram, *, seed: Seed = 0, field: str = "hit_histogram"
) -> np.ndarray:
    """``n`` hit fractions: a bin drawn by share, then uniform in [lo, hi)."""
    n = _check_n(n)
    lo, hi, p = _histogram(histogram, field)
    rng = _rng(seed)
    b = rng.choice(lo.shape[0], size=n, p=p)
    return lo[b] + (hi[b] - lo[b]) * rng.random(n)


def poisson_arrivals(n: int, rate_rps: float, *, seed: Seed = 0) -> np.ndarray:
    """``n`` Poisson arrival times (s), the first at 0."""
    return bursty_arrivals(n, rate_rps, cv=1.0, seed=seed)


def bursty_arrivals(n: int, rate_rps: float, cv: float, *, seed: Seed = 0) -> np.ndarray:
    """``n`` arrival times (s), first at 0, gamma inter-arrivals with mean 1/rate and CV ``cv``."""
    n = _check_n(n)
    if not rate_rps > 0:
        raise InputError(
            None, "rate_rps", f"rate must be > 0, got {rate_rps}", "give a positive rate"
        )
    if not cv > 0:
        raise InputError(
            None, "arrival_cv", f"CV must be > 0, got {cv}", "give a positive CV (1 = Poisson)"
        )
    if n == 0:
        return np.zeros(0)
    gaps = arrival_gaps(n - 1, rate_rps, cv, _rng(seed))
    return np.concatenate(([0.0], np.cumsum(gaps)))


def arrival_gaps(n: int, rate_rps: float, cv: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` gaps (s) between arrivals: exponential when ``cv`` is 1 (Poisson), else gamma with
    shape 1/cv^2 and mean 1/rate, so their squared CV (the queueing laws' c_a^2) is cv^2."""
    return unit_gaps(n, cv, rng) * gap_scale(rate_rps, cv)


def unit_gaps(n: int, cv: float, rng: np.random.Generator) -> np.ndarray:
    """:func:`arrival_gaps` before the rate enters: the standard exponential (or gamma) draws.
    numpy's ``exponential(scale)`` and ``gamma(shape, scale)`` are ``scale`` times these, drawn
    from the same stream, so ``unit_gaps(n, cv, rng) * gap_scale(rate, cv)`` is their draw bit
    for bit (tested): the rate may come after the draw."""
    if cv == 1.0:
        return rng.standard_exponential(size=n)
    return rng.standard_gamma(1.0 / cv**2, size=n)


def gap_scale(rate_rps: float, cv: float) -> float:
    """The scale of :func:`unit_gaps` at ``rate_rps``: the mean gap ``1 / rate`` over the gamma's
    shape ``1 / cv^2`` (1 for the exponential). A rate must be positive (numpy refused a
    negative scale where the draw took it)."""
    if not rate_rps > 0.0:
        raise ValueError(f"an arrival rate must be > 0 (got {rate_rps})")
    if cv == 1.0:
        return 1.0 / rate_rps
    shape = 1.0 / cv**2
    return 1.0 / (rate_rps * shape)


def synthetic_requests(
    n: int,
    *,
    rate_rps: float,
    input_median: float,
    input_sigma: float,
    output_median: float,
    output_sigma: float,
    input_min: int = 1,
    input_max: int | None = None,
    output_min: int = 1,
    output_max: int | None = None,
    hit_histogram: HitHistogram | None = None,
    hit_d_histogram: HitHistogram | None = None,
    arrival_cv: float = 1.0,
    seed: int = 0,
) -> Requests:
    """Seeded synthetic requests (arrival-sorted).

    Without ``hit_histogram`` hits are NaN (unknown); without ``hit_d_histogram``,
    ``hit_d`` is NaN (consumers such as the class builder then use ``hit_p``).
    """
    rng = _rng(seed)  # one stream, drawn in a fixed order
    arrival = bursty_arrivals(n, rate_rps, arrival_cv, seed=rng)
    inp = lognormal_lengths(
        n,
        input_median,
        input_sigma,
        min_tokens=max(1, input_min),
        max_tokens=input_max,
        seed=rng,
        field="input",
    )
    out = lognormal_lengths(
        n,
        output_median,
        output_sigma,
        min_tokens=max(0, output_min),
        max_tokens=output_max,
        seed=rng,
        field="output",
    )
    hit_p = (
        np.full(n, np.nan)
        if hit_histogram is None
        else sample_hit_rates(n, hit_histogram, seed=rng)
    )
    hit_d = (
        np.full(n, np.nan)
        if hit_d_histogram is None
        else sample_hit_rates(n, hit_d_histogram, seed=rng, field="hit_d_histogram")
    )
    return Requests(
        arrival_s=arrival, input_tokens=inp, output_tokens=out, hit_p=hit_p, hit_d=hit_d
    )


def assign_hit_rates(
    requests: Requests,
    hit_histogram: HitHistogram,
    *,
    hit_d_histogram: HitHistogram | None = None,
    seed: int = 0,
) -> Requests:
    """A copy of ``requests`` with ``hit_p`` (and ``hit_d``) drawn from stated histograms.

    For traces without prefix information (Azure) and a scenario's hit-rate distribution.
    """
    rng = _rng(seed)
    n = len(requests)
    hit_p = sample_hit_rates(n, hit_histogram, seed=rng)
    hit_d = (
        np.full(n, np.nan)
        if hit_d_histogram is None
        else sample_hit_rates(n, hit_d_histogram, seed=rng, field="hit_d_histogram")
    )
    return Requests(requests.arrival_s, requests.input_tokens, requests.output_tokens, hit_p, hit_d)


def write_generic_jsonl(
    requests: Requests, path: str | os.PathLike, *, chunk_rows: int = 100_000
) -> Path:
    """Write ``requests`` as generic JSONL (``arrival_s``, ``input_tokens``, ``output_tokens``,
    ``hit_rate`` = ``hit_p`` when known), atomically (:mod:`pdd_plan.common.atomic`), creating
    the folder if needed.

    Floats are written with ``repr`` so reading the file back gives the same values.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(p) as f:
        n = len(requests)
        for s in range(0, n, chunk_rows):
            a = requests.arrival_s[s : s + chunk_rows].tolist()
            i = requests.input_tokens[s : s + chunk_rows].tolist()
            o = requests.output_tokens[s : s + chunk_rows].tolist()
            h = requests.hit_p[s : s + chunk_rows].tolist()
            lines = [
                f'{{"arrival_s": {ai!r}, "input_tokens": {ii}, "output_tokens": {oi}'
                + ("}" if hi != hi else f', "hit_rate": {hi!r}}}')
                for ai, ii, oi, hi in zip(a, i, o, h, strict=True)
            ]
            f.write("\n".join(lines))
            f.write("\n")
    return p
