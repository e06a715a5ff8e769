"""Per-path TTFT/TPOT composition and the routing rule (DESIGN §4.4).

Paths: `p_md` (prefill -> line -> main decode), `p_rld_md` (prefill -> RDMA -> relay decode,
handing off to main decode by token IDs), `p_rld` (singular traffic finishing on relay decode).
IDC-PD uses `p_md` with RDMA in place of the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import lindley, line_delay, line_law, network
from .mgc_wait import WaitLaw, ggc_wait_law
from .perf import arch, roofline
from .perf.instance import Instance
from .queueing import ggc_wait
from .schema.scenario import Policy
from .workload.requests import RequestClasses

PATHS = ("p_md", "p_rld_md", "p_rld")


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

    @property
    def single_law(self) -> lindley.WaitLaw | None:
        """One instance: the exact GI/G/1 wait (Lindley's equation, pdd_plan/lindley.py) in place
        of the two-moment law; None for a pool (c > 1) or an unstable one."""
        if self.count != 1:
            return None
        return lindley.gi_g1_wait(self.service_s, self.weight, self.rate_rps, self.ca2)

    @property
    def _wait(self) -> tuple[float, float]:
        law = self.single_law
        if law is not None:
            return law.wait_probability, law.mean
        es = float(np.dot(self.weight, self.service_s))
        es2 = float(np.dot(self.weight, self.service_s**2))
        return ggc_wait(self.count, self.rate_rps, es, es2, self.ca2)

    @property
    def departure_ca2(self) -> float:
        """Squared CV of the gaps at which prefilled KV leaves for the line: 1 for Poisson
        arrivals (the line's M/G/1-PS law as it stands), else QNA's departure law."""
        if self.ca2 == 1.0:
            return 1.0
        es = float(np.dot(self.weight, self.service_s))
        cs2 = max(float(np.dot(self.weight, self.service_s**2)) / es**2 - 1.0, 0.0)
        return lindley.departure_ca2(self.count, min(self.rho, 1.0), self.ca2, cs2)

    @property
    def wait_probability(self) -> float:
        return self._wait[0]

    @property
    def mean_wait_s(self) -> float:
        single = self.single_law
        return single.mean if single is not None else self.wait_law.mean

    @cached_property
    def wait_law(self) -> WaitLaw:
        """P(W > t) = min(P(wait), gamma e^(-delta t)). c > 1: Tijms' asymptotic expansion with
        the exact decay rate (:mod:`pdd_plan.mgc_wait`; against a 200k-request replay of the
        default scenario's pool, cv 1, wait P50/P90/P99 0.030/0.408/0.949 s vs 0.030/0.413/0.939 s,
        where an exponential of the Allen-Cunneen mean gave 0.044/0.420/0.957 s). c = 1: the
        exponential approximation of mean E[W] (gamma = P(wait), delta = P(wait) / E[W]), exact
        for M/M/1 (where one instance is stable, :attr:`single_law`, exact, is used instead)."""
        if self.count > 1:
            return ggc_wait_law(self.count, self.rate_rps, self.service_s, self.weight, self.ca2)
        p, mw = self._wait
        if not np.isfinite(mw):
            return WaitLaw(1.0, float("inf"), 0.0)
        return WaitLaw(p, p, p / mw) if p > 0 and mw > 0 else WaitLaw(0.0, 0.0, 1.0)

    def wait_survival(self, t: np.ndarray) -> np.ndarray:
        """P(W > t): one instance, the exact law; a pool, the two-moment law of wait_law."""
        single = self.single_law
        return (single if single is not None else self.wait_law).survival(t)

    def wait_quantile(self, q: float) -> float:
        single = self.single_law
        return (single if single is not None else self.wait_law).quantile(q)

    @classmethod
    def of(
        cls_, inst: Instance, count: int, cls: RequestClasses, chunk: int, rate_rps: float
    ) -> PrefillPool:
        """The pool over the classes' strata: its wait depends on E[S] and E[S^2] of the real
        mixture, which the class means alone understate; bursty arrivals (cls.arrival_ca2)
        lengthen it."""
        svc = prefill_strata_service_s(inst, cls, chunk)
        return cls_(inst, count, svc, rate_rps, cls.fine.weight, cls.arrival_ca2)


def _service_s(inst: Instance, cls: RequestClasses, chunk: int) -> np.ndarray:
    out = np.empty(len(cls))
    for i in range(len(cls)):
        cached = float(np.floor(cls.input_tokens[i] * cls.hit_p[i]))
        new = max(float(cls.input_tokens[i]) - cached, 1.0)
        out[i] = roofline.prefill_time(inst, new, cached, chunk).total_s
    return out


_SERVICE_CACHE: dict[tuple, tuple[Instance, RequestClasses, np.ndarray]] = {}


def prefill_strata_service_s(inst: Instance, cls: RequestClasses, chunk: int) -> np.ndarray:
    """Seconds one prefill instance spends on each stratum of `cls` (`cls.fine`), memoized: the
    optimizer asks for the same instance shape for every architecture, pool size and line."""
    fine = cls.fine
    shape = (inst.n_gpus, inst.tp, inst.ep, inst.dp, inst.dtype)
    key = (id(inst.model), id(inst.gpu), shape, id(fine), int(chunk))
    hit = _SERVICE_CACHE.get(key)
    same = hit is not None and hit[0].model is inst.model and hit[0].gpu is inst.gpu
    if not same or hit[1] is not fine:  # entries keep model, GPU and strata alive
        if len(_SERVICE_CACHE) > 4096:
            _SERVICE_CACHE.clear()
        hit = (inst, fine, _service_s(inst, fine, chunk))
        _SERVICE_CACHE[key] = hit
    return hit[2]


def prefill_service_s(inst: Instance, cls: RequestClasses, chunk: int) -> np.ndarray:
    """Seconds one prefill instance spends on a request of each class (cached part skipped):
    the mean over the class's strata, not the time of its mean request."""
    return cls.class_mean(prefill_strata_service_s(inst, cls, chunk))


_EXTEND_CACHE: dict[tuple[int, int, int], tuple[Instance, float]] = {}


def _extend_s(md: Instance, k: float, ctx: float) -> float:
    """MD's extend recompute of k relay tokens at context ctx, memoized: the optimizer asks for
    the same few (k, context) pairs under every line option."""
    key = (id(md), int(round(max(k, 1.0))), int(round(ctx)))
    hit = _EXTEND_CACHE.get(key)
    if (
        hit is None or hit[0] is not md
    ):  # the entry keeps its instance alive, so ids can't be reused
        if len(_EXTEND_CACHE) > 200_000:
            _EXTEND_CACHE.clear()
        hit = (md, roofline.extend_time(md, float(key[1]), float(key[2])).total_s)
        _EXTEND_CACHE[key] = hit
    return hit[1]


@dataclass(frozen=True)
class PathTimes:
    """Each class's TTFT on each path as a fixed part plus random ones, and decode work per path.

    TTFT = ttft_fixed_s + prefill wait (the pool's M/G/c law) + line queueing: a PS line's delay
    beyond the bare transfer time, of mean ttft_jitter_s, variance ttft_jitter_var_s2 and
    P(no delay) ttft_jitter_atom (:func:`line_delay.two_moment`; an exponential, variance =
    mean^2 and no atom, where they are None).
    """

    ttft_fixed_s: dict[str, np.ndarray]  # path -> per class: prefill + bare transfer + first step
    md_tokens: dict[str, np.ndarray]  # output tokens decoded on main decode per request
    rld_tokens: dict[str, np.ndarray]  # output tokens decoded on relay decode per request
    rld_hold_s: dict[str, np.ndarray]  # seconds a request occupies relay decode
    line_bytes: np.ndarray  # per class, bytes crossing the line
    line_s: np.ndarray  # per class, mean line transfer seconds
    tpot_s: dict[str, np.ndarray]  # path -> per class mean time per output token
    handoff_stall_s: np.ndarray
    ttft_jitter_s: dict[str, np.ndarray] | None = None  # path -> mean line queueing
    ttft_jitter_var_s2: dict[str, np.ndarray] | None = None  # path -> its variance
    ttft_jitter_atom: dict[str, np.ndarray] | None = None  # path -> P(no line delay)

    def jitter_atom(self, path: str) -> np.ndarray:
        a = (self.ttft_jitter_atom or {}).get(path)
        return a if a is not None else np.zeros_like(self.ttft_fixed_s[path])

    def jitter_var(self, path: str) -> np.ndarray:
        v = (self.ttft_jitter_var_s2 or {}).get(path)
        return v if v is not None else self.jitter(path) ** 2

    def jitter(self, path: str) -> np.ndarray:
        j = (self.ttft_jitter_s or {}).get(path)
        return j if j is not None else np.zeros_like(self.ttft_fixed_s[path])

    def ttft_mean_s(self, path: str) -> np.ndarray:
        """Fixed part plus the mean line queueing (the prefill wait excluded)."""
        return self.ttft_fixed_s[path] + self.jitter(path)

    def class_mean(self, cls: RequestClasses) -> PathTimes:
        """Times of `cls.fine` (the strata) averaged over each class of `cls`."""
        if cls.nodes is None:
            return self

        def per(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {k: cls.class_mean(v) for k, v in d.items()}

        j = self.ttft_jitter_s

        def var(path: str) -> np.ndarray:
            # a class's delay mixes its strata's: E[Var] + Var[E] (total variance)
            m = self.jitter(path)
            mix = cls.class_mean(self.jitter_var(path) + m * m) - cls.class_mean(m) ** 2
            return np.maximum(mix, 0.0)

        return PathTimes(
            per(self.ttft_fixed_s),
            per(self.md_tokens),
            per(self.rld_tokens),
            per(self.rld_hold_s),
            cls.class_mean(self.line_bytes),
            cls.class_mean(self.line_s),
            per(self.tpot_s),
            cls.class_mean(self.handoff_stall_s),
            per(j) if j is not None else None,
            {k: var(k) for k in j} if j is not None else None,
            {k: cls.class_mean(self.jitter_atom(k)) for k in j} if j is not None else None,
        )


def path_times(
    cls: RequestClasses,
    prefill_s: np.ndarray,
    prefill: Instance,
    md: Instance | None,
    md_step_s: float,
    line: network.LineConfig | None,
    line_rho: float,
    rld: Instance | None,
    rld_step_s: float,
    policy: Policy,
    line_delay: float = 1.0,
    line_ca2: float = 1.0,
    pool: PrefillPool | None = None,
) -> PathTimes:
    """Compose TTFT parts and decode splits per class and path.

    `md`/`md_step_s` is the decode pool the KV lands on (main decode, or IDC's decode in A).
    `line` None means the transfer goes over RDMA inside one datacenter (IDC-PD).
    `line_ca2`: squared CV of the gaps between transfers (the prefill pool's departures);
    `pool`: the prefill pool feeding the line (its smoothing: :mod:`line_found`).
    """
    m = prefill.model
    full_kv = np.asarray(arch.kv_bytes(m, cls.input_tokens))
    g = prefill.gpu
    rdma_full = network.gpu_rdma_transfer_s(full_kv, g, prefill.n_gpus)
    out = cls.output_tokens
    if line is None:  # IDC-PD: P -> D over RDMA, no DRC needed
        ttft = prefill_s + rdma_full + md_step_s
        zero = np.zeros(len(cls))
        return PathTimes(
            {"p_md": ttft},
            {"p_md": out.copy()},
            {"p_md": zero},
            {"p_md": zero},
            zero,
            rdma_full,
            {"p_md": np.full(len(cls), md_step_s)},
            zero,
        )
    xb = network.line_bytes(m, cls.input_tokens, cls.hit_d, policy.drc)
    # the line's PS share + pool wait, line_delay > 1: verification's; bursts, the pool's
    # smoothing and each transfer's own prefill's silence; the delay's shape (line_law)
    law = line_law.transfer_law(
        xb, cls.weight, line, line_rho, line_delay, line_ca2, pool, prefill_s
    )
    lt, bare, atom = law.total, law.bare, law.atom
    jitter, jitter_var = {"p_md": law.jitter}, {"p_md": law.jitter_var}
    ttft = {"p_md": prefill_s + bare + md_step_s}
    md_tok = {"p_md": out.copy()}
    rld_tok = {"p_md": np.zeros(len(cls))}
    hold = {"p_md": np.zeros(len(cls))}
    tpot = {"p_md": np.full(len(cls), md_step_s)}
    stall = np.zeros(len(cls))
    if rld is not None:
        first = prefill_s + rdma_full + rld_step_s
        ctx = cls.input_tokens
        # tokens RLD makes while the KV crawls to MD; catch_up also covers MD's extend
        k = np.minimum(np.minimum(lt / rld_step_s, policy.relay_max_tokens), out)
        ext = (
            np.array([_extend_s(md, ki, c) for ki, c in zip(k, ctx)]) if md else np.zeros(len(cls))
        )
        if policy.handoff == "catch_up":
            k = np.minimum(np.minimum((lt + ext) / rld_step_s, policy.relay_max_tokens), out)
            stall = np.where(k >= policy.relay_max_tokens, ext, 0.0)  # cap hit: MD still stalls
        else:
            stall = ext
        ttft["p_rld_md"] = first
        md_tok["p_rld_md"] = out - k
        rld_tok["p_rld_md"] = k
        hold["p_rld_md"] = k * rld_step_s
        tpot["p_rld_md"] = (k * rld_step_s + (out - k) * md_step_s + stall) / np.maximum(out, 1)
        ttft["p_rld"] = first
        md_tok["p_rld"] = np.zeros(len(cls))
        rld_tok["p_rld"] = out.copy()
        hold["p_rld"] = out * rld_step_s
        tpot["p_rld"] = np.full(len(cls), rld_step_s)
    return PathTimes(
        ttft, md_tok, rld_tok, hold, xb, lt, tpot, stall, jitter, jitter_var, {"p_md": atom}
    )


def ttft_survival(
    slack: np.ndarray,
    pool: PrefillPool,
    jitter: np.ndarray | None = None,
    jitter_var: np.ndarray | None = None,
    jitter_atom: np.ndarray | None = None,
) -> np.ndarray:
    """P(W + E > slack) per class: W the prefill wait, E the line's queueing of mean `jitter`
    (zero: no line), variance `jitter_var` (None: exponential) and P(E = 0) `jitter_atom`,
    E = B (shift + X) of :func:`line_delay.two_moment`, so P(W + E > t) =
    q P(W + X > t - shift) + (1 - q) P(W > t). 1 where slack < 0."""
    if jitter is None or jitter_var is None:
        return _wait_plus_exponential(slack, pool, jitter)
    law = line_delay.two_moment(jitter, jitter_var, 0.0 if jitter_atom is None else jitter_atom)
    s = np.asarray(slack, dtype=float)
    out = law.q * _wait_plus_exponential(s - law.shift, pool, law.scale)
    if np.any(law.q < 1.0):
        out = out + (1.0 - law.q) * _wait_plus_exponential(s, pool, None)
    return out


def _wait_plus_exponential(
    slack: np.ndarray, pool: PrefillPool, jitter: np.ndarray | None = None
) -> np.ndarray:
    """P(W + E > slack) per class: W the prefill wait (the pool's law: one instance exact,
    a pool an atom at 0, else t0 + Exp(a)), E exponential with mean `jitter` (zero or None:
    E = 0). 1 where slack < 0."""
    t = np.maximum(np.asarray(slack, dtype=float), 0.0)
    single = pool.single_law
    if single is not None:  # one instance: the exact wait law, summed over its points
        m = np.zeros_like(t) if jitter is None else np.asarray(jitter, float)
        return np.where(np.asarray(slack) < 0, 1.0, single.plus_exponential_survival(t, m))
    law = pool.wait_law
    if not law.stable:
        return np.ones_like(t)
    pw, a, t0 = law.p_exp, law.delta, law.t0
    m = np.zeros_like(t) if jitter is None else np.broadcast_to(np.asarray(jitter, float), t.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        b = np.where(m > 0, 1.0 / np.where(m > 0, m, 1.0), np.inf)
        e_only = np.where(m > 0, np.exp(-b * t), 0.0)
        if pw > 0:
            u = np.maximum(t - t0, 0.0)  # the exponential part of a long wait starts at t0
            close = np.abs(b - a) < 1e-9 * np.maximum(a, 1.0)
            conv = np.where(
                close,
                (1 + a * u) * np.exp(-a * u),
                (b * np.exp(-a * u) - a * np.exp(-b * u)) / np.where(close, 1.0, b - a),
            )
            both = (1 - pw) * e_only + pw * np.where(t < t0, 1.0, conv)
        else:
            both = e_only
    out = np.where(m > 0, both, law.survival(t))
    return np.where(np.asarray(slack) < 0, 1.0, np.clip(out, 0.0, 1.0))


def miss_probability(
    ttft_fixed_s: np.ndarray,
    pool: PrefillPool,
    sla_s: float,
    jitter: np.ndarray | None = None,
    jitter_var: np.ndarray | None = None,
    jitter_atom: np.ndarray | None = None,
) -> np.ndarray:
    """P(TTFT > sla) per class: the prefill wait plus the line queueing must fit the slack."""
    return ttft_survival(sla_s - ttft_fixed_s, pool, jitter, jitter_var, jitter_atom)


def relay_wanted(
    ttft_p_md_s: np.ndarray, pool: PrefillPool, budget_s: float, q: float = 0.9
) -> np.ndarray:
    """The routing rule: relay a class when its direct path (mean line time included) would
    break the TTFT budget at the q-quantile of the prefill wait."""
    return ttft_p_md_s + pool.wait_quantile(q) > budget_s


def mixture_quantiles(
    values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]
) -> list[float]:
    """Quantiles of a discrete weighted distribution (lower quantile)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    c = np.cumsum(w) / np.sum(w)
    return [float(v[min(np.searchsorted(c, q - 1e-12), len(v) - 1)]) for q in qs]


def ttft_quantiles(
    fixed: np.ndarray,
    share: np.ndarray,
    pool: PrefillPool,
    qs: tuple[float, ...],
    jitter: np.ndarray | None = None,
    jitter_var: np.ndarray | None = None,
    jitter_atom: np.ndarray | None = None,
) -> list[float]:
    """Quantiles of TTFT = fixed part (per class-path, weighted) + prefill wait + line queueing
    (mean `jitter`, variance `jitter_var`, P(no delay) `jitter_atom`; None: exponential)."""
    keep = share > 1e-12
    if not np.any(keep):
        return [0.0 for _ in qs]
    jit = np.zeros_like(fixed) if jitter is None else np.asarray(jitter, float)
    var = jit**2 if jitter_var is None else np.asarray(jitter_var, float)
    atom = np.zeros_like(jit) if jitter_atom is None else np.asarray(jitter_atom, float)
    fixed, jit, var, atom = fixed[keep], jit[keep], var[keep], atom[keep]
    share = share[keep] / share[keep].sum()

    def surv(t: float) -> float:
        return float(np.dot(share, ttft_survival(t - fixed, pool, jit, var, atom)))

    out = []
    for q in qs:
        lo, hi = 0.0, float(fixed.max() + 10 * jit.max()) + 1.0
        while surv(hi) > 1 - q:
            hi *= 2.0
            if hi > 1e7:
                break
        for _ in range(60):
            mid = (lo + hi) / 2
            if surv(mid) > 1 - q:
                lo = mid
            else:
                hi = mid
        out.append(hi)
    return out
