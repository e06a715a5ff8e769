"""TTFT's tail: the chance a class misses its TTFT target (prefill wait plus the line's wait
beyond a fixed part) and the quantiles of the class mixture."""

from __future__ import annotations

import numpy as np

from pdd_plan.latency.line import delay_shape
from pdd_plan.latency.line.delay_shape import spread_points
from pdd_plan.latency.prefill.pool import PrefillPool
from pdd_plan.latency.prefill.wait import WaitLaw, wait_plus_exponential_survival


def ttft_survival(
    slack: np.ndarray,
    pool: PrefillPool,
    line_wait: np.ndarray | None = None,
    line_wait_var: np.ndarray | None = None,
    line_wait_atom: np.ndarray | None = None,
) -> np.ndarray:
    """P(W + E > slack) per class: W the prefill wait (the pool's law), E the line's queueing of mean `line_wait`
    (zero: no line), variance `line_wait_var` (None: exponential) and P(E = 0) `line_wait_atom`,
    E = B (shift + X) of :func:`delay_shape.two_moment`, so P(W + E > t) =
    q P(W + X > t - shift) + (1 - q) P(W > t). 1 where slack < 0."""
    wait = pool.wait_law
    if line_wait is None or line_wait_var is None:
        return wait_plus_exponential_survival(wait, slack, line_wait)
    return _survival(slack, wait, _delay_law(line_wait, line_wait_var, line_wait_atom))


def _delay_law(
    line_wait: np.ndarray, line_wait_var: np.ndarray, line_wait_atom: np.ndarray | None
) -> delay_shape.TwoMoment:
    return delay_shape.two_moment(
        line_wait, line_wait_var, 0.0 if line_wait_atom is None else line_wait_atom
    )


def _survival(slack: np.ndarray, wait: WaitLaw, law: delay_shape.TwoMoment) -> np.ndarray:
    """:func:`ttft_survival` given the line delay's law. Element-wise, so a call over many
    slacks at once (rows of targets, paths side by side) gives each entry bit for bit what a
    call of its own would."""
    s = np.asarray(slack, dtype=float)
    out = law.q * wait_plus_exponential_survival(wait, s - law.shift, law.scale)
    if np.any(law.q < 1.0):  # where q is 1 the second part adds exactly 0.0
        out = out + (1.0 - law.q) * wait_plus_exponential_survival(wait, s, None)
    return out


def miss_probability(
    ttft_fixed_s: np.ndarray,
    pool: PrefillPool,
    sla_s: float,
    line_wait: np.ndarray | None = None,
    line_wait_var: np.ndarray | None = None,
    line_wait_atom: np.ndarray | None = None,
) -> np.ndarray:
    """P(TTFT > sla) per class: the prefill wait plus the line queueing must fit the slack."""
    return ttft_survival(sla_s - ttft_fixed_s, pool, line_wait, line_wait_var, line_wait_atom)


