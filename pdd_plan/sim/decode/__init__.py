"""Continuous-batching decode in the replay: the event loop (compiled with numba) and its state."""

from pdd_plan.common.scipy_direct import blas_for_numba

# numba imports scipy.linalg (~0.3 s) to find BLAS when it first loads a kernel (ours call no
# BLAS); the kernels (here and sim/queue_kernel.py) import through this package, so before that
blas_for_numba()
