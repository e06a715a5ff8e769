"""Draws of the uncertain inputs: each input's marginal (the scenario's, or the shipped perf
error band), and N seeded space-filling draws of all of them together.

The draws are a Latin hypercube (seeded: each input's N strata in a random order, a uniform
point inside each) pushed through each marginal's inverse CDF; prefill and decode speed are joined by a Gaussian copula
with the scenario's `perf_correlation`. `iid` gives plain Monte Carlo draws instead (the
scenario approach's guarantee and the out-of-sample check need independent draws). Every
architecture is evaluated under the same draws (paired), so a comparison's noise cancels.

The perf band (inputs/error_band.py) gives, per model family, the median absolute error
m and the mean signed error b of predicted against measured throughput (error = predicted /
measured - 1, + optimistic). The speed factor is measured / predicted = 1 / (1 + error); its
logarithm is taken as normal, centred on the bias (-ln(1 + b)), with the spread at which its
median distance from that centre is ln(1 + m). (Centre and spread come from the two figures
separately: the band's tail is long, so its mean is not its centre, and a normal with both a
mean of ln(1 + b) and a median |ln(1 + error)| of ln(1 + m) need not exist: it did not for the
band of 2026-11-30, bias +24% over a median error of 21%.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pdd_plan.inputs import error_band, speed
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.uncertainty import NAMES, Spread, Uncertainty, kind

FLOOR = 0.01  # a factor is never drawn below 1% of the nominal (a normal's tail can go under 0)


_N01 = NormalDist()


def norm_ppf(u: np.ndarray | float) -> np.ndarray:
    """The standard normal's inverse CDF, elementwise (the stdlib's, Wichura's AS241: about
    1e-16 relative; scipy.stats is not imported for it, see `_levels`)."""
    a = np.asarray(u, float)
    return np.array([_N01.inv_cdf(float(x)) for x in a.ravel()]).reshape(a.shape)


def norm_cdf(z: np.ndarray | float) -> np.ndarray:
    a = np.asarray(z, float)
    return np.array([_N01.cdf(float(x)) for x in a.ravel()]).reshape(a.shape)


@dataclass(frozen=True)
class Law:
    """A distribution's inverse CDF, in closed form (or through norm_ppf)."""

    dist: str
    params: dict[str, float]

    def ppf(self, u: np.ndarray | float) -> np.ndarray:
        u, p = np.asarray(u, float), self.params
        if self.dist == "normal":
            return p["mean"] + p["sd"] * norm_ppf(u)
        if self.dist == "lognormal":
            return p["median"] * np.exp(p["sigma"] * norm_ppf(u))
        lo, hi = p["low"], p["high"]
        if self.dist == "uniform" or hi == lo:
            return lo + (hi - lo) * u
        c = (p["mode"] - lo) / (hi - lo)  # triangular: the CDF's two quadratic arms inverted
        left = lo + np.sqrt(u * (hi - lo) * (p["mode"] - lo))
        right = hi - np.sqrt((1 - u) * (hi - lo) * (hi - p["mode"]))
        return np.where(u < c, left, right)


@dataclass(frozen=True)
class Marginal:
    """One input's distribution (its inverse CDF), where it comes from, and its kind."""

    name: str
    dist: str
    params: dict[str, float]
    source: str
    law: Law

    @property
    def kind(self) -> str:
        return kind(self.name)

    def value(self, u: np.ndarray | float) -> np.ndarray:
        """The input at quantile level(s) u (the inverse CDF; factors floored at FLOOR, byte
        counts at 0)."""
        x = np.asarray(self.law.ppf(np.clip(u, 1e-9, 1 - 1e-9)), float)
        floor = {"factor": FLOOR, "bytes": 0.0}.get(self.kind)
        return x if floor is None else np.maximum(x, floor)

    def quantile(self, q: float) -> float:
        return float(self.value(q))


def _spread(s: Spread, name: str) -> Marginal:
    keys = ("mean", "sd", "median", "sigma", "low", "mode", "high")
    params = {k: float(getattr(s, k)) for k in keys if getattr(s, k) is not None}
    return Marginal(name, s.dist, params, s.source, Law(s.dist, params))


def band_sigma(median_abs: float) -> float:
    """The spread of ln(1 + error) whose median |.| about the centre is ln(1 + median_abs):
    ln(1 + m) / z_0.75 (the median of a half-normal is 0.6745 sigma)."""
    return float(np.log1p(median_abs) / _N01.inv_cdf(0.75))


def perf_marginal(model: ModelProfile, name: str) -> tuple[Marginal | None, str]:
    """The speed factor's law from the shipped band of the model's family (None: no band),
    centred on its median (`inputs.speed.band_centre`, the speed plans stand on)."""
    band, note = error_band.band_for_model(model)
    median, src = speed.band_centre(model)
    if band is None or median is None:
        return None, note
    params = {"median": median, "sigma": band_sigma(band["median_abs_error"])}
    return Marginal(name, "lognormal", params, src, Law("lognormal", params)), note


