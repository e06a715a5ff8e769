"""The efficiency factors of every GPU and model family, fitted jointly (partial pooling).

One least-squares problem over all measurement rows, whatever their GPU and family:

    theta_g   = (log mfu, log mbu, step overhead ms, log chunk_half_tokens) of GPU g (dense)
    mu        = the same four for the population of GPUs (what a GPU without rows gets)
    delta     = (delta_mfu, delta_mbu): MoE passes on any GPU g run at mfu_g * exp(delta_mfu)
                and mbu_g * exp(delta_mbu), the one MoE-vs-dense shift all GPUs share

with residuals (the maximum a posteriori estimate under independent Gaussian priors):

    row i         log(predicted_i / measured_i) / SIGMA_ROW
    pooling g, k  (theta_g,k - mu_k) / SIGMA_GPU[k]        every GPU with rows
    population k  (mu_k - analytic_k) / SIGMA_PRIOR[k]
    shift         delta / SIGMA_SHIFT

The shift is identified by the GPUs that have rows of both families (the same GPU, the same
engines, dense against MoE); a GPU with rows of one family gets the other through it, and a
GPU with no rows gets the population mean (and the shift for MoE). Pooling pulls a GPU fitted
to one row towards the other GPUs instead of letting it fit that row exactly.

The sigmas are priors, stated once and not tuned on the rows: SIGMA_ROW 0.25 (a model error of
25 % on one row, the scale of the held-out errors before this fit); per-GPU spread of mfu a
factor e^0.5 (published serving MFU spans about 0.3-0.8), of mbu e^0.25 (0.6-0.95), of the step
overhead 2 ms, of the half-speed chunk a factor e; the population's pull to the analytic defaults
and the shift's to zero are weak (e^1, 3 ms). `scipy.optimize.least_squares` solves it (trf,
bounds, finite differences over a sparse Jacobian: a row depends on its GPU's four factors and,
for a MoE row, the shift).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from pdd_plan.calibration.fit import BOUNDS, FACTORS, Measurement, predict
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.inputs.calibrated import with_efficiency
from pdd_plan.inputs.schema.gpu import FamilyFactors, GPUProfile

LOG = (True, True, False, True)  # factors fitted in log space (all but the overhead)
SIGMA_ROW = 0.25
SIGMA_GPU = (0.5, 0.25, 2.0, 1.0)
SIGMA_PRIOR = (1.0, 1.0, 3.0, 1.0)
SIGMA_SHIFT = 1.0
SHIFTED = ("mfu", "mbu")  # the factors MoE shifts
SHIFT_BOUNDS = (-2.0, 1.0)  # log: MoE at e^-2 = 0.14x .. e = 2.7x of dense


def _to_x(factors: dict[str, float]) -> list[float]:
    return [math.log(factors[k]) if lg else factors[k] for k, lg in zip(FACTORS, LOG)]


def _from_x(x) -> dict[str, float]:
    return {k: float(math.exp(v) if lg else v) for k, v, lg in zip(FACTORS, x, LOG)}


def shifted(dense: dict[str, float], shift: dict[str, float]) -> dict[str, float]:
    """MoE factors from dense ones: mfu and mbu times e^shift (capped at the peak, 1.0)."""
    out = dict(dense)
    for k in SHIFTED:
        out[k] = min(dense[k] * math.exp(shift[k]), BOUNDS[k][1])
    return out


@dataclass(frozen=True)
class JointFit:
    gpus: dict[str, dict[str, float]]  # dense factors of each GPU with rows
    population: dict[str, float]  # dense factors of a GPU without rows
    shift: dict[str, float]  # log MoE shift of mfu and mbu
    counts: dict[str, dict[str, int]]  # GPU -> family -> rows fitted
    rows: list[int]
    errors: list[float]  # signed, + optimistic, with the fitted factors
    success: bool
    message: str

    def factors(self, gpu: str, family: str) -> dict[str, float]:
        dense = self.gpus.get(gpu, self.population)
        return shifted(dense, self.shift) if family == "moe" else dict(dense)

    def basis(self, gpu: str, family: str) -> str:
        """How the factors of `family` on `gpu` were estimated, in words."""
        n = self.counts.get(gpu, {})
        mine, other = n.get(family, 0), n.get("dense" if family == "moe" else "moe", 0)
        shift = ", ".join(f"{k} x{math.exp(v):.2f}" for k, v in self.shift.items())
        if mine:
            return f"fitted to {mine} {family} row{'s' * (mine != 1)} of this GPU (joint fit)"
        if other:
            return (
                f"shared part of the joint fit: this GPU has no {family} rows; its {other} "
                f"{'dense' if family == 'moe' else 'MoE'} rows with the MoE-vs-dense shift "
                f"fitted across GPUs ({shift})"
            )
        return f"population mean of the joint fit (no rows on this GPU; MoE shift {shift})"

    def profile(self, gpu: GPUProfile) -> GPUProfile:
        """`gpu` with its fitted dense factors and its MoE ones (marked calibrated)."""
        moe = FamilyFactors(**self.factors(gpu.name, "moe"), basis=self.basis(gpu.name, "moe"))
        return with_efficiency(gpu, **self.factors(gpu.name, "dense"), mode="calibrated", moe=moe)


class _Problem:
    """The parameter vector's layout and the residuals of one joint fit."""

    def __init__(self, rows: list[Measurement], analytic: dict[str, GPUProfile]):
        self.rows, self.analytic = rows, analytic
        self.gpus = sorted({r.gpu for r in rows})
        self.models = {m: profiles.model(m) for m in {r.model for r in rows}}
        self.meas = np.array([r.value for r in rows])
        self.moe = np.array([r.family == "moe" for r in rows])
        e0 = analytic[self.gpus[0]].efficiency  # the analytic defaults (the same on every GPU)
        self.x_prior = np.array(_to_x({k: getattr(e0, k) for k in FACTORS}))
        g4, nf = 4 * len(self.gpus), len(FACTORS)
        self.mu = slice(g4, g4 + nf)
        self.sh = slice(g4 + nf, g4 + nf + len(SHIFTED))
        self.n = g4 + nf + len(SHIFTED)

    def unpack(self, x: np.ndarray):
        gpus = {g: _from_x(x[4 * i : 4 * i + 4]) for i, g in enumerate(self.gpus)}
        return gpus, _from_x(x[self.mu]), dict(zip(SHIFTED, map(float, x[self.sh])))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = [math.log(BOUNDS[k][0]) if lg else BOUNDS[k][0] for k, lg in zip(FACTORS, LOG)]
        hi = [math.log(BOUNDS[k][1]) if lg else BOUNDS[k][1] for k, lg in zip(FACTORS, LOG)]
        reps = len(self.gpus) + 1
        s_lo, s_hi = [SHIFT_BOUNDS[0]] * len(SHIFTED), [SHIFT_BOUNDS[1]] * len(SHIFTED)
        return np.array(lo * reps + s_lo), np.array(hi * reps + s_hi)

    def predictions(self, x: np.ndarray) -> np.ndarray:
        gpus, _, shift = self.unpack(x)
        fit = JointFit(gpus, {}, shift, {}, [], [], True, "")
        profs = {g: fit.profile(self.analytic[g]) for g in self.gpus}
        return np.array([predict(r, profs[r.gpu], self.models[r.model]) for r in self.rows])

    def residuals(self, x: np.ndarray) -> np.ndarray:
        err = np.log(self.predictions(x) / self.meas) / SIGMA_ROW
        mu = x[self.mu]
        pool = [(x[4 * i : 4 * i + 4] - mu) / SIGMA_GPU for i in range(len(self.gpus))]
        prior = (mu - self.x_prior) / SIGMA_PRIOR
        return np.concatenate([err, *pool, prior, x[self.sh] / SIGMA_SHIFT])

    def sparsity(self) -> np.ndarray:
        n_rows, n_g = len(self.rows), len(self.gpus)
        s = np.zeros((n_rows + 4 * n_g + 4 + len(SHIFTED), self.n), dtype=bool)
        for i, r in enumerate(self.rows):
            j = self.gpus.index(r.gpu)
            s[i, 4 * j : 4 * j + 4] = True
            s[i, self.sh] = bool(self.moe[i])
        for j in range(n_g):
            for k in range(4):
                s[n_rows + 4 * j + k, 4 * j + k] = True
                s[n_rows + 4 * j + k, self.mu.start + k] = True
        for k in range(4):
            s[n_rows + 4 * n_g + k, self.mu.start + k] = True
        for k in range(len(SHIFTED)):
            s[n_rows + 4 * n_g + 4 + k, self.sh.start + k] = True
        return s


