"""The two shapes the rest of the planner consumes: per-request arrays and weighted classes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Requests:
    """One row per request; arrays of equal length, arrival-sorted."""

    arrival_s: np.ndarray  # float64 seconds from trace start
    input_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    hit_p: np.ndarray  # float64, prefill-side cached fraction of input, NaN if unknown
    hit_d: np.ndarray  # float64, MD-side (DRC) cached fraction of input, NaN if unknown

    def __len__(self) -> int:
        return int(self.input_tokens.shape[0])

    @property
    def duration_s(self) -> float:
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0


@dataclass(frozen=True)
class RequestClasses:
    """What the optimizer sizes for: representative requests with weights summing to 1."""

    input_tokens: np.ndarray  # float64 tokens
    output_tokens: np.ndarray  # float64 tokens
    hit_p: np.ndarray  # prefill-side hit fraction
    hit_d: np.ndarray  # MD-side hit fraction (DRC); 0 without DRC
    weight: np.ndarray  # request share, sums to 1
    rate_rps: float | None = None  # the source trace's mean arrival rate, if any
    # finer strata of the same requests (weights sum to 1 over all of them) and each one's
    # class: figures that are not linear in a request's tokens (prefill time, TTFT misses)
    # are averaged over a class's strata, not taken at its mean request (Jensen's gap)
    nodes: RequestClasses | None = None
    node_class: np.ndarray | None = None
    # squared CV of the inter-arrival gaps the prefill queue sees (1: Poisson; cv^2 for the
    # scenario's gamma-gap arrivals, workload.arrival_cv)
    arrival_ca2: float = 1.0
    # per stratum: the standard deviation of its members' tokens MD lacks (input x (1 -
    # hit_d), what crosses the line), where the strata were built from requests; None: unknown
    lacked_sd: np.ndarray | None = None
    # per stratum: the standard deviation of its members' uncached input tokens (input x
    # (1 - hit_p), what prefill computes), where the strata were built from requests; None:
    # unknown (a stratum's prefill time is then its mean request's)
    new_sd: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.weight.shape[0])

    @property
    def fine(self) -> RequestClasses:
        """The strata (or the classes themselves when they have none)."""
        return self.nodes if self.nodes is not None else self

    def class_mean(self, x: np.ndarray) -> np.ndarray:
        """A per-stratum figure averaged, weighted, over each class's strata."""
        x = np.asarray(x, dtype=np.float64)
        if self.nodes is None or self.node_class is None:
            return x
        w = self.nodes.weight
        return np.bincount(self.node_class, w * x, len(self)) / self._class_weight

    @cached_property
    def _class_weight(self) -> np.ndarray:
        """Each class's strata's weight, summed (class_mean's denominator: the planner asks
        for ~1,300 class means per run, every one over the same strata)."""
        assert self.nodes is not None and self.node_class is not None
        return np.bincount(self.node_class, self.nodes.weight, len(self))
