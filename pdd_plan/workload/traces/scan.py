"""Mooncake JSONL lines in the release's own layout, parsed straight from the file's bytes.

The Mooncake release (and ``json.dumps``) writes every line as
``{"timestamp": T, "input_length": I, "output_length": O, "hash_ids": [H, H, ...]}`` with
each number a non-negative integer. Such lines need no JSON parser: one compiled pass over
the bytes checks the layout and reads the numbers (~5x a regular expression per line plus
numpy's text parser). A number has 1 to 18 digits, so int64 holds it; after the closing
brace a line may carry spaces, tabs, CR, FF or VT before its newline. Anything else (another
spacing, a float, a blank line, ``input_length`` 0, ...) makes :func:`scan_lines` answer
None, and the reader parses those lines the general way, which names a bad line exactly.

Compiled with numba, cached on disk; imported only when a Mooncake trace is read.
"""

from __future__ import annotations

import numba
import numpy as np

from pdd_plan.common.scipy_direct import blas_for_numba

# numba imports scipy.linalg (~0.3 s) to find BLAS when it first loads a kernel; not for ours
blas_for_numba()


def _jit(fn):
    """``numba.njit(cache=True)``; without a writable cache location numba refuses to cache:
    compile on each run instead."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        return numba.njit(nogil=True)(fn)


def _bytes(s: bytes) -> np.ndarray:
    return np.frombuffer(s, dtype=np.uint8).copy()  # a global array: a compile-time constant


_T = _bytes(b'{"timestamp": ')
_I = _bytes(b', "input_length": ')
_O = _bytes(b', "output_length": ')
_H = _bytes(b', "hash_ids": [')
_MIN_LINE = 72  # bytes of the shortest canonical line (empty hash_ids) with its newline
_MAX_DIGITS = 18  # 10**18 - 1 < 2**63: no overflow
_NL, _COMMA, _SPACE, _CLOSE, _BRACE = 10, 44, 32, 93, 125


@_jit
def _literal(buf, p, lit):
    """Position after ``lit`` at ``p``, or -1."""
    k = lit.shape[0]
    if p + k > buf.shape[0]:
        return -1
    for j in range(k):
        if buf[p + j] != lit[j]:
            return -1
    return p + k


@_jit
def _number(buf, p):
    """(value, position after it) of the 1-18 digits at ``p``; position -1 when none."""
    n = buf.shape[0]
    v = 0
    q = p
    while q < n and 48 <= buf[q] <= 57 and q - p < _MAX_DIGITS:
        v = v * 10 + (buf[q] - 48)
        q += 1
    if q == p or (q < n and 48 <= buf[q] <= 57):  # no digit, or a 19th
        return 0, -1
    return v, q


@_jit
def _line_end(buf, p, eof):
    """Position after ``}``, trailing blanks and the newline at ``p``, or -1."""
    n = buf.shape[0]
    if p >= n or buf[p] != _BRACE:
        return -1
    p += 1
    while p < n and (buf[p] == _SPACE or 9 <= buf[p] <= 13) and buf[p] != _NL:
        p += 1
    if p < n:
        return p + 1 if buf[p] == _NL else -1
    return p if eof else -1  # the file's last line may lack its newline


@_jit
def _ids(buf, p, flat, m):
    """Read ``H, H, ...]`` at ``p`` into ``flat[m:]``: (position after the bracket or -1,
    ids so far, full). ``full``: ``flat`` ran out of room, ``p`` is the next id's position."""
    n = buf.shape[0]
    if p < n and buf[p] == _CLOSE:
        return p + 1, m, False
    while True:
        if m == flat.shape[0]:
            return p, m, True
        v, p = _number(buf, p)
        if p < 0:
            return -1, m, False
        flat[m] = v
        m += 1
        if p + 1 < n and buf[p] == _COMMA and buf[p + 1] == _SPACE:
            p += 2
        elif p < n and buf[p] == _CLOSE:
            return p + 1, m, False
        else:
            return -1, m, False


@_jit
def _grown(flat):
    bigger = np.empty(2 * flat.shape[0], dtype=np.int64)
    # a loop, not ``bigger[:n] = flat``: numba's slice assignment brings in its broadcasting
    # checks and their error strings, ~3.3 s of the scanner's ~6 s first compile
    for j in range(flat.shape[0]):
        bigger[j] = flat[j]
    return bigger


@_jit
def _fields(buf, p, out, k):
    """The three numbers of a line at ``p`` into ``out[k]``: position after the ``[`` or -1."""
    for f, lit in enumerate((_T, _I, _O)):
        p = _literal(buf, p, lit)
        if p < 0:
            return -1
        v, p = _number(buf, p)
        if p < 0:
            return -1
        out[k, f] = v
    if out[k, 1] < 1:  # input_length 0: the general parser names the line
        return -1
    return _literal(buf, p, _H)


@_jit
def _scan(buf, pos, max_lines, eof):
    """Up to ``max_lines`` lines from ``pos``: (lines read or -1, end, fields, counts, flat)."""
    left = buf.shape[0] - pos
    max_lines = min(max_lines, left // _MIN_LINE + 1)  # a huge max_lines allocates no more
    out = np.empty((max_lines, 3), dtype=np.int64)
    counts = np.empty(max_lines, dtype=np.int64)
    flat = np.empty(max(16, min(8 * max_lines, left // 3 + 1)), dtype=np.int64)  # "H, "
    # int64 from the start: a literal 0 here is typed Literal[int](0) on numba's first typing
    # pass, which compiled _ids and _fields once more for that type (~0.6 s of a first read)
    m = np.int64(0)
    p = pos
    k = np.int64(0)
    while k < max_lines and p < buf.shape[0]:
        p = _fields(buf, p, out, k)
        if p < 0:
            return -1, pos, out, counts, flat[:0]
        before = m
        p, m, full = _ids(buf, p, flat, m)
        while full:
            flat = _grown(flat)
            p, m, full = _ids(buf, p, flat, m)
        if p >= 0:
            p = _line_end(buf, p, eof)
        if p < 0:
            return -1, pos, out, counts, flat[:0]
        counts[k] = m - before
        k += 1
    return k, p, out[:k], counts[:k], flat[:m].copy()


def scan_lines(
    buf: bytes, pos: int, max_lines: int, eof: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Up to ``max_lines`` lines of ``buf`` from byte ``pos``, all in the canonical layout:
    (timestamps, input lengths, output lengths, all hash ids back to back, ids per line,
    byte position after the last line), or None when a line is not canonical. ``eof``:
    ``buf`` ends the file (else its last line must end in a newline)."""
    k, end, out, counts, flat = _scan(np.frombuffer(buf, dtype=np.uint8), pos, max_lines, eof)
    if k < 0:
        return None
    return out[:, 0].copy(), out[:, 1].copy(), out[:, 2].copy(), flat, counts, int(end)
