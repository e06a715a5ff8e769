"""The efficiency factors of every GPU and model family, fitted jointly (partial pooling).

One least-squares problem over all measurement rows, whatever their GPU and family:

    theta_g   = (log mfu, log mbu, step overhead ms) of GPU g (dense)
    mu        = the same three for the population of GPUs at the balance centre
    beta      = how the population's log mfu moves with a GPU's machine balance z_g =
                log(BF16 FLOP/s / HBM byte/s / BALANCE_CENTER): the GPUs' mean is
                mu + (beta z_g, 0, 0), what a GPU without rows gets
    delta     = (delta_mfu, delta_mbu): the shared mean of the MoE-vs-dense shift
    d_g       = GPU g's deviation from it, for each GPU with rows of both families: MoE passes
                on g run at mfu_g * exp(delta_mfu + d_g,mfu) and mbu_g * exp(delta_mbu + d_g,mbu)

with residuals (the maximum a posteriori estimate; t: Student-t, NU_ROW or NU_GPU degrees
of freedom, else Gaussian):

    row i         t(log(predicted_i / measured_i) / SIGMA_ROW)
    pooling g, k  t((theta_g,k - mu_k - [k = mfu] beta z_g) / SIGMA_GPU[k])   GPUs with rows
    population k  (mu_k - analytic_k) / SIGMA_PRIOR[k]
    shift         delta / SIGMA_SHIFT
    balance       beta / SIGMA_SLOPE
    deviation     d_g,k / tau_k                             every GPU with both families

A GPU's step overhead is its overhead under the reference engine (SGLang, what the planner
deploys); each other engine's scheduling overhead is one offset (ms a step) shared by every GPU,
fitted with the rest under a N(0, SIGMA_ENGINE^2) prior: the CPU side of a step is the engine's,
not the GPU's. A factor of a GPU that at most FEW_ROWS rows inform is pooled under a normal prior
narrowed by that count, not the Student-t: too few rows to pin it, it stays near the population
(joint_pooling.py: mfu and mbu count the GPU's rows, the step overhead each row by how much it
moves the row's figure, so that one batch-1 row among large-batch ones does not set it alone).

The shift is partially pooled: a GPU with rows of both families (the same GPU, the same engines,
dense against MoE) has its own shift, shrunk toward the shared mean by the normal prior
N(0, tau^2) on its deviation, so that one GPU generation's MoE rows (Blackwell's FP4 experts)
move its own shift and only through the mean the others'. A GPU with rows of one family has no
deviation: it gets the shared mean for the other family (and `perf` says so); a GPU with no
rows gets the population mean and the shared mean shift.

tau_k, the between-GPU spread of the shift, is not chosen by hand: it is estimated from the
rows being fitted by the DerSimonian-Laird method-of-moments estimator of a random-effects
model (DerSimonian & Laird 1986, Controlled Clinical Trials 7:177): a first fit with each
both-family GPU's shift free (the weak SIGMA_SHIFT prior on its deviation) gives each GPU's
shift s_g and its variance v_g (the Gauss-Newton posterior covariance, (J^T J)^-1 of the
normalized residuals); with w_g = 1/v_g, Q = sum w_g (s_g - s_w)^2 about the weighted mean,
tau^2 = max(0, (Q - (k - 1)) / (sum w - sum w^2 / sum w)); the second fit uses it. tau below
TAU_FLOOR (a 1 % spread, no deviation worth a parameter) or fewer than two both-family GPUs:
every GPU takes the shared mean. In leave-one-source-out the estimate is made on the training
rows only, as every other parameter.

The balance is a group-level predictor of the pooling (Gelman & Hill, Data Analysis Using
Regression and Multilevel/Hierarchical Models, ch. 12.6): the fitted mfu is an effective
factor, the share of a compute-bound pass's time at the FLOP peak, and what the roofline does
not price (epilogues, norms, routing, launches: memory- or latency-bound work) costs about the
same seconds on GPUs of like bandwidth, so it is a smaller share of a pass on a GPU with few
FLOPs per byte (H20: 37, A100: 153) than on one with many (H100: 296, B200: 281, BF16). A GPU
with rows keeps its own factors; the predictor moves only the mean they are pooled toward and
what a GPU without rows gets.

The sigmas are priors, stated once and not tuned on the rows: SIGMA_ROW 0.25 (a model error of
25 % on one row, the scale of the held-out errors before this fit); per-GPU spread of mfu a
factor e^0.5 (published serving MFU spans about 0.3-0.8), of mbu e^0.25 (0.6-0.95), of the step
overhead 2 ms; the population's pull to the analytic defaults and the shift's and the balance
slope's to zero are weak (e^1, 3 ms; SIGMA_SLOPE 1: an e-fold of balance moves the mean mfu by up
to e^1). `scipy.optimize.least_squares` solves it (trf, bounds, finite differences over a sparse
Jacobian: a row depends on its GPU's three factors and, for a MoE row, the shift and its GPU's
deviation; a GPU's mfu pooling term on the slope).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from pdd_plan.calibration.fit import BOUNDS, FACTORS, Measurement, predict
from pdd_plan.calibration.joint_pooling import dersimonian_laird, effective_rows, student_t_residual
from pdd_plan.calibration.measurements import engine_build
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.inputs.calibrated import with_efficiency
from pdd_plan.inputs.schema.gpu import FamilyFactors, GPUProfile

LOG = (True, True, False)  # factors fitted in log space (all but the overhead)
SIGMA_ROW = 0.25
SIGMA_GPU = (0.5, 0.25, 2.0)
SIGMA_PRIOR = (1.0, 1.0, 3.0)
SIGMA_SHIFT = 1.0
SHIFTED = ("mfu", "mbu")  # the factors MoE shifts
SHIFT_BOUNDS = (-2.0, 1.0)  # log: MoE at e^-2 = 0.14x .. e = 2.7x of dense
DEV_BOUNDS = (-2.0, 2.0)  # log: a GPU's deviation from the shared mean shift
NF = len(FACTORS)  # factors per GPU
# degrees of freedom of the Student-t prior of a GPU's factors about the GPUs' mean: heavy
# tails, so that one GPU whose stack differs (MI300X's ROCm) keeps its own factor instead of
# pulling the mean, and with it every GPU the rows pin down weakly; 4 is the usual weakly-
# informative robust choice (Gelman et al., Bayesian Data Analysis, 3rd ed., ch. 17), not tuned
NU_GPU = 4.0
NU_ROW = 4.0  # the same tail on a row's error: a row the model cannot explain stays off
TAU_FLOOR = 0.01  # a between-GPU spread below 1 %: every GPU takes the shared mean
# A factor at most FEW_ROWS rows inform is pooled under a normal prior (no heavy tail) of spread
# SIGMA_GPU x n / (n + FEW_ROWS): one or two rows cannot pin it, so they must not drag it to a
# bound (H20's mfu went to 1.0 on one MoE row, MI300X's step overhead to 19.6 ms on one batch-1
# row of three, GB200's to 0 on its one batch-1 row of six)
FEW_ROWS = 3
# the serving engine's own scheduling overhead: an offset (ms a step) of each engine's against
# REFERENCE_ENGINE's, which the GPUs' step overheads are (the planner deploys SGLang), under a
# N(0, SIGMA_ENGINE^2) prior
REFERENCE_ENGINE = "sglang"
SIGMA_ENGINE = 2.0
ENGINE_BOUNDS = (-10.0, 20.0)
# the GPUs' mean log mfu moves with the GPU's machine balance, z = log(BF16 peak / HBM
# bandwidth / BALANCE_CENTER): a group-level predictor of the pooling (slope `balance_slope`,
# prior N(0, SIGMA_SLOPE^2)); a GPU with few FLOPs per byte (H20, A100) spends less of its
# time where the tensor cores idle
BALANCE_CENTER = 400.0  # FLOP/byte, about the Hopper and MI300 GPUs'
SIGMA_SLOPE = 1.0


def balance(gpu: GPUProfile) -> float:
    """z of `gpu`: log of its BF16 FLOPs per byte of HBM over BALANCE_CENTER."""
    return math.log(gpu.peak_flops("bf16") / (gpu.memory.hbm_tbps * 1e12) / BALANCE_CENTER)


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


def _x_shift(shift: dict[str, float]) -> str:
    return ", ".join(f"{k} x{math.exp(v):.2f}" for k, v in shift.items())


@dataclass(frozen=True)
class JointFit:
    gpus: dict[str, dict[str, float]]  # dense factors of each GPU with rows
    population: dict[str, float]  # dense factors of a GPU without rows
    shift: dict[str, float]  # log MoE shift of mfu and mbu: the shared mean
    counts: dict[str, dict[str, int]]  # GPU -> family -> rows fitted
    rows: list[int]
    errors: list[float]  # signed, + optimistic, with the fitted factors
    success: bool
    message: str
    deviation: dict[str, dict[str, float]] = field(default_factory=dict)  # GPU -> log deviation
    tau: dict[str, float] = field(default_factory=dict)  # between-GPU spread of the shift (log)
    balance_slope: float = 0.0  # log mfu of the population per unit of z (`balance`)
    engine_overhead: dict[str, float] = field(default_factory=dict)  # ms against the reference
    # the balances the slope is learned from (GPUs with more than FEW_ROWS rows): a GPU outside
    # them takes the mean at the nearest end, not an extrapolation (H20's 37 FLOP/B would
    # otherwise lift its mean mfu to the bound)
    z_range: tuple[float, float] = (-math.inf, math.inf)

    def gpu_shift(self, gpu: str) -> dict[str, float]:
        """The log MoE-vs-dense shift of `gpu`: the shared mean plus its deviation, if any."""
        dev = self.deviation.get(gpu, {})
        return {k: v + dev.get(k, 0.0) for k, v in self.shift.items()}

    def factors(self, gpu: str, family: str, z: float = 0.0) -> dict[str, float]:
        """`family`'s factors on `gpu`; a GPU without rows takes the population's at its
        machine balance `z`."""
        dense = self.gpus.get(gpu) or self.population_at(z)
        return shifted(dense, self.gpu_shift(gpu)) if family == "moe" else dict(dense)

    def population_at(self, z: float) -> dict[str, float]:
        z = min(max(z, self.z_range[0]), self.z_range[1])
        out = dict(self.population)
        out["mfu"] = min(out["mfu"] * math.exp(self.balance_slope * z), BOUNDS["mfu"][1])
        return out

    def basis(self, gpu: str, family: str) -> str:
        """How the factors of `family` on `gpu` were estimated, in words."""
        n = self.counts.get(gpu, {})
        mine, other = n.get(family, 0), n.get("dense" if family == "moe" else "moe", 0)
        mean = f"the shared mean MoE-vs-dense shift ({_x_shift(self.shift)})"
        if gpu in self.deviation:
            tau = ", ".join(f"{k} {v:.2f}" for k, v in self.tau.items())
            return (
                f"fitted to {mine} {family} row{'s' * (mine != 1)} of this GPU (joint fit); "
                f"its own MoE-vs-dense shift ({_x_shift(self.gpu_shift(gpu))}) from its rows of "
                f"both families, shrunk toward {mean} (between-GPU spread tau, log: {tau})"
            )
        if mine and other:
            return (
                f"fitted to {mine} {family} row{'s' * (mine != 1)} of this GPU (joint fit); "
                f"{mean}: the GPUs' shifts spread no more than their rows' noise explains "
                "(between-GPU spread estimated 0), so none has its own"
            )
        if mine:
            return (
                f"fitted to {mine} {family} row{'s' * (mine != 1)} of this GPU (joint fit); "
                f"no {'dense' if family == 'moe' else 'MoE'} rows here: {mean} links the families"
            )
        if other:
            return (
                f"shared part of the joint fit: this GPU has no {family} rows, so its {other} "
                f"{'dense' if family == 'moe' else 'MoE'} rows with {mean}"
            )
        return (
            "population mean of the joint fit at this GPU's machine balance (no rows on this GPU; "
            f"{mean})"
        )

    def profile(self, gpu: GPUProfile, engine: str | None = None) -> GPUProfile:
        """`gpu` with its fitted dense factors and its MoE ones (marked calibrated), its step
        overhead under `engine` (default: the planner's, the reference engine's build for it)."""
        z = balance(gpu)
        off = self.engine_overhead.get(engine or engine_build(REFERENCE_ENGINE, gpu.name), 0.0)
        fm, fd = self.factors(gpu.name, "moe", z), self.factors(gpu.name, "dense", z)
        for f in (fm, fd):
            f["step_overhead_ms"] = max(0.0, f["step_overhead_ms"] + off)
        moe = FamilyFactors(**fm, basis=self.basis(gpu.name, "moe"))
        return with_efficiency(gpu, **fd, mode="calibrated", moe=moe)


class _Problem:
    """The parameter vector's layout and the residuals of one joint fit. `tau` (per shifted
    factor) is the prior spread of each both-family GPU's deviation; None: no deviations."""

    def __init__(
        self,
        rows: list[Measurement],
        analytic: dict[str, GPUProfile],
        tau: dict[str, float] | None = None,
    ):
        self.rows, self.analytic = rows, analytic
        self.gpus = sorted({r.gpu for r in rows})
        self.models = {m: profiles.model(m) for m in {r.model for r in rows}}
        self.meas = np.array([r.value for r in rows])
        self.moe = np.array([r.family == "moe" for r in rows])
        fams = {g: {r.family for r in rows if r.gpu == g} for g in self.gpus}
        self.both = [g for g in self.gpus if len(fams[g]) == 2] if tau is not None else []
        self.tau = np.array([tau[k] for k in SHIFTED]) if tau is not None else None
        e0 = analytic[self.gpus[0]].efficiency  # the analytic defaults (the same on every GPU)
        prior = {k: getattr(e0, k) for k in FACTORS}
        self.x_prior = np.array(_to_x(prior))
        n_rows = Counter(r.gpu for r in rows)
        z = {g: balance(analytic[g]) for g in self.gpus}
        informed = [z[g] for g in self.gpus if n_rows[g] > FEW_ROWS] or list(z.values())
        self.z_range = (min(informed), max(informed))
        self.z = np.clip([z[g] for g in self.gpus], *self.z_range)
        # the rows that inform each factor (joint_pooling.py), not the GPU's rows
        sig = (SIGMA_ROW, SIGMA_GPU)
        n_eff = effective_rows(rows, analytic, self.models, prior, sig, LOG)
        self.few = np.array([n_eff[g] <= FEW_ROWS for g in self.gpus])
        self.shrink = np.array([n_eff[g] / (n_eff[g] + FEW_ROWS) for g in self.gpus])
        self.engines = sorted({r.engine_name for r in rows} - {REFERENCE_ENGINE})
        self.row_engine = [r.engine_name for r in rows]
        self._seen: dict[tuple, float] = {}  # (row, its factors) -> predicted figure
        g4, nf, ns = NF * len(self.gpus), len(FACTORS), len(SHIFTED)
        self.mu = slice(g4, g4 + nf)
        self.sh = slice(g4 + nf, g4 + nf + ns)
        self.beta = g4 + nf + ns  # the population's log mfu per unit of balance z
        self.dev0 = self.beta + 1
        self.eng0 = self.dev0 + ns * len(self.both)
        self.n = self.eng0 + len(self.engines)

    def dev(self, g: str) -> slice | None:
        if g not in self.both:
            return None
        j = self.dev0 + len(SHIFTED) * self.both.index(g)
        return slice(j, j + len(SHIFTED))

    def unpack(self, x: np.ndarray):
        gpus = {g: _from_x(x[NF * i : NF * i + NF]) for i, g in enumerate(self.gpus)}
        devs = {g: dict(zip(SHIFTED, map(float, x[self.dev(g)]))) for g in self.both}
        shift = dict(zip(SHIFTED, map(float, x[self.sh])))
        return gpus, _from_x(x[self.mu]), shift, devs, float(x[self.beta])

    def engine_offsets(self, x: np.ndarray) -> dict[str, float]:
        return {e: float(x[self.eng0 + j]) for j, e in enumerate(self.engines)}

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = [math.log(BOUNDS[k][0]) if lg else BOUNDS[k][0] for k, lg in zip(FACTORS, LOG)]
        hi = [math.log(BOUNDS[k][1]) if lg else BOUNDS[k][1] for k, lg in zip(FACTORS, LOG)]
        reps, ns, nd = len(self.gpus) + 1, len(SHIFTED), len(SHIFTED) * len(self.both)
        ne = len(self.engines)
        lo_all = lo * reps + [SHIFT_BOUNDS[0]] * ns + [-3.0] + [DEV_BOUNDS[0]] * nd
        hi_all = hi * reps + [SHIFT_BOUNDS[1]] * ns + [3.0] + [DEV_BOUNDS[1]] * nd
        lo_all += [ENGINE_BOUNDS[0]] * ne
        hi_all += [ENGINE_BOUNDS[1]] * ne
        return np.array(lo_all), np.array(hi_all)

    def x0(self) -> np.ndarray:
        lo, hi = self.bounds()
        x = np.concatenate(
            [np.tile(self.x_prior, len(self.gpus) + 1), np.zeros(self.n - self.sh.start)]
        )
        return np.clip(x, lo, hi)

    def predictions(self, x: np.ndarray) -> np.ndarray:
        gpus, _, shift, devs, _ = self.unpack(x)
        offs = self.engine_offsets(x)
        fit = JointFit(gpus, {}, shift, {}, [], [], True, "", devs, engine_overhead=offs)
        profs: dict[tuple[str, str], GPUProfile] = {}
        out = np.empty(len(self.rows))
        for i, (r, e) in enumerate(zip(self.rows, self.row_engine)):
            # a row's figure depends on its own factors only: a Jacobian column that moves
            # another GPU's or engine's leaves it as it was (the cache saves the recompute)
            f = fit.factors(r.gpu, "moe" if self.moe[i] else "dense")
            key = (i, f["mfu"], f["mbu"], max(0.0, f["step_overhead_ms"] + offs.get(e, 0.0)))
            v = self._seen.get(key)
            if v is None:
                if (r.gpu, e) not in profs:
                    profs[r.gpu, e] = fit.profile(self.analytic[r.gpu], e)
                v = self._seen[key] = predict(r, profs[r.gpu, e], self.models[r.model])
            out[i] = v
        return out

    def residuals(self, x: np.ndarray) -> np.ndarray:
        # each row's error under a Student-t likelihood (NU_ROW)
        err = student_t_residual(np.log(self.predictions(x) / self.meas) / SIGMA_ROW, NU_ROW)
        mu = x[self.mu]
        lift = np.zeros(NF)
        pool = []
        for i in range(len(self.gpus)):
            lift[0] = x[self.beta] * self.z[i]  # log mfu's mean at this GPU's balance
            r = x[NF * i : NF * i + NF] - mu - lift
            # a factor few rows inform: a normal prior, narrower with fewer rows
            few = r / (np.array(SIGMA_GPU) * self.shrink[i])
            pool.append(np.where(self.few[i], few, student_t_residual(r / SIGMA_GPU, NU_GPU)))
        prior = (mu - self.x_prior) / SIGMA_PRIOR
        devs = [x[self.dev(g)] / self.tau for g in self.both]
        slope = [x[self.beta] / SIGMA_SLOPE]
        eng = x[self.eng0 :] / SIGMA_ENGINE
        return np.concatenate([err, *pool, prior, x[self.sh] / SIGMA_SHIFT, slope, *devs, eng])

    def sparsity(self) -> np.ndarray:
        n_rows, n_g, ns = len(self.rows), len(self.gpus), len(SHIFTED)
        ne = len(self.engines)
        s = np.zeros((n_rows + NF * n_g + NF + ns + 1 + ns * len(self.both) + ne, self.n), bool)
        for i, r in enumerate(self.rows):
            j = self.gpus.index(r.gpu)
            s[i, NF * j : NF * j + NF] = True
            if self.row_engine[i] in self.engines:
                s[i, self.eng0 + self.engines.index(self.row_engine[i])] = True
            s[i, self.sh] = bool(self.moe[i])
            if self.moe[i] and r.gpu in self.both:
                s[i, self.dev(r.gpu)] = True
        for j in range(n_g):
            for k in range(NF):
                s[n_rows + NF * j + k, NF * j + k] = True
                s[n_rows + NF * j + k, self.mu.start + k] = True
            s[n_rows + NF * j, self.beta] = True  # log mfu's pooling row
        for k in range(NF):
            s[n_rows + NF * n_g + k, self.mu.start + k] = True
        for k in range(ns):
            s[n_rows + NF * n_g + NF + k, self.sh.start + k] = True
        s[n_rows + NF * n_g + NF + ns, self.beta] = True
        for k in range(ns * len(self.both)):
            s[n_rows + NF * n_g + NF + ns + 1 + k, self.dev0 + k] = True
        for k in range(ne):
            s[n_rows + NF * n_g + NF + ns + 1 + ns * len(self.both) + k, self.eng0 + k] = True
        return s

    def solve(self):
        from scipy.optimize import least_squares  # heavy to import; only the fitter needs it

        return least_squares(
            self.residuals,
            self.x0(),
            bounds=self.bounds(),
            jac_sparsity=self.sparsity(),
            method="trf",
            diff_step=1e-3,
            x_scale=1.0,
            # the factors are written to 4 digits: a relative change of 1e-6 in the cost or the
            # parameters is converged (scipy's 1e-8 default spent half the fit's evaluations
            # polishing digits nobody reads)
            ftol=1e-6,
            xtol=1e-6,
        )


