"""The prefill wait's law, whichever queue made it: one protocol both laws implement (one
instance: the exact GI/G/1 lattice, :mod:`gig1`; a pool: Tijms' expansion, :mod:`gigc`), and
the one convolution TTFT needs, the wait plus an exponential line delay.

Every law is read as point masses plus at most one shifted exponential: the lattice is all
points, the expansion an atom at 0 plus ``t0 + Exp(delta)``. The convolution is then one sum,
in closed form for each part, so neither law is sampled or discretised for TTFT."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class ExponentialTail:
    """With probability ``mass`` the wait is ``shift + Exp(rate)`` (seconds, 1/s)."""

    mass: float
    shift: float
    rate: float


NO_TAIL = ExponentialTail(0.0, 0.0, float("inf"))


class WaitLaw(Protocol):
    """The stationary FIFO wait W of a request at the prefill pool."""

    @property
    def stable(self) -> bool:
        """False when the queue has no steady state (every wait unbounded)."""
        ...

    @property
    def wait_probability(self) -> float:
        """P(W > 0)."""
        ...

    @property
    def mean(self) -> float:
        """E[W] in seconds (inf when unstable)."""
        ...

    @property
    def points(self) -> np.ndarray:
        """Seconds of the law's point masses (an atom at 0 first)."""
        ...

    @property
    def weights(self) -> np.ndarray:
        """The point masses' probabilities; with :attr:`tail`'s mass they sum to 1."""
        ...

    @property
    def tail(self) -> ExponentialTail:
        """The law's exponential part (:data:`NO_TAIL` for a law of points only)."""
        ...

    def survival(self, t: np.ndarray | float) -> np.ndarray:
        """P(W > t)."""
        ...

    def quantile(self, q: float) -> float:
        """The q-quantile of W (0 when the atom at 0 holds it)."""
        ...


def wait_plus_exponential_survival(
    law: WaitLaw, slack: np.ndarray, line_wait: np.ndarray | None = None
) -> np.ndarray:
    """P(W + E > slack), element-wise: W of ``law``, E exponential of mean ``line_wait`` (zero
    or None: E = 0). 1 where slack < 0 and everywhere for an unstable law.

    Each point mass ``p`` at ``w`` adds ``p`` past it and ``p e^-(t - w)/m`` before it; the tail
    ``shift + Exp(a)`` with E of rate ``b = 1 / m`` adds the two exponentials' convolution
    ``(b e^(-a u) - a e^(-b u)) / (b - a)`` (``(1 + a u) e^(-a u)`` where the rates meet),
    ``u = t - shift``."""
    t = np.maximum(np.asarray(slack, dtype=float), 0.0)
    if not law.stable:
        return np.ones_like(t)
    m = (
        np.zeros_like(t)
        if line_wait is None
        else np.broadcast_to(np.asarray(line_wait, float), t.shape)
    )
    out = _points_part(law.points, law.weights, t, m)
    if law.tail.mass > 0:
        out = out + law.tail.mass * _tail_part(law.tail, t, m)
    return np.where(np.asarray(slack) < 0, 1.0, np.clip(out, 0.0, 1.0))


def _points_part(w: np.ndarray, p: np.ndarray, t: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Sum over the point masses ``p`` at ``w`` of P(w + E > t), E of mean ``m``.

    The summaries' bisections call this thousands of times over (strata x points) arrays: the
    terms are made in one buffer, in place, and the exponential (most of the time) only for the
    points before ``t`` and only where some ``m`` > 0 (with ``m`` all 0 every term is 0 or its
    mass); each entry is the same IEEE operations as
    ``p * where(w > t, 1, exp(-max(t - w, 0) / m))``, summed the same way."""
    tt, mm = t[..., None], m[..., None]
    past = w > tt
    pos = mm > 0
    if pos.any():
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            e = np.subtract(tt, w)
            np.maximum(e, 0.0, out=e)
            np.divide(e, -np.where(pos, mm, 1.0), out=e)  # -(x) / m is x / (-m), bit for bit
            np.exp(e, out=e, where=~past)  # a point past t adds its whole mass: no exponential
        if not pos.all():
            e = np.where(pos, e, 0.0)
    else:
        e = np.zeros(past.shape)
    np.copyto(e, 1.0, where=past)
    np.multiply(p, e, out=e)
    return np.sum(e, axis=-1)


def _tail_part(tail: ExponentialTail, t: np.ndarray, m: np.ndarray) -> np.ndarray:
    """P(shift + X + E > t), X of rate ``tail.rate``, E of mean ``m`` (0: E = 0)."""
    a, t0 = tail.rate, tail.shift
    u = np.maximum(t - t0, 0.0)  # the exponential part of a long wait starts at t0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ea = np.exp(-a * u)  # the wait's own tail, in every branch: computed once
        pos = m > 0
        if not pos.any():  # no line delay anywhere (the atom's part of a TTFT): the tail alone
            return ea
        b = np.where(pos, 1.0 / np.where(pos, m, 1.0), np.inf)
        close = np.abs(b - a) < 1e-9 * np.maximum(a, 1.0)
        conv = np.where(
            close,
            (1 + a * u) * ea,
            (b * ea - a * np.exp(-b * u)) / np.where(close, 1.0, b - a),
        )
    delayed = np.where(t < t0, 1.0, conv)
    return delayed if pos.all() else np.where(pos, delayed, ea)
