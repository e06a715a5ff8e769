"""The shape of a transfer's line delay beyond its bare transfer time.

A processor-sharing line slows a transfer by the others it shares with; its mean is the
limited-PS law of :mod:`limited_ps`. Its spread is far from exponential: a small
transfer is slowed by the few flows present when it starts (often none), a big one by the
average load over a long stay, so its delay concentrates around the mean.

* :func:`ps_sojourn_variance`: Var[T | x] of M/M/1-PS given the job's size (Coffman, Muntz &
  Trotter 1970, J. ACM 17(1); Kleinrock, Queueing Systems vol. 2 §4.4).
* :func:`two_moment`: a law with a given mean, variance and no-delay atom whose sum with the
  prefill wait stays in closed form: no delay (the transfer had the line to itself
  throughout) or a shifted exponential. Exact in both moments; with no atom and a squared CV
  of 1, exactly the exponential used before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def ps_sojourn_variance(x_s: np.ndarray, mean_s: float, rho: float) -> np.ndarray:
    """Var[T | x] in M/M/1-PS for a job needing ``x_s`` seconds of the whole server, mean job
    ``mean_s`` (= 1 / mu) at load ``rho`` (Coffman, Muntz & Trotter 1970):

    ``2 rho x / ((1 - rho)^3 mu) - 2 rho (1 - e^(-(1 - rho) mu x)) / ((1 - rho)^4 mu^2)``.

    Limits: ``rho x^2 / (1 - rho)^2`` as x -> 0 (x times the geometric number found in
    system), ``2 rho x / ((1 - rho)^3 mu)`` for large x (linear: the CV falls as 1 / sqrt(x)),
    0 at rho = 0. Written as ``2 rho / ((1 - rho)^4 mu^2) (a - 1 + e^-a)``, ``a = (1 - rho) mu x``,
    with the series for small ``a`` (the difference cancels there)."""
    x = np.asarray(x_s, dtype=float)
    if rho <= 0 or mean_s <= 0:
        return np.zeros_like(x)
    if rho >= 1:
        return np.full_like(x, np.inf)
    a = (1.0 - rho) * x / mean_s
    small = a < 1e-3
    with np.errstate(over="ignore"):
        g = np.where(small, a * a * (0.5 - a / 6.0 + a * a / 24.0), a + np.expm1(-a))
    return 2.0 * rho * mean_s**2 / (1.0 - rho) ** 4 * g


@dataclass(frozen=True)
class TwoMoment:
    """``E = B (shift + X)``: ``B`` is 1 with probability ``q`` (else 0: no delay), ``X``
    exponential of mean ``scale``; per class (arrays)."""

    shift: np.ndarray
    q: np.ndarray
    scale: np.ndarray


def two_moment(mean: np.ndarray, var: np.ndarray, atom: np.ndarray | float = 0.0) -> TwoMoment:
    """The law of mean ``m``, variance ``v`` and ``P(E = 0)`` = ``atom`` where the moments allow.

    Given ``E > 0`` (probability ``q = 1 - atom``) its mean is ``m' = m / q`` and its variance
    ``v' = (v + m^2) / q - m'^2``; at most ``m'^2``: ``shift = m' - sqrt(v')``, ``scale =
    sqrt(v')``. Above (the moments want more mass at 0 than ``atom``): ``shift = 0``,
    ``q = 2 m^2 / (v + m^2)``, ``scale = m / q`` (``E[E^2] = 2 m^2 / q``). Both exact in the
    two moments; with no atom and ``v = m^2`` the exponential of mean ``m``. An atom over
    ``v / (v + m^2)`` is cut to it (the rest then a point mass). A zero or
    non-finite mean keeps the exponential of that mean (q = 1, no shift)."""
    m = np.asarray(mean, dtype=float)
    v = np.broadcast_to(np.asarray(var, dtype=float), m.shape)
    p0 = np.clip(np.broadcast_to(np.asarray(atom, dtype=float), m.shape), 0.0, 1.0 - 1e-9)
    ok = (m > 0) & np.isfinite(m) & np.isfinite(v)
    ms = np.where(ok, m, 1.0)
    vs = np.where(ok, np.maximum(v, 0.0), 1.0)
    # an atom above v / (v + m^2) leaves no variance for the rest: cap it there
    q = 1.0 - np.minimum(p0, vs / (vs + ms * ms))
    mc = ms / q
    vc = (vs + ms * ms) / q - mc * mc
    narrow = vc <= mc * mc
    sd = np.sqrt(np.maximum(vc, 0.0))
    q = np.where(narrow, q, 2.0 * ms * ms / (vs + ms * ms))
    shift = np.where(narrow, mc - sd, 0.0)
    scale = np.where(narrow, sd, ms / q)
    return TwoMoment(
        shift=np.where(ok, shift, 0.0),
        q=np.where(ok, q, 1.0),
        scale=np.where(ok, scale, np.maximum(m, 0.0)),
    )


def delay_survival(u: np.ndarray, law: TwoMoment) -> np.ndarray:
    """P(E > u) per entry of ``law``: 1 below 0, ``q`` up to the shift, then the exponential."""
    u = np.asarray(u, dtype=float)
    x = np.maximum(u - law.shift, 0.0)
    pos = law.scale > 0
    with np.errstate(divide="ignore", over="ignore"):
        tail = np.where(pos, np.exp(-x / np.where(pos, law.scale, 1.0)), 0.0)
    return np.where(u < 0, 1.0, law.q * np.where(u < law.shift, 1.0, tail))


def transfer_quantiles(
    bare_s: np.ndarray,
    mean_s: np.ndarray,
    var_s2: np.ndarray,
    atom: np.ndarray,
    weight: np.ndarray,
    qs: tuple[float, ...],
    bare_sd_s: np.ndarray | None = None,
) -> list[float] | None:
    """Quantiles of a KV transfer's time over a weighted mixture: ``bare + E`` per entry, ``E``
    the two-moment delay of :func:`two_moment`; by bisection on the mixture's survival (60
    halvings: far below a microsecond). None when the weights are all zero.

    ``bare_sd_s``: each entry's spread of bare times (a stratum of requests whose sizes
    differ): its bare time then spreads uniformly with that standard deviation (half-width
    ``sqrt(3) sd``, never below zero), its survival the exact convolution
    (:func:`uniform_delay_survival`), so a quantile inside a wide stratum is not its mean's
    (where a transfer's time follows its size, the mean of the top half of requests is not
    their median) and the entry's no-delay chance is no atom of the mixture: a pool-bound
    line's transfers that get a slot at once (64% of them on the default's) take their bare
    time, as continuous as their sizes."""
    w = np.asarray(weight, dtype=float)
    if not np.isfinite(w).all() or w.sum() <= 0:
        return None
    w = w / w.sum()
    bare = np.asarray(bare_s, dtype=float)
    law = two_moment(mean_s, var_s2, atom)
    half = np.zeros_like(bare)
    if bare_sd_s is not None and np.any(np.asarray(bare_sd_s) > 0):
        half = uniform_half_width(bare, np.asarray(bare_sd_s, dtype=float))
    if not (np.isfinite(law.shift).all() and np.isfinite(law.scale).all()):
        return [float("inf")] * len(qs)
    lo0 = float((bare - half).min()) if bare.size else 0.0
    # no entry's own survival at its top quantile is above the mixture's there (a mixture's
    # survival is at most its entries' largest), so every quantile asked lies below the
    # largest of the entries' own: a bracket 60 halvings resolve (a rare, long delay's
    # 60 x scale may be ~1e20 s, which they do not)
    tail = 1.0 - max(qs)
    with np.errstate(divide="ignore"):
        own = (
            bare + half + law.shift + law.scale * np.log(np.maximum(law.q / max(tail, 1e-300), 1.0))
        )
    hi0 = float(np.max(own)) * (1 + 1e-9) + 1e-9
    seen: dict[float, float] = {}  # the mixture's survival at each t asked

    def ahead(lo: float, hi: float) -> None:
        """The next three steps' midpoints from [lo, hi], both ways, in one vectorized pass
        (each row's survival and dot product as a call of its own gives them): deeper, the
        rows' dot products of points never visited cost more than the passes saved."""
        mid = (lo + hi) / 2
        if mid in seen:
            return
        ts = [t for t in dict.fromkeys([mid, *midpoints_ahead(lo, hi, 3)]) if t not in seen]
        rows = uniform_delay_survival(np.array(ts)[:, None] - bare, half, law)
        for t, row in zip(ts, rows):
            seen[t] = float(np.dot(w, row.copy()))

    def above(q: float):
        return lambda t: seen[t] > 1.0 - q

    return [bisect(above(q), lo0 - 1e-12, hi0, 60, ahead) for q in qs]


SPREAD_POINTS = 4  # points a spread entry's uniform is split into (TTFT's fixed part)
# entries spread less than this (a share of their value, and seconds) stay one point: the
# survival passes cost in proportion to the entries, and a narrow stratum moves no quantile
SPREAD_MIN_REL, SPREAD_MIN_S = 0.01, 1e-3


def spread_points(
    values: np.ndarray, weight: np.ndarray, sd: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each entry spread by ``sd`` as :data:`SPREAD_POINTS` equal-weight points of a uniform
    of its value and that standard deviation (half-width ``sqrt(3) sd``, never below zero);
    an entry spread less than :data:`SPREAD_MIN_REL` of its value or :data:`SPREAD_MIN_S`
    stays one point. The points, their weights, and the entry each point came from."""
    k = SPREAD_POINTS
    v = np.asarray(values, dtype=float)
    wt = np.asarray(weight, dtype=float)
    width = np.minimum(np.maximum(sd, 0.0), np.maximum(v, 0.0) / np.sqrt(3.0))
    wide = (width > SPREAD_MIN_REL * np.abs(v)) & (width > SPREAD_MIN_S)
    n = np.where(wide, k, 1)
    src = np.repeat(np.arange(v.size), n)
    off = (2.0 * np.arange(k) + 1.0 - k) / k * np.sqrt(3.0)  # sd 1 up to the grid's
    first = np.concatenate(([0], np.cumsum(n)[:-1]))
    pos = np.arange(src.size) - first[src]  # a point's place among its entry's
    step = np.where(wide[src], off[np.minimum(pos, k - 1)], 0.0)
    return v[src] + width[src] * step, wt[src] / n[src], src


def uniform_half_width(values: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Half-width of the uniform of standard deviation ``sd`` around each of ``values``
    (``sqrt(3) sd``), never reaching below zero; 0 where the entry is narrower than
    :data:`SPREAD_MIN_REL` of its value or :data:`SPREAD_MIN_S` (as :func:`spread_points`)."""
    v = np.asarray(values, dtype=float)
    width = np.minimum(np.maximum(sd, 0.0), np.maximum(v, 0.0) / np.sqrt(3.0))
    wide = (width > SPREAD_MIN_REL * np.abs(v)) & (width > SPREAD_MIN_S)
    return np.where(wide, np.sqrt(3.0) * width, 0.0)


def _delay_integral(u: np.ndarray, law: TwoMoment) -> np.ndarray:
    """``F(u)`` with ``F' = P(E > u)`` and ``F(0) = 0``: ``u`` below 0, ``q u`` up to the
    shift, then ``q (shift + scale (1 - e^(-(u - shift) / scale)))``."""
    x = np.maximum(u - law.shift, 0.0)
    pos = law.scale > 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        tail = np.where(pos, law.scale * -np.expm1(-x / np.where(pos, law.scale, 1.0)), 0.0)
    body = law.q * (np.minimum(np.maximum(u, 0.0), law.shift) + tail)
    return np.where(u < 0, u, body)


def uniform_delay_survival(u: np.ndarray, half: np.ndarray, law: TwoMoment) -> np.ndarray:
    """``P(U + E > u)``, ``U`` uniform on ``[-half, half]`` (0: a point, :func:`delay_survival`)
    and ``E`` of ``law``: the survival's mean over the window, ``(F(u + h) - F(u - h)) / 2h``
    (:func:`_delay_integral`), exact and continuous in ``u`` however much of ``E`` is an atom."""
    u = np.asarray(u, dtype=float)
    point = delay_survival(u, law)
    if not np.any(half > 0):
        return point
    h = np.broadcast_to(half, u.shape)
    wide = h > 0
    hs = np.where(wide, h, 1.0)
    avg = (_delay_integral(u + hs, law) - _delay_integral(u - hs, law)) / (2.0 * hs)
    return np.where(wide, np.clip(avg, 0.0, 1.0), point)


def midpoints_ahead(lo: float, hi: float, depth: int) -> list[float]:
    """The midpoints the next `depth` steps of a bisection of [lo, hi] may visit, computed as
    its steps compute them (``(lo + hi) / 2`` of the bracket each earlier step leaves), the
    first step's first; a step on a bracket one ulp wide ends the search there."""
    out, level = [], [(lo, hi)]
    for _ in range(depth):
        nxt = []
        for a, b in level:
            m = (a + b) / 2
            if m == a or m == b:
                continue
            out.append(m)
            nxt += [(a, m), (m, b)]
        level = nxt
    return out


def bisect(above, lo: float, hi: float, halvings: int, ahead=None) -> float:
    """``hi`` after ``halvings`` steps of ``mid = (lo + hi) / 2``, ``lo = mid`` where
    ``above(mid)``, else ``hi = mid``: the bisections of the quantiles here and in
    :func:`pdd_plan.latency.ttft.ttft_quantiles`. It stops once the interval is one ulp wide,
    with the ``hi`` the remaining steps would leave (they change nothing: a ``mid`` equal to
    ``hi`` leaves ``hi``; one equal to ``lo`` moves ``hi`` to it once, unless ``above(lo)``):
    ~53 survivals of 60 at seconds-scale quantiles. ``ahead(lo, hi)``, where given, is called
    before each step's ``above``: it may evaluate the next steps' points at once."""
    for _ in range(halvings):
        mid = (lo + hi) / 2
        if mid == hi:
            return hi
        if ahead is not None:
            ahead(lo, hi)
        if mid == lo:
            return hi if above(mid) else mid
        if above(mid):
            lo = mid
        else:
            hi = mid
    return hi
