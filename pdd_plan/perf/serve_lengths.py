"""Request-length distributions of serving benchmarks, as (values, weights) over whole tokens.

The random generators are the benchmark clients' own:
- SGLang `bench_serving --dataset-name random` (sample_random_requests):
  input  ~ randint(max(int(L * r), 1), L + 1)   -> uniform over [max(floor(L r), 1), L]
  output ~ randint(int(O * r), O + 1)            -> uniform over [floor(O r), O]
  (sgl-project/sglang python/sglang/bench_serving.py; r = --random-range-ratio, default 0.0
  in older releases, so the mean request is half the stated lengths).
- vLLM `vllm bench serve --dataset-name random` (RandomDataset.sample):
  uniform over [int(X (1 - r)), int(X (1 + r))] for input and output (r < 1, default 0.0).
An engine emits at least one token, so outputs are counted from 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.common.errors import InputError

MAX_SUPPORT = 1 << 20  # distinct lengths held; a uniform wider than this is binned


@dataclass(frozen=True)
class Lengths:
    """A length distribution: `values` (tokens, ascending) with probabilities `weights`."""

    values: np.ndarray
    weights: np.ndarray
    label: str

    @property
    def mean(self) -> float:
        return float(np.dot(self.values, self.weights))

    @property
    def second_moment(self) -> float:
        return float(np.dot(self.values**2, self.weights))

    @property
    def fixed(self) -> bool:
        return len(self.values) == 1

    @property
    def low(self) -> float:
        return float(self.values[0])

    @property
    def high(self) -> float:
        return float(self.values[-1])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.choice(self.values, size=n, p=self.weights)

    def mean_of(self, f) -> float:
        """E[f(length)] for a vectorized f."""
        return float(np.dot(f(self.values.astype(float)), self.weights))


def _check(n: float, flag: str) -> None:
    if not np.isfinite(n) or n < 1:
        raise InputError(None, flag, f"must be >= 1, got {n}", "give a token count")


def fixed(n: float, flag: str = "--input-tokens") -> Lengths:
    _check(n, flag)
    return Lengths(np.array([float(round(n))]), np.array([1.0]), f"{round(n)}")


def _uniform(lo: int, hi: int, label: str, floor: int) -> Lengths:
    lo = max(lo, floor)
    hi = max(hi, lo)
    if hi - lo + 1 > MAX_SUPPORT:
        v = np.linspace(lo, hi, MAX_SUPPORT)
    else:
        v = np.arange(lo, hi + 1, dtype=float)
    return Lengths(v, np.full(len(v), 1.0 / len(v)), label)


def _ratio(r: float, flag: str, hi: float) -> None:
    if not (0.0 <= r <= hi):
        raise InputError(None, flag, f"must be in [0, {hi:g}], got {r}", "e.g. 0.8")


def sglang_random(n: int, ratio: float, flag: str = "--input-range-ratio") -> Lengths:
    """SGLang bench_serving's draw: uniform over [floor(n * ratio), n] (inputs from 1)."""
    _check(n, flag)
    _ratio(ratio, flag, 1.0)
    return _uniform(int(n * ratio), int(n), f"U[{int(n * ratio)}, {n}]", 1)


def vllm_random(n: int, ratio: float, flag: str = "--input-range-ratio") -> Lengths:
    """vLLM bench serve's draw: uniform over [int(n (1 - r)), int(n (1 + r))]."""
    _check(n, flag)
    _ratio(ratio, flag, 0.999)
    lo, hi = int(n * (1 - ratio)), int(n * (1 + ratio))
    return _uniform(lo, hi, f"U[{lo}, {hi}]", 1)


def histogram(values, weights, flag: str = "--lengths") -> Lengths:
    """A dataset's lengths as a histogram (bin centres and counts or shares)."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    if v.ndim != 1 or v.shape != w.shape or len(v) == 0:
        raise InputError(None, flag, "values and weights must be equal-length lists", "fix it")
    if np.any(~np.isfinite(v)) or np.any(v < 1) or np.any(~np.isfinite(w)) or np.any(w < 0):
        raise InputError(None, flag, "lengths must be >= 1, weights >= 0", "fix the histogram")
    if w.sum() <= 0:
        raise InputError(None, flag, "weights sum to zero", "give counts or shares")
    order = np.argsort(v)
    return Lengths(v[order], w[order] / w.sum(), f"histogram of {len(v)} bins")


def drawn(
    n: int, ratio: float | None, generator: str, flag: str = "--input-range-ratio"
) -> Lengths:
    """The lengths a benchmark client draws for a stated length `n`: fixed without a ratio
    (or SGLang's ratio 1.0), else the client's own generator."""
    if ratio is None:
        return fixed(n, flag)
    _ratio(ratio, flag, 0.999 if generator == "vllm" else 1.0)
    if generator == "vllm":
        return vllm_random(n, ratio, flag) if ratio > 0 else fixed(n, flag)
    return sglang_random(n, ratio, flag) if ratio < 1 else fixed(n, flag)


def scaled_to_mean(d: Lengths, mean: float) -> Lengths:
    """The same shape moved to a given mean (the totals a result file states)."""
    if d.mean <= 0:
        return d
    v = np.maximum(d.values * (mean / d.mean), 1.0)
    return Lengths(v, d.weights, d.label + f" (mean {mean:.0f})")