def miss_probabilities(
    ttft_fixed_s: dict[str, np.ndarray],
    pool: PrefillPool,
    slas_s: tuple[float, ...],
    line_wait: dict[str, np.ndarray],
    line_wait_var: dict[str, np.ndarray],
    line_wait_atom: dict[str, np.ndarray],
) -> list[dict[str, np.ndarray]]:
    """:func:`miss_probability` of every path (the keys of `ttft_fixed_s`) at every target in
    `slas_s`, in one vectorized pass over all of them (the optimizer asks for every line option
    of every combination: one numpy call each instead of one per target and path). Each entry is
    what its own call gives, bit for bit: every step is element-wise.

    Memoized per path by value (the wait law's points and tail, the targets, the path's
    arrays): PDD's direct path and CDC-PD's only one are the same numbers under every line
    option, in pools built anew per architecture; the paths not in the memo go in one pass."""
    wait = pool.wait_law
    slas = tuple(float(x) for x in slas_s)
    base = (_wait_key(wait), slas)
    parts = (ttft_fixed_s, line_wait, line_wait_var, line_wait_atom)
    arrays = {p: [np.asarray(d[p], dtype=float) for d in parts] for p in ttft_fixed_s}
    keys = {p: (base, *(a.tobytes() for a in arrays[p])) for p in arrays}
    got = {p: _MISS_CACHE.get(k) for p, k in keys.items()}
    # one path per distinct key (the relay paths' numbers are alike, and the same under
    # every line option): equal keys, equal numbers, whichever path is computed
    todo = list({keys[p]: p for p in got if got[p] is None}.values())
    if todo:
        cut = np.cumsum([len(arrays[p][0]) for p in todo])[:-1]

        def joined(i: int) -> np.ndarray:
            return np.concatenate([arrays[p][i] for p in todo])

        fixed = joined(0)
        law = _delay_law(joined(1), joined(2), joined(3))
        out = _survival(np.stack([sla - fixed for sla in slas_s]), wait, law)
        if len(_MISS_CACHE) > _MISS_CACHE_MAX:
            _MISS_CACHE.clear()
        split = [np.split(row, cut) for row in out]
        new = {keys[p]: tuple(rows[i] for rows in split) for i, p in enumerate(todo)}
        _MISS_CACHE.update(new)
        # from this call's own rows, not the memo (another thread's solve may clear it)
        got = {p: hit if hit is not None else new[keys[p]] for p, hit in got.items()}
    # a caller's change to its rows stays its own
    return [{p: got[p][j].copy() for p in arrays} for j in range(len(slas))]  # type: ignore[index]


_MISS_CACHE: dict[tuple, tuple] = {}
# entries hold six per-stratum arrays (key and rows): the default's planning makes ~30
_MISS_CACHE_MAX = 1024


def _wait_key(wait: WaitLaw) -> tuple:
    """A prefill wait law by what the survival reads of it (its points, their masses, its
    exponential tail, whether it is stable)."""
    points = np.asarray(wait.points, dtype=float).tobytes()
    weights = np.asarray(wait.weights, dtype=float).tobytes()
    t = wait.tail
    return (bool(wait.stable), points, weights, float(t.mass), float(t.shift), float(t.rate))


def mixture_quantiles(
    values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]
) -> list[float]:
    """Quantiles of a discrete weighted distribution (lower quantile)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    c = np.cumsum(w) / np.sum(w)
    return [float(v[min(np.searchsorted(c, q - 1e-12), len(v) - 1)]) for q in qs]  # type: ignore[call-overload]


def ttft_quantiles(
    fixed: np.ndarray,
    share: np.ndarray,
    pool: PrefillPool,
    qs: tuple[float, ...],
    line_wait: np.ndarray | None = None,
    line_wait_var: np.ndarray | None = None,
    line_wait_atom: np.ndarray | None = None,
    fixed_sd: np.ndarray | None = None,
) -> list[float]:
    """Quantiles of TTFT = fixed part (per class-path, weighted) + prefill wait + line queueing
    (mean `line_wait`, variance `line_wait_var`, P(no delay) `line_wait_atom`; None: exponential).
    `fixed_sd`: each entry's spread of fixed parts (a stratum of requests of different sizes),
    spread uniformly (:func:`pdd_plan.latency.line.delay_shape.spread_points`)."""
    if fixed_sd is not None and np.any(np.asarray(fixed_sd) > 0):
        fixed, share, src = spread_points(fixed, share, np.asarray(fixed_sd, dtype=float))
        line_wait = None if line_wait is None else np.asarray(line_wait)[src]
        line_wait_var = None if line_wait_var is None else np.asarray(line_wait_var)[src]
        line_wait_atom = None if line_wait_atom is None else np.asarray(line_wait_atom)[src]
    keep = share > 1e-12
    if not np.any(keep):
        return [0.0 for _ in qs]
    jit = np.zeros_like(fixed) if line_wait is None else np.asarray(line_wait, float)
    var = jit**2 if line_wait_var is None else np.asarray(line_wait_var, float)
    atom = np.zeros_like(jit) if line_wait_atom is None else np.asarray(line_wait_atom, float)
    fixed, jit, var, atom = fixed[keep], jit[keep], var[keep], atom[keep]
    share = share[keep] / share[keep].sum()

    law, wait = _delay_law(jit, var, atom), pool.wait_law  # the same at every point of the search

    seen: dict[float, float] = {}  # the quantiles' searches start alike: each point once

    def evaluate(ts: list[float]) -> None:
        """The mixture's survival at each new t of `ts`, all in one vectorized pass (each as its
        own call would give it: the survival is element-wise, each row's dot product alone)."""
        new = [t for t in dict.fromkeys(ts) if t not in seen]
        if new:
            rows = _survival(np.array(new)[:, None] - fixed, wait, law)
            for t, row in zip(new, rows):
                seen[t] = float(np.dot(share, row.copy()))

    def surv(t: float) -> float:
        evaluate([t])
        return seen[t]

    his = []
    start = float(fixed.max() + 10 * jit.max()) + 1.0
    evaluate([start * 2.0**k for k in range(4)])  # the brackets' first doublings, in one pass
    for q in qs:
        hi = start
        while surv(hi) > 1 - q:
            hi *= 2.0
            if hi > 1e7:
                break
        his.append(hi)
    return _bisect_together(qs, his, evaluate, seen)


