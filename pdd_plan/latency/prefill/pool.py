"""The prefill instances as one queue: their service times per request class and the wait a
request finds (one instance: the exact GI/G/1 law; a pool: the GI/G/c law)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.latency.prefill import gig1
from pdd_plan.latency.prefill.gigc import ggc_wait_law
from pdd_plan.latency.prefill.wait import WaitLaw
from pdd_plan.perf import grid
from pdd_plan.perf.instance import Instance, gpu_perf_key
from pdd_plan.workload.requests import RequestClasses


@dataclass(frozen=True)
class PrefillPool:
    """The prefill instances as one G/G/c queue: the router sends each request to the instance
    that frees up first (least-loaded), which pools their capacity. Arrivals are renewal with
    squared gap CV `ca2` (1: Poisson, the M/G/c case)."""

    inst: Instance
    count: int
    service_s: np.ndarray  # per class, seconds of one instance
    rate_rps: float
    weight: np.ndarray
    ca2: float = 1.0

    @property
    def rho(self) -> float:
        return float(self.rate_rps * np.dot(self.weight, self.service_s) / self.count)

    @cached_property
    def wait_law(self) -> WaitLaw:
        """The wait a request finds, chosen once by the pool's size. One instance: the exact
        GI/G/1 law (Lindley's equation, :mod:`gig1`). A pool (c > 1), or one instance with no
        steady state: Tijms' asymptotic expansion with the exact decay rate (:mod:`gigc`;
        against a 200k-request replay of the default scenario's pool, cv 1, wait P50/P90/P99
        0.030/0.408/0.949 s vs 0.030/0.413/0.939 s, where an exponential of the Allen-Cunneen
        mean gave 0.044/0.420/0.957 s), unbounded when unstable."""
        if self.count == 1:
            exact = gig1.gi_g1_wait(self.service_s, self.weight, self.rate_rps, self.ca2)
            if exact is not None:
                return exact
        return ggc_wait_law(self.count, self.rate_rps, self.service_s, self.weight, self.ca2)

    @property
    def departure_ca2(self) -> float:
        """Squared CV of the gaps at which prefilled KV leaves for the line: 1 for Poisson
        arrivals (the line's M/G/1-PS law as it stands), else QNA's departure law."""
        if self.ca2 == 1.0:
            return 1.0
        es = float(np.dot(self.weight, self.service_s))
        cs2 = max(float(np.dot(self.weight, self.service_s**2)) / es**2 - 1.0, 0.0)
        return gig1.departure_ca2(self.count, min(self.rho, 1.0), self.ca2, cs2)

    @classmethod
    def of(
        cls, inst: Instance, count: int, classes: RequestClasses, chunk: int, rate_rps: float
    ) -> PrefillPool:
        """The pool over the classes' strata: its wait depends on E[S] and E[S^2] of the real
        mixture, which the class means alone understate; bursty arrivals (classes.arrival_ca2)
        lengthen it."""
        svc = prefill_strata_service_s(inst, classes, chunk)
        return cls(inst, count, svc, rate_rps, classes.fine.weight, classes.arrival_ca2)


def _service_s(inst: Instance, classes: RequestClasses, chunk: int) -> np.ndarray:
    """roofline.prefill_time of each class's request, all classes in one vectorized call.

    A stratum whose members' uncached tokens spread (``classes.new_sd``, sd ``s`` about the
    mean ``m``) gets the mean of its members' times, not its mean member's: prefill time is
    convex in the uncached tokens (attention grows with the context), so ``f(m)`` understates
    ``E[f(X)]`` (Jensen's gap; the default scenario's 81 IDC-PD strata by 0.26%, which a 96%-busy
    pool turns into -7% of its wait). The two-point rule ``(f(m - s) + f(m + s)) / 2`` has
    ``X``'s mean and variance, so it is exact for any ``f`` quadratic in ``X`` (prefill's
    linear and attention terms) and the rest of the gap is ``f``'s third-order part. Its
    cached tokens are the stratum's input less its uncached ones (exact for a fixed input)."""
    inp = np.asarray(classes.input_tokens, dtype=float)
    cached = np.floor(inp * np.asarray(classes.hit_p, dtype=float))
    new = np.maximum(inp - cached, 1.0)
    sd = classes.new_sd
    if sd is None or not np.any(sd > 0):
        return grid.prefill_times(inst, new, cached, chunk)
    s = np.minimum(np.asarray(sd, dtype=float), np.minimum(new - 1.0, cached))  # stay in [1, inp]
    lo, hi = new - s, new + s
    both = grid.prefill_times(
        inst, np.concatenate([lo, hi]), np.concatenate([inp - lo, inp - hi]), chunk
    )
    return 0.5 * (both[: len(new)] + both[len(new) :])


_SERVICE_CACHE: dict[tuple, tuple[ModelProfile, np.ndarray]] = {}


def prefill_strata_service_s(
    inst: Instance,
    classes: RequestClasses,
    chunk: int,
    nominal: tuple[Instance, float] | None = None,
) -> np.ndarray:
    """Seconds one prefill instance spends on each stratum of `classes` (`classes.fine`), memoized: the
    optimizer asks for the same instance shape for every architecture, pool size and line.
    `nominal` (an instance, k): `inst` runs every pass exactly k times as fast as it (a
    perf-speed draw), so its times are the nominal's over k, derived rather than recomputed."""
    fine = classes.fine
    shape = (inst.n_gpus, inst.tp, inst.ep, inst.dp, inst.dtype)
    # the strata by the values _service_s reads, the GPU by its perf values: a regime map's
    # cells build equal classes and GPUs anew, and ask for the same instances
    sd = None if fine.new_sd is None else np.asarray(fine.new_sd, dtype=float).tobytes()
    strata = (fine.input_tokens.tobytes(), fine.hit_p.tobytes(), sd)
    key = (id(inst.model), gpu_perf_key(inst.gpu), shape, strata, int(chunk))
    hit = _SERVICE_CACHE.get(key)
    if hit is None or hit[0] is not inst.model:  # entries keep their model alive
        if len(_SERVICE_CACHE) > 4096:
            _SERVICE_CACHE.clear()
        svc = (
            _service_s(inst, fine, chunk)
            if nominal is None
            else prefill_strata_service_s(nominal[0], classes, chunk) / nominal[1]
        )
        hit = (inst.model, svc)
        _SERVICE_CACHE[key] = hit
    return hit[1]


def prefill_service_s(inst: Instance, classes: RequestClasses, chunk: int) -> np.ndarray:
    """Seconds one prefill instance spends on a request of each class (cached part skipped):
    the mean over the class's strata, not the time of its mean request."""
    return classes.class_mean(prefill_strata_service_s(inst, classes, chunk))
