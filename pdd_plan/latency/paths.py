"""Per-path TTFT/TPOT composition (the routing rule over them: `optimize/tables.py`).

The paths are the architecture spec's (:data:`pdd_plan.architectures.PATHS`): `p_md` (prefill
-> line -> main decode), `p_rld_md` (prefill -> RDMA -> relay decode, handing off to main decode
by token IDs), `p_rld` (singular traffic finishing on relay decode). IDC-PD uses `p_md` with
RDMA in place of the line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan.architectures import P_MD, P_RLD, P_RLD_MD
from pdd_plan.inputs.schema.scenario import Policy
from pdd_plan.latency import handoff as handoff_payload
from pdd_plan.latency.line import law as line_law
from pdd_plan.latency.line import transfer
from pdd_plan.latency.prefill.pool import PrefillPool
from pdd_plan.perf import layers, roofline
from pdd_plan.perf.instance import Instance
from pdd_plan.workload.requests import RequestClasses

_EXTEND_CACHE: dict[tuple[int, int, int], tuple[Instance, float]] = {}


def _extend_at(md: Instance, k: int, ctx: int) -> float:
    """MD's extend recompute of k relay tokens at context ctx, memoized: the optimizer asks for
    the same few (k, context) pairs under every line option."""
    key = (id(md), k, ctx)
    hit = _EXTEND_CACHE.get(key)
    if (
        hit is None or hit[0] is not md
    ):  # the entry keeps its instance alive, so ids can't be reused
        if len(_EXTEND_CACHE) > 200_000:
            _EXTEND_CACHE.clear()
        hit = (md, roofline.extend_time(md, float(k), float(ctx)).total_s)
        _EXTEND_CACHE[key] = hit
    return hit[1]


def _extend_times(md: Instance, k: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    """:func:`_extend_at` of every (k, ctx) pair (k at least 1), the keys rounded in numpy (``np.rint`` rounds
    half to even, as ``round`` does) and each distinct pair looked up once."""
    kk = np.rint(np.maximum(np.asarray(k, dtype=float), 1.0)).astype(np.int64).tolist()
    cc = np.rint(np.asarray(ctx, dtype=float)).astype(np.int64).tolist()
    pairs = list(zip(kk, cc))
    got = {p: _extend_at(md, *p) for p in dict.fromkeys(pairs)}
    return np.array([got[p] for p in pairs], dtype=float)


@dataclass(frozen=True)
class PathTimes:
    """Each class's TTFT on each path as a fixed part plus random ones, and decode work per path.

    TTFT = ttft_fixed_s + prefill wait (the pool's M/G/c law) + line queueing: a PS line's delay
    beyond the bare transfer time, of mean ttft_line_wait_s, variance ttft_line_wait_var_s2 and
    P(no delay) ttft_line_wait_atom (:func:`delay_shape.two_moment`; an exponential, variance =
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
    ttft_line_wait_s: dict[str, np.ndarray] | None = None  # path -> mean line queueing
    ttft_line_wait_var_s2: dict[str, np.ndarray] | None = None  # path -> its variance
    ttft_line_wait_atom: dict[str, np.ndarray] | None = None  # path -> P(no line delay)
    handoff: handoff_payload.Choice | None = None  # the relay handoff's payload, and why

    def line_wait_atom(self, path: str) -> np.ndarray:
        a = (self.ttft_line_wait_atom or {}).get(path)
        return a if a is not None else np.zeros_like(self.ttft_fixed_s[path])

    def line_wait_var(self, path: str) -> np.ndarray:
        v = (self.ttft_line_wait_var_s2 or {}).get(path)
        return v if v is not None else self.line_wait(path) ** 2

    def line_wait(self, path: str) -> np.ndarray:
        j = (self.ttft_line_wait_s or {}).get(path)
        return j if j is not None else np.zeros_like(self.ttft_fixed_s[path])

    def ttft_mean_s(self, path: str) -> np.ndarray:
        """Fixed part plus the mean line queueing (the prefill wait excluded)."""
        return self.ttft_fixed_s[path] + self.line_wait(path)

    def class_mean(self, classes: RequestClasses) -> PathTimes:
        """Times of `classes.fine` (the strata) averaged over each class of `classes`."""
        if classes.nodes is None:
            return self

        def per(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {k: classes.class_mean(v) for k, v in d.items()}

        j = self.ttft_line_wait_s

        def var(path: str) -> np.ndarray:
            # a class's delay mixes its strata's: E[Var] + Var[E] (total variance)
            m = self.line_wait(path)
            mix = classes.class_mean(self.line_wait_var(path) + m * m) - classes.class_mean(m) ** 2
            return np.maximum(mix, 0.0)

        return PathTimes(
            per(self.ttft_fixed_s),
            per(self.md_tokens),
            per(self.rld_tokens),
            per(self.rld_hold_s),
            classes.class_mean(self.line_bytes),
            classes.class_mean(self.line_s),
            per(self.tpot_s),
            classes.class_mean(self.handoff_stall_s),
            per(j) if j is not None else None,
            {k: var(k) for k in j} if j is not None else None,
            {k: classes.class_mean(self.line_wait_atom(k)) for k in j} if j is not None else None,
            self.handoff,
        )


def path_times(
    classes: RequestClasses,
    prefill_s: np.ndarray,
    prefill: Instance,
    md: Instance | None,
    md_step_s: float,
    line: transfer.LineConfig | None,
    line_rho: float,
    rld: Instance | None,
    rld_step_s: float,
    policy: Policy,
    line_delay: float = 1.0,
    line_ca2: float = 1.0,
    pool: PrefillPool | None = None,
    md_batch: float | None = None,
    chunk: int = 8192,
    line_weight: np.ndarray | None = None,
) -> PathTimes:
    """Compose TTFT parts and decode splits per class and path.

    `md`/`md_step_s` is the decode pool the KV lands on (main decode, or IDC's decode in A).
    `line` None means the transfer goes over RDMA inside one datacenter (IDC-PD).
    `line_ca2`: squared CV of the gaps between transfers (the prefill pool's departures);
    `pool`: the prefill pool feeding the line (its smoothing: :mod:`line_found`).
    `md_batch`: main decode's running batch, which a recompute handoff joins
    (:mod:`pdd_plan.latency.handoff`: the payload is chosen per plan); None: the extend priced
    as a lone pass, the payload not chosen.
    `line_weight`: the share of each class that crosses the line, the sizes the line's queue
    is made of (default: every class at its weight; a routing's singular requests stay off).
    """
    m = prefill.model
    full_kv = np.asarray(layers.kv_bytes(m, classes.input_tokens))
    g = prefill.gpu
    rdma_full = transfer.gpu_rdma_transfer_s(full_kv, g, prefill.n_gpus)
    out = classes.output_tokens
    if line is None:  # IDC-PD: P -> D over RDMA, no DRC needed
        ttft = prefill_s + rdma_full + md_step_s
        zero = np.zeros(len(classes))
        return PathTimes(
            {P_MD: ttft},
            {P_MD: out.copy()},
            {P_MD: zero},
            {P_MD: zero},
            zero,
            rdma_full,
            {P_MD: np.full(len(classes), md_step_s)},
            zero,
        )
    xb = transfer.line_bytes(m, classes.input_tokens, classes.hit_d, policy.drc)
    # the line's PS share + pool wait, line_delay > 1: verification's; bursts, the pool's
    # smoothing and each transfer's own prefill's silence; the delay's shape (line_law)
    law = line_law.transfer_law(
        xb,
        classes.weight if line_weight is None else line_weight,
        line,
        line_rho,
        line_delay,
        line_ca2,
        pool,
        prefill_s,
    )
    lt, bare, atom = law.total, law.bare, law.atom
    line_wait, line_wait_var = {P_MD: law.line_wait}, {P_MD: law.line_wait_var}
    ttft = {P_MD: prefill_s + bare + md_step_s}
    md_tok = {P_MD: out.copy()}
    rld_tok = {P_MD: np.zeros(len(classes))}
    hold = {P_MD: np.zeros(len(classes))}
    tpot = {P_MD: np.full(len(classes), md_step_s)}
    stall = np.zeros(len(classes))
    choice = None
    if rld is not None:
        first = prefill_s + rdma_full + rld_step_s
        ctx = classes.input_tokens
        # tokens RLD makes while the KV crawls to MD; catch_up also covers MD's extend
        k = np.minimum(np.minimum(lt / rld_step_s, policy.relay_max_tokens), out)
        if md is None:
            ext = np.zeros(len(classes))
        elif md_batch is None:
            ext = _extend_times(md, k, ctx)
        else:
            mean_ctx = float(np.dot(classes.weight, ctx) / max(classes.weight.sum(), 1e-12))
            choice = handoff_payload.choose(policy, md, mean_ctx, md_batch, chunk, line, line_rho)
            ext = handoff_payload.times(
                choice, md, k, ctx, md_batch, chunk, line, line_rho, policy.relay_max_tokens
            )
        if policy.handoff == "catch_up":
            k = np.minimum(np.minimum((lt + ext) / rld_step_s, policy.relay_max_tokens), out)
            stall = np.where(k >= policy.relay_max_tokens, ext, 0.0)  # cap hit: MD still stalls
        else:
            stall = ext
        ttft[P_RLD_MD] = first
        md_tok[P_RLD_MD] = out - k
        rld_tok[P_RLD_MD] = k
        hold[P_RLD_MD] = k * rld_step_s
        tpot[P_RLD_MD] = (k * rld_step_s + (out - k) * md_step_s + stall) / np.maximum(out, 1)
        ttft[P_RLD] = first
        md_tok[P_RLD] = np.zeros(len(classes))
        rld_tok[P_RLD] = out.copy()
        hold[P_RLD] = out * rld_step_s
        tpot[P_RLD] = np.full(len(classes), rld_step_s)
    return PathTimes(
        ttft,
        md_tok,
        rld_tok,
        hold,
        xb,
        lt,
        tpot,
        stall,
        line_wait,
        line_wait_var,
        {P_MD: atom},
        choice,
    )
