"""Draws of the uncertain inputs: each input's marginal (the scenario's, or the shipped perf
error band), and N seeded space-filling draws of all of them together.

The draws are a Latin hypercube (`scipy.stats.qmc.LatinHypercube`, scrambled, seeded) pushed
through each marginal's inverse CDF; prefill and decode speed are joined by a Gaussian copula
with the scenario's `perf_correlation`. `iid` gives plain Monte Carlo draws instead (the
scenario approach's guarantee and the out-of-sample check need independent draws). Every
architecture is evaluated under the same draws (paired), so a comparison's noise cancels.

The perf band (calibration/error_band.py) gives, per model family, the median absolute error
m and the mean signed error b of predicted against measured throughput (error = predicted /
measured - 1, + optimistic). The speed factor is measured / predicted = 1 / (1 + error); its
logarithm is taken as normal, centred on the bias (-ln(1 + b)), with the spread at which its
median distance from that centre is ln(1 + m). (Centre and spread come from the two figures
separately: the band's tail is long, so its mean is not its centre, and a normal with both a
mean of ln(1 + b) and a median |ln(1 + error)| of ln(1 + m) need not exist: it did not for the
band of 2026-11-30, bias +24% over a median error of 21%.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.stats import qmc

from pdd_plan.calibration import error_band
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.uncertainty import NAMES, Spread, Uncertainty, kind

FLOOR = 0.01  # a factor is never drawn below 1% of the nominal (a normal's tail can go under 0)


@dataclass(frozen=True)
class Marginal:
    """One input's distribution (as `scipy.stats` frozen), where it comes from, and its kind."""

    name: str
    dist: str
    params: dict[str, float]
    source: str
    law: object  # scipy frozen distribution

    @property
    def kind(self) -> str:
        return kind(self.name)

    def value(self, u: np.ndarray | float) -> np.ndarray:
        """The input at quantile level(s) u (the inverse CDF; factors floored at FLOOR)."""
        x = np.asarray(self.law.ppf(np.clip(u, 1e-9, 1 - 1e-9)), float)
        return np.maximum(x, FLOOR) if self.kind == "factor" else x

    def quantile(self, q: float) -> float:
        return float(self.value(q))


def law_of(s: Spread):
    """The scipy distribution a `Spread` names."""
    if s.dist == "normal":
        return stats.norm(s.mean, s.sd)
    if s.dist == "lognormal":
        return stats.lognorm(s.sigma, scale=s.median) if s.sigma > 0 else _point(s.median)
    if s.dist == "uniform":
        return stats.uniform(s.low, s.high - s.low) if s.high > s.low else _point(s.low)
    if s.high == s.low:
        return _point(s.low)
    return stats.triang((s.mode - s.low) / (s.high - s.low), s.low, s.high - s.low)


class _point:
    """A distribution with no spread (the scipy ones need a positive scale)."""

    def __init__(self, x: float):
        self.x = float(x)

    def ppf(self, u):
        return np.full(np.shape(u), self.x)


def _spread(s: Spread, name: str) -> Marginal:
    keys = ("mean", "sd", "median", "sigma", "low", "mode", "high")
    params = {k: float(getattr(s, k)) for k in keys if getattr(s, k) is not None}
    return Marginal(name, s.dist, params, s.source, law_of(s))


def band_sigma(median_abs: float) -> float:
    """The spread of ln(1 + error) whose median |.| about the centre is ln(1 + median_abs):
    ln(1 + m) / z_0.75 (the median of a half-normal is 0.6745 sigma)."""
    return float(np.log1p(median_abs) / stats.norm.ppf(0.75))


def perf_marginal(model: ModelProfile, name: str) -> tuple[Marginal | None, str]:
    """The speed factor's law from the shipped band of the model's family (None: no band)."""
    band, note = error_band.band_for_model(model)
    if band is None:
        return None, note
    b = band.get("mean_signed_error") or 0.0
    mu = float(np.log1p(b))  # of ln(1 + error)
    sigma = band_sigma(band["median_abs_error"])
    median = float(np.exp(-mu))
    src = (
        f"shipped error band ({band['family']}, {band['rows']} held-out rows, {band['basis']}): "
        f"median |error| {band['median_abs_error']:.0%}, bias {b:+.0%}"
    )
    law = stats.lognorm(sigma, scale=median)
    return Marginal(name, "lognormal", {"median": median, "sigma": sigma}, src, law), note


def marginals(unc: Uncertainty | None, model: ModelProfile) -> tuple[list[Marginal], list[str]]:
    """The inputs' marginals in NAMES order, and notes (what was defaulted, and why)."""
    given = unc.inputs if unc is not None else None
    out: list[Marginal] = []
    notes: list[str] = []
    if unc is None:
        notes.append("no uncertainty: section in the scenario: the perf error band alone")
    for name in NAMES:
        s = getattr(given, name) if given is not None else None
        if s is not None:
            out.append(_spread(s, name))
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
    if d == 0:
        return np.zeros((n, 0))
    if iid:
        return np.random.default_rng(seed).random((n, d))
    return qmc.LatinHypercube(d=d, scramble=True, seed=seed).random(n)


def draw(
    ms: list[Marginal], n: int, seed: int, correlation: float = 1.0, iid: bool = False
) -> Draws:
    """`n` draws of `ms` (Latin hypercube, or independent with `iid`), seeded."""
    names = tuple(m.name for m in ms)
    u = _levels(n, len(ms), seed, iid)
    if "prefill_speed" in names and "decode_speed" in names:
        i, j = names.index("prefill_speed"), names.index("decode_speed")
        z1, z2 = stats.norm.ppf(u[:, i]), stats.norm.ppf(u[:, j])
        r = float(correlation)
        u[:, j] = stats.norm.cdf(r * z1 + np.sqrt(max(1.0 - r * r, 0.0)) * z2)
    vals = np.column_stack([m.value(u[:, k]) for k, m in enumerate(ms)]) if ms else u
    method = "independent draws" if iid else "Latin hypercube (scrambled, seeded)"
    return Draws(names, tuple(ms), vals, method)
