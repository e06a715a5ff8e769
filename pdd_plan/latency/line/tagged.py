"""The exact law of one transfer's time on a flow-capped processor-sharing line.

The line (:mod:`network`): Poisson arrivals at ``lambda``, exponential sizes of mean ``1 / mu``
bytes, at most ``c`` transfers served at once (the pool), sharing a total rate ``r(m) =
min(m f, C)`` equally among the ``m`` served (``f`` one transfer's cap, ``C`` the line's).
A tagged transfer of ``x`` bytes in service with ``n`` others present runs at ``s(n) =
r(m) / m``, ``m = min(n + 1, c)``.

Time-change to the tagged transfer's served bytes ``b``: the others served run at its own
speed, so each leaves at rate ``mu`` per tagged byte, and arrivals come at ``lambda / s(n)`` per
tagged byte. The number of others ``N(b)`` is then a birth-death chain (births ``lambda /
s(n)``, deaths ``(m - 1) mu``), started from what the transfer finds on arrival (PASTA: the
stationary law ``pi`` of the line's number in system), and its time is the additive functional
``T(x) = integral_0^x g(N(b)) db``, ``g = 1 / s``. With the chain's generator ``Q``:

* ``E[T(x)] = pi integral_0^x e^(Q b) db g``;
* ``E[T(x)^2] = 2 pi integral_{b1 + u <= x} e^(Q b1) G e^(Q u) db1 du g``;
* ``P(T(x) = x / f) = pi_A e^(Q_AA x) 1``, ``A`` the states where the transfer runs at its cap
  (``(n + 1) f <= C``, ``n + 1 <= c``): it never shares below its cap.

A birth-death generator is similar to a symmetric tridiagonal matrix (``D^(1/2) Q D^(-1/2)``,
``D`` its stationary law), so one eigen-decomposition ``Q = D^(-1/2) V Lambda V' D^(1/2)``
serves every ``x``: with ``a = pi D^(-1/2) V``, ``h = V' D^(1/2) g``, ``M = V' G V``,

* ``E[T(x)] = sum_k a_k h_k I(lambda_k)``, ``I(l) = (e^(l x) - 1) / l`` (``x`` at ``l = 0``);
* ``E[T(x)^2] = 2 sum_jk a_j M_jk h_k F(lambda_j, lambda_k)``, ``F(l, l') = integral over the
  triangle = (I(l') - I(l)) / (l' - l)``, the divided difference of ``e^(t x)`` at ``0, l,
  l'`` (``dI / dl`` on the diagonal). Split by the two terms, the double sum is ``sum_k I(l_k)
  w_k`` plus the diagonal: ``O(K)`` per ``x`` after ``O(K^2)`` once per line and load.

Exact for Poisson arrivals and exponential sizes, up to the truncation of ``N`` (chosen so
the stationary mass beyond it is below 1e-13). The pool's FIFO wait before service is not
in ``T`` (the caller adds it); the arrival's found law is used as if it started at once."""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from pdd_plan.common.scipy_direct import linalg_extension