def line_marginal(lines: Sequence[LineSKU]) -> Marginal | None:
    """The rate one transfer gets, as the line profiles draw it by default (the largest
    `transfer_rate_sigma` of the candidates; None when no profile states one)."""
    stated = [s for s in lines if s.transfer_rate_sigma is not None]
    if not stated:
        return None
    top = max(stated, key=lambda s: s.transfer_rate_sigma or 0.0)
    params = {"median": 1.0, "sigma": float(top.transfer_rate_sigma or 0.0)}
    src = f"line profile {top.name}: transfer_rate_sigma (what sets one transfer's rate is assumed)"
    return Marginal("line_rate", "lognormal", params, src, Law("lognormal", params))


def marginals(
    unc: Uncertainty | None, model: ModelProfile, lines: Sequence[LineSKU] = ()
) -> tuple[list[Marginal], list[str]]:
    """The inputs' marginals in NAMES order, and notes (what was defaulted, and why): an
    input the scenario does not name is drawn from the perf error band (prefill and decode
    speed) or the line profiles (`line_rate`, where they state a spread), else not at all."""
    given = unc.inputs if unc is not None else None
    out: list[Marginal] = []
    notes: list[str] = []
    if unc is None:
        alone = "the perf error band" + (" and the line's rate" if line_marginal(lines) else "")
        notes.append(f"no uncertainty: section in the scenario: {alone} alone")
    for name in NAMES:
        s = getattr(given, name) if given is not None else None
        if s is not None:
            out.append(_spread(s, name))
        elif name == "line_rate":
            m = line_marginal(lines)
            if m is not None:
                out.append(m)
        elif name in ("prefill_speed", "decode_speed"):
            m, note = perf_marginal(model, name)
            if m is not None:
                out.append(m)
            elif name == "prefill_speed":
                notes.append(note)
    return out, notes


@dataclass(frozen=True)
class Draws:
    """N draws of the inputs: `values[i, j]` is input `names[j]` in draw i."""

    names: tuple[str, ...]
    marginals: tuple[Marginal, ...]
    values: np.ndarray  # (N, inputs)
    method: str

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def draw(self, i: int) -> dict[str, float]:
        return {n: float(self.values[i, j]) for j, n in enumerate(self.names)}

    def at(self, levels: dict[str, float] | None = None) -> dict[str, float]:
        """Every input at its median, those in `levels` at the given quantile level."""
        lv = levels or {}
        return {m.name: m.quantile(lv.get(m.name, 0.5)) for m in self.marginals}


def _levels(n: int, d: int, seed: int, iid: bool) -> np.ndarray:
    """(n, d) quantile levels. The Latin hypercube is built here, not by scipy.stats.qmc:
    importing scipy.stats costs about 1-2 s, more than the whole block may add to a plan."""
    rng = np.random.default_rng(seed)
    if d == 0:
        return np.zeros((n, 0))
    if iid:
        return rng.random((n, d))
    # each column: the n strata [k/n, (k+1)/n) in a random order, a uniform point in each
    strata = np.column_stack([rng.permutation(n) for _ in range(d)])
    return (strata + rng.random((n, d))) / n


def draw(
    ms: list[Marginal], n: int, seed: int, correlation: float = 1.0, iid: bool = False
) -> Draws:
    """`n` draws of `ms` (Latin hypercube, or independent with `iid`), seeded."""
    names = tuple(m.name for m in ms)
    u = _levels(n, len(ms), seed, iid)
    if "prefill_speed" in names and "decode_speed" in names:
        i, j = names.index("prefill_speed"), names.index("decode_speed")
        r = float(correlation)
        if r >= 1.0 - 1e-12:
            u[:, j] = u[:, i]  # one factor for both (the copula's limit, without a round trip)
        else:
            z1, z2 = norm_ppf(u[:, i]), norm_ppf(u[:, j])
            u[:, j] = norm_cdf(r * z1 + np.sqrt(max(1.0 - r * r, 0.0)) * z2)
    vals = np.column_stack([m.value(u[:, k]) for k, m in enumerate(ms)]) if ms else u
    method = "independent draws" if iid else "Latin hypercube (seeded)"
    return Draws(names, tuple(ms), vals, method)


def floored(d: Draws) -> list[str]:
    """A note per factor input whose draws the floor raised (its lower tail past the spread
    bound's 0.1% quantile reached 1% of the nominal): said, never silent."""
    out = []
    for j, m in enumerate(d.marginals):
        n = int(np.count_nonzero(d.values[:, j] <= FLOOR)) if m.kind == "factor" else 0
        if n:
            out.append(
                f"{m.name}: {n} of {len(d)} draws fell at or below {FLOOR:g} x nominal and "
                f"were raised to it (the {m.dist}'s lower tail)"
            )
    return out
