"""Per-path TTFT/TPOT composition and the routing rule (DESIGN §4.4).

Paths: `p_md` (prefill -> line -> main decode), `p_rld_md` (prefill -> RDMA -> relay decode,
handing off to main decode by token IDs), `p_rld` (singular traffic finishing on relay decode).
IDC-PD uses `p_md` with RDMA in place of the line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import network
from .perf import arch, roofline
from .perf.instance import Instance
from .queueing import mg1_wait_quantile, mg1_wait_survival, mgc_wait
from .schema.scenario import Policy
from .workload.requests import RequestClasses

PATHS = ("p_md", "p_rld_md", "p_rld")


@dataclass(frozen=True)
class PrefillPool:
    """The prefill instances as one M/G/c queue: the router sends each request to the instance
    that frees up first (least-loaded), which pools their capacity."""

    inst: Instance
    count: int
    service_s: np.ndarray  # per class, seconds of one instance
    rate_rps: float
    weight: np.ndarray

    @property
    def rho(self) -> float:
        return float(self.rate_rps * np.dot(self.weight, self.service_s) / self.count)

    @property
    def _wait(self) -> tuple[float, float]:
        es = float(np.dot(self.weight, self.service_s))
        es2 = float(np.dot(self.weight, self.service_s**2))
        return mgc_wait(self.count, self.rate_rps, es, es2)

    @property
    def wait_probability(self) -> float:
        return self._wait[0]

    @property
    def mean_wait_s(self) -> float:
        return self._wait[1]

    def wait_survival(self, t: np.ndarray) -> np.ndarray:
        """P(W > t): the waiting mass P(wait) with an exponential tail of the conditional mean."""
        return mg1_wait_survival(t, self.wait_probability, self.mean_wait_s)

    def wait_quantile(self, q: float) -> float:
        return mg1_wait_quantile(q, self.wait_probability, self.mean_wait_s)


def prefill_service_s(inst: Instance, cls: RequestClasses, chunk: int) -> np.ndarray:
    """Seconds one prefill instance spends on a request of each class (cached part skipped)."""
    out = np.empty(len(cls))
    for i in range(len(cls)):
        cached = float(np.floor(cls.input_tokens[i] * cls.hit_p[i]))
        new = max(float(cls.input_tokens[i]) - cached, 1.0)
        out[i] = roofline.prefill_time(inst, new, cached, chunk).total_s
    return out


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
    """Deterministic parts of each class's TTFT on each path, and decode work per path."""

    ttft_fixed_s: dict[str, np.ndarray]  # path -> per class: prefill + transfer + first step
    md_tokens: dict[str, np.ndarray]  # output tokens decoded on main decode per request
    rld_tokens: dict[str, np.ndarray]  # output tokens decoded on relay decode per request
    rld_hold_s: dict[str, np.ndarray]  # seconds a request occupies relay decode
    line_bytes: np.ndarray  # per class, bytes crossing the line
    line_s: np.ndarray  # per class, mean line transfer seconds
    tpot_s: dict[str, np.ndarray]  # path -> per class mean time per output token
    handoff_stall_s: np.ndarray


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
) -> PathTimes:
    """Compose TTFT parts and decode splits per class and path.

    `md`/`md_step_s` is the decode pool the KV lands on (main decode, or IDC's decode in A).
    `line` None means the transfer goes over RDMA inside one datacenter (IDC-PD).
    """
    m = prefill.model
    full_kv = np.asarray(arch.kv_bytes(m, cls.input_tokens))
    g = prefill.gpu
    rdma_full = network.rdma_transfer_s(
        full_kv, prefill.n_gpus, g.interconnect.rdma_gbps_per_gpu, g.efficiency.comm_efficiency
    )
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
    # line_delay > 1: verification found the line's simulated tail longer than the PS mean
    lt = network.line_transfer_s(xb, line, line_rho) * line_delay
    ttft = {"p_md": prefill_s + lt + md_step_s}
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
    return PathTimes(ttft, md_tok, rld_tok, hold, xb, lt, tpot, stall)


def miss_probability(ttft_fixed_s: np.ndarray, pool: PrefillPool, sla_s: float) -> np.ndarray:
    """P(TTFT > sla) per class: the prefill wait W must stay under sla - fixed part."""
    slack = sla_s - ttft_fixed_s
    p = pool.wait_survival(np.maximum(slack, 0.0))
    return np.where(slack < 0, 1.0, np.minimum(p, 1.0))


def relay_wanted(
    ttft_p_md_s: np.ndarray, pool: PrefillPool, budget_s: float, q: float = 0.9
) -> np.ndarray:
    """The routing rule: relay a class when its direct path would break the TTFT budget at the
    q-quantile of the prefill wait."""
    w = pool.wait_quantile(q)
    return ttft_p_md_s + w > budget_s


def mixture_quantiles(
    values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]
) -> list[float]:
    """Quantiles of a discrete weighted distribution (lower quantile)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    c = np.cumsum(w) / np.sum(w)
    return [float(v[min(np.searchsorted(c, q - 1e-12), len(v) - 1)]) for q in qs]


def ttft_quantiles(
    fixed: np.ndarray, share: np.ndarray, pool: PrefillPool, qs: tuple[float, ...]
) -> list[float]:
    """Quantiles of TTFT = fixed part (per class-path, weighted) + prefill wait (M/G/1)."""
    keep = share > 1e-12
    fixed, share = fixed[keep], share[keep] / share[keep].sum()

    def surv(t: float) -> float:
        slack = t - fixed
        p = np.where(slack < 0, 1.0, pool.wait_survival(np.maximum(slack, 0.0)))
        return float(np.dot(share, p))

    out = []
    for q in qs:
        lo, hi = 0.0, float(fixed.max()) + 1.0
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