# points of the quantiles' searches evaluated in one survival pass (the next steps' midpoints,
# both ways): the pass's cost is flat up to about this many (~0.2 ms on the default's 137
# strata; one search of ~35 steps then takes ~9 passes)
LOOKAHEAD_POINTS = 32


# a quantile's search stops once its bracket is this narrow relative to its upper end: plans
# print TTFT to 1e-4 s, and the halvings from there to one ulp (~15 of ~55) were a third of a
# regime map's quantile searches
QUANTILE_REL_TOL = 1e-10


def _bisect_together(qs, his: list[float], evaluate, seen: dict[float, float]) -> list[float]:
    """:func:`delay_shape.bisect` (60 halvings from [0, hi]) of every quantile in `qs` side by
    side, each stopped once its bracket is within QUANTILE_REL_TOL of its upper end (which it
    returns: the survival there is at most 1 - q): each step's midpoints in one
    :func:`evaluate` call, each quantile's steps and stops its own search's. The midpoints of
    the next few steps, both ways, are evaluated ahead in one call (:data:`LOOKAHEAD_POINTS`):
    the values are each point's own, so the steps and the result are the same."""
    lo, hi, done = [0.0] * len(qs), list(his), [False] * len(qs)
    for _ in range(60):
        for i in range(len(qs)):
            done[i] = done[i] or hi[i] - lo[i] <= QUANTILE_REL_TOL * hi[i]
        if all(done):
            break
        mids = [(a + b) / 2 for a, b in zip(lo, hi)]
        if any(not done[i] and m != hi[i] and m not in seen for i, m in enumerate(mids)):
            # the next steps' midpoints of every open search, whichever way each step goes,
            # in one pass: a survival pass costs about the same for 1 point as for 30
            live = [i for i in range(len(qs)) if not done[i]]
            depth = max(1, int(np.log2(LOOKAHEAD_POINTS / len(live) + 1)))
            evaluate([m for i in live for m in delay_shape.midpoints_ahead(lo[i], hi[i], depth)])
        evaluate([m for i, m in enumerate(mids) if not done[i] and m != hi[i]])
        for i, q in enumerate(qs):
            m = mids[i]
            if done[i] or m == hi[i]:  # one ulp wide: hi stays
                done[i] = True
                continue
            above = seen[m] > 1 - q
            if m == lo[i]:  # one ulp wide: hi moves to lo unless lo is above
                hi[i], done[i] = (hi[i] if above else m), True
            elif above:
                lo[i] = m
            else:
                hi[i] = m
        if all(done):
            break
    return hi