def eigh_tridiagonal(diag: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of the symmetric tridiagonal matrix: what
    scipy.linalg.eigh_tridiagonal(diag, off, lapack_driver="stevd") returns, bit for bit
    (tested; "stevd" is what its default, "auto", picks for every eigenpair in scipy 1.17),
    on one BLAS thread (:func:`one_blas_thread`)."""
    d, e = np.asarray_chkfinite(diag, dtype=np.float64), np.asarray_chkfinite(off, dtype=np.float64)
    ok = d.ndim == 1 and d.size >= 2 and e.shape == (d.size - 1,)
    flapack = linalg_extension("_flapack") if ok else None  # scipy.linalg not imported: ~0.3 s
    stevd = getattr(flapack, "dstevd", None)
    if stevd is not None:
        with one_blas_thread(flapack):
            w, v, info = stevd(d, e, compute_v=1)
        if info == 0:
            return w, v
    # scipy's own (its checks and errors): ~0.3 s to import, only where the direct call can't
    from scipy.linalg import eigh_tridiagonal as eigh

    return eigh(diag, off, lapack_driver="stevd")


@contextmanager
def one_blas_thread(flapack: object) -> Iterator[None]:
    """The calling thread's BLAS calls of scipy's bundled OpenBLAS on one thread while inside.

    dstevd merges its eigenvectors with dgemm, which OpenBLAS splits over every core: on these
    matrices (tens to ~1,500 states) the threads cost more than they share (the default's
    281-state pool chain: ~5 ms on one thread, 30-45 ms on two when the 2-core box is busy),
    and the eigenvectors' last bits follow the thread count, so one thread also makes them
    the same on every machine. Where scipy's OpenBLAS is not found (another BLAS), a no-op."""
    setter = _thread_setter(str(getattr(flapack, "__file__", "")))
    prev = setter(1) if setter is not None else None
    try:
        yield
    finally:
        if setter is not None and prev is not None:
            setter(prev)


@cache
def _thread_setter(flapack_file: str) -> Callable[[int], int] | None:
    """OpenBLAS's ``openblas_set_num_threads_local`` (sets the calling thread's count, returns
    the one before) of the library scipy's wheel bundles beside its package (``scipy.libs``)."""
    if not flapack_file:
        return None
    libs = sorted(Path(flapack_file).resolve().parents[2].glob("scipy.libs/libscipy_openblas*.so*"))
    for path in libs:
        try:
            fn = ctypes.CDLL(str(path)).openblas_set_num_threads_local
        except (OSError, AttributeError):  # not loadable, or an OpenBLAS before 0.3.27
            continue
        fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
        return fn
    return None


_TAIL = 1e-13  # stationary mass left beyond the truncation
_K_MAX = 1500  # states at most (a line near saturation: rho^K < 1e-13 needs K ~ 30 / (1 - rho))


@dataclass(frozen=True)
class TaggedLaw:
    """The tagged-transfer moments of one line at one load, in units of the mean size (bytes
    ``b = x mu``) and seconds; built by :func:`tagged_law`."""

    lam: np.ndarray  # eigenvalues of Q (per mean size of tagged bytes), lam[-1] = 0
    mean_coef: np.ndarray  # a_k h_k
    sq_coef: np.ndarray  # w_k: E[T^2] = 2 (sum_k w_k I_k + sum_k A_kk dI_k)
    diag_coef: np.ndarray  # A_kk
    atom_lam: np.ndarray  # eigenvalues of Q restricted to the at-cap states
    atom_coef: np.ndarray  # their weights in P(stay at the cap)
    mean_bytes: float


def _i1(lam: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``(e^(l x) - 1) / l`` per (x, l), ``x`` at ``l = 0`` (``l <= 0``)."""
    z = np.multiply.outer(x, lam)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(z == 0.0, 1.0, np.expm1(z) / np.where(z == 0.0, 1.0, z))
    return r * x[:, None]


def _di1(lam: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``d/dl (e^(l x) - 1) / l = (l x e^(l x) - e^(l x) + 1) / l^2``, ``x^2 / 2`` at ``l = 0``;
    the series below ``|l x| = 1e-3`` (the difference cancels there)."""
    z = np.multiply.outer(x, lam)
    small = np.abs(z) < 1e-3
    zs = np.where(small, 1.0, z)
    with np.errstate(over="ignore", invalid="ignore"):
        big = (zs * np.exp(zs) - np.expm1(zs)) / (zs * zs)
    ser = 0.5 + z / 3.0 + z * z / 8.0
    return np.where(small, ser, big) * (x * x)[:, None]


def _chains(
    c: int, rho: float, capacity: float, flow_cap: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(log pi of the number found, births, deaths, speed s) per number of others ``n``, in
    units of one mean size (``mu = 1``); truncated where pi's tail is below 1e-13."""
    usable = min(capacity, c * flow_cap)
    lam = rho * usable  # arrivals per second times a mean size: bytes per second offered
    # the line's own chain (real time): pi(n) / pi(n - 1) = lambda / r(n)
    n = np.arange(1, _K_MAX + 1, dtype=float)
    r = np.minimum(capacity, np.minimum(n, c) * flow_cap)
    logpi = np.concatenate([[0.0], np.cumsum(np.log(lam / r))])
    logpi -= np.logaddexp.reduce(logpi)
    tail = np.logaddexp.accumulate(logpi[::-1])[::-1]  # log P(N >= n)
    k = int(np.argmax(tail < np.log(_TAIL))) if (tail < np.log(_TAIL)).any() else _K_MAX
    k = max(k, 2)
    others = np.arange(k, dtype=float)
    m = np.minimum(others + 1.0, c)
    s = np.minimum(capacity, m * flow_cap) / m  # the tagged transfer's bytes per second
    birth = lam / s  # arrivals per tagged mean size
    birth[-1] = 0.0  # truncation: reflect
    death = m - 1.0  # each other served leaves at mu per tagged byte
    return logpi[:k], birth, death, s


def _symmetric(birth: np.ndarray, death: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(diagonal, off-diagonal, log stationary law) of ``D^(1/2) Q D^(-1/2)``."""
    diag = -(birth + death)
    off = np.sqrt(birth[:-1] * death[1:])
    with np.errstate(divide="ignore"):
        logphi = np.concatenate([[0.0], np.cumsum(np.log(birth[:-1]) - np.log(death[1:]))])
    return diag, off, logphi


def _atom_part(
    logpi: np.ndarray, birth: np.ndarray, death: np.ndarray, s: np.ndarray, flow_cap: float
) -> tuple[np.ndarray, np.ndarray]:
    """P(the chain stays in the at-cap states A for x bytes) = ``pi_A e^(Q_AA x) 1`` as
    ``sum_k coef_k e^(lam_k x)``: Q_AA keeps the births out of A as killing."""
    at_cap = np.flatnonzero(s >= flow_cap * (1.0 - 1e-12))
    if at_cap.size == 0:
        return np.zeros(0), np.zeros(0)
    na = int(at_cap[-1]) + 1  # A = {0..na-1}: s falls monotonically in n
    b, d = birth[:na].copy(), death[:na]
    b_out = birth[na - 1] if na < birth.size else 0.0
    diag = -(b + d)
    diag[-1] = -(b_out + d[-1])
    off = np.sqrt(b[:-1] * d[1:])
    logphi = np.concatenate([[0.0], np.cumsum(np.log(b[:-1]) - np.log(d[1:]))])
    if na == 1:
        lam_a, v = diag.copy(), np.ones((1, 1))
    else:
        lam_a, v = eigh_tridiagonal(diag, off)
    half = np.exp(0.5 * (logphi - logphi.max()))
    left = np.exp(logpi[:na]) / half  # pi D^(-1/2)
    right = half  # D^(1/2) 1
    return lam_a, (left @ v) * (v.T @ right)


@dataclass(frozen=True)
class _Chain:
    """What :func:`tagged_law` computes before the mean size enters (the chain and its
    eigen-decomposition are in units of one mean size: ``mu = 1``)."""

    lam: np.ndarray
    v: np.ndarray
    half: np.ndarray
    left: np.ndarray
    s: np.ndarray
    a: np.ndarray
    inv: np.ndarray
    atom_lam: np.ndarray
    atom_coef: np.ndarray


@lru_cache(maxsize=256)
def _chain(c: int, rho: float, capacity: float, flow_cap: float) -> _Chain:
    """The line's chain at one load, decomposed: shared by every mean size asked at it (the
    plan's classes and the handoff's KV grid ask the same line and load with other sizes)."""
    logpi, birth, death, s = _chains(c, rho, capacity, flow_cap)
    diag, off, logphi = _symmetric(birth, death)
    lam, v = eigh_tridiagonal(diag, off)
    lam = np.minimum(lam, 0.0)  # the generator's spectrum is <= 0; drop rounding
    half = np.exp(0.5 * (logphi - logphi.max()))
    # pi D^(-1/2) in logs: pi is tiny where D is, their ratio is not
    left = np.exp(logpi - 0.5 * (logphi - logphi.max()))
    a = left @ v
    dl = lam[None, :] - lam[:, None]  # l_k - l_j
    off_diag = ~np.eye(lam.size, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(off_diag, 1.0 / np.where(off_diag, dl, 1.0), 0.0)
    lam_a, atom_coef = _atom_part(logpi, birth, death, s, flow_cap)
    out = _Chain(lam, v, half, left, s, a, inv, lam_a, atom_coef)
    for f in dataclasses.fields(out):  # memoized: shared by every caller
        getattr(out, f.name).setflags(write=False)
    return out


@lru_cache(maxsize=256)
def tagged_law(
    c: int, rho: float, capacity: float, flow_cap: float, mean_bytes: float
) -> TaggedLaw:
    """The decomposition of :mod:`this module <tagged_transfer>` for a line of ``c`` pool
    slots, ``capacity`` and per-transfer ``flow_cap`` bytes/s at utilization ``rho`` (< 1) of
    its usable rate, mean size ``mean_bytes``; memoized (the optimizer asks per line option),
    the chain's decomposition per load (:func:`_chain`)."""
    ch = _chain(c, rho, capacity, flow_cap)
    lam, v, a = ch.lam, ch.v, ch.a
    g = mean_bytes / ch.s  # seconds per tagged mean size in each state
    h = v.T @ (ch.half * g)
    # M = V' G V: G is g's last value wherever the tagged transfer shares the pool's c slots
    # (n >= c - 1 others), so M = g_c I + V_r' (G - g_c)_r V_r over the r < c states before:
    # O(r K^2), not O(K^3); the identity part is diagonal (no divided difference)
    r = int(np.flatnonzero(g != g[-1]).max()) + 1 if np.any(g != g[-1]) else 0
    vr = v[:r]
    low = (vr.T * (g[:r] - g[-1])) @ vr
    amat = a[:, None] * low * h[None, :]
    diag_m = g[-1] + np.diag(low)
    # sum_{j != k} A_jk (I_k - I_j) / (l_k - l_j) = sum_k I_k sum_{j != k} (A_jk + A_kj) / (l_k - l_j)
    w = np.sum((amat + amat.T) * ch.inv, axis=0)
    return TaggedLaw(lam, a * h, w, a * diag_m * h, ch.atom_lam, ch.atom_coef, mean_bytes)


def tagged_moments(
    law: TaggedLaw, size_bytes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E[T(x)], E[T(x)^2], P(T(x) = x / f)) in seconds per size ``x`` (bytes)."""
    x = np.asarray(size_bytes, dtype=float) / law.mean_bytes
    flat = np.atleast_1d(x).ravel()
    i1 = _i1(law.lam, flat)
    mean = i1 @ law.mean_coef
    second = 2.0 * (i1 @ law.sq_coef + _di1(law.lam, flat) @ law.diag_coef)
    atom = (
        np.exp(np.multiply.outer(flat, law.atom_lam)) @ law.atom_coef
        if law.atom_lam.size
        else 0.0 * flat
    )
    # rounding can push the second moment a hair under the mean's square
    second = np.maximum(second, mean * mean)
    shape = np.shape(x)
    return mean.reshape(shape), second.reshape(shape), np.clip(atom, 0.0, 1.0).reshape(shape)