def between_gpu_spread(rows: list[Measurement], analytic: dict[str, GPUProfile]) -> dict:
    """tau of each shifted factor, from a first fit with every both-family GPU's shift nearly
    free: each GPU's shift (mean + deviation) and its posterior variance, DerSimonian-Laird."""
    pb = _Problem(rows, analytic, {k: SIGMA_SHIFT for k in SHIFTED})
    if len(pb.both) < 2:
        return {k: 0.0 for k in SHIFTED}
    sol = pb.solve()
    jac = sol.jac.toarray() if hasattr(sol.jac, "toarray") else np.asarray(sol.jac)
    cov = np.linalg.pinv(jac.T @ jac)
    out = {}
    for k in range(len(SHIFTED)):
        s, v = [], []
        for g in pb.both:
            a, b = pb.sh.start + k, pb.dev(g).start + k  # type: ignore[union-attr]
            s.append(sol.x[a] + sol.x[b])
            v.append(cov[a, a] + cov[b, b] + 2 * cov[a, b])
        out[SHIFTED[k]] = math.sqrt(dersimonian_laird(np.array(s), np.maximum(v, 1e-12)))
    return out


def fit_joint(rows: list[Measurement], analytic: dict[str, GPUProfile]) -> JointFit:
    """The joint fit of `rows` (any GPUs, both families); `analytic` maps each GPU name in
    the rows to its profile as written (`fit.analytic_gpu`)."""
    if not rows:
        raise InputError(None, "measurements", "no rows to fit", "give measurement rows")
    analytic = {g: analytic[g] for g in {r.gpu for r in rows}}
    tau = between_gpu_spread(rows, analytic)
    pooled = any(t >= TAU_FLOOR for t in tau.values())
    pb = _Problem(
        rows, analytic, {k: max(t, TAU_FLOOR) for k, t in tau.items()} if pooled else None
    )
    sol = pb.solve()
    gpus, mu, shift, devs, slope = pb.unpack(sol.x)
    offsets = pb.engine_offsets(sol.x)
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
        devs,
        tau,
        slope,
        offsets,
        pb.z_range,
    )