def fit_joint(rows: list[Measurement], analytic: dict[str, GPUProfile]) -> JointFit:
    """The joint fit of `rows` (any GPUs, both families); `analytic` maps each GPU name in
    the rows to its profile as written (`fit.analytic_gpu`)."""
    from scipy.optimize import least_squares  # heavy to import; only the fitter needs it

    if not rows:
        raise InputError(None, "measurements", "no rows to fit", "give measurement rows")
    pb = _Problem(rows, {g: analytic[g] for g in {r.gpu for r in rows}})
    lo, hi = pb.bounds()
    x0 = np.clip(np.concatenate([np.tile(pb.x_prior, len(pb.gpus) + 1), [0.0] * 2]), lo, hi)
    sol = least_squares(
        pb.residuals,
        x0,
        bounds=(lo, hi),
        jac_sparsity=pb.sparsity(),
        method="trf",
        diff_step=1e-3,
        x_scale=1.0,
    )
    gpus, mu, shift = pb.unpack(sol.x)
    counts: dict[str, Counter] = {}
    for r in rows:
        counts.setdefault(r.gpu, Counter())[r.family] += 1
    errors = [r.error(p) for r, p in zip(rows, pb.predictions(sol.x))]
    return JointFit(
        gpus,
        mu,
        shift,
        {g: dict(c) for g, c in counts.items()},
        [r.row for r in rows],
        [float(e) for e in errors],
        bool(sol.success),
        str(sol.message),
    )
