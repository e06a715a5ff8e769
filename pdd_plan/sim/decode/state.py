"""The decode replay's state as numpy arrays, for :mod:`pdd_plan.sim.decode.kernel`.

* ``R``: one record per request (index ``r``), ``Q``: one record per instance (index ``k``, MD
  first then RLD) - structured arrays, so a compiled function takes the whole state as one
  argument and reads ``R[r].first`` or the column ``R.first``;
* ``T`` (a named tuple): the step and extend tables and the scalar parameters, read only;
* ``W`` (a named tuple): work arrays - the instances' finish-tag heap slots, the dynamic event
  heap, a scratch list, the loop's counters and clock.

Every field is ``int64`` or ``float64``, so each compiled function has one signature.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from pdd_plan.sim.decode.io import DecodeInputs

_I, _F = np.int64, np.float64
REQUEST = np.dtype(
    [
        # inputs
        ("route", _I),  # queues.Route
        ("out", _I),  # output tokens
        ("ctx", _F),  # mean context in a decode step
        ("ectx", _F),  # context MD extends on
        ("kvm", _F),  # KV reserved on MD (bytes)
        ("kvr", _F),  # KV reserved on RLD (bytes)
        ("rid", _I),  # r: the finish-tag heaps' tie-break
        # state
        ("status", _I),  # states.State
        ("adm", _F),  # step counter at admission
        ("on", _I),  # instance it runs on, -1: none
        ("need", _I),  # tokens to make there
        ("held", _F),  # KV it reserves there
        ("tag", _F),  # step count at which it leaves its batch
        ("hpos", _I),  # index in its instance's finish-tag heap
        ("q_md", _I),  # next in the same wait queue, on MD / on RLD
        ("q_rld", _I),
        ("ev_t", _F),  # its pending dynamic event: time, sequence number, kind, heap index
        ("ev_seq", _I),
        ("ev_kind", _I),
        ("ev_pos", _I),
        # results
        ("first", _F),
        ("end", _F),
        ("rk", _I),  # tokens made on RLD
        ("md_arr", _F),
        ("md_adm", _F),
        ("md_of", _I),
    ],
    align=True,  # numba types a field of an unaligned record array apart
)
INSTANCE = np.dtype(
    [
        ("tl", _F),  # last update
        ("G", _F),  # step counter
        ("B", _I),  # batch
        ("kvu", _F),  # KV used
        ("sc", _F),  # sum of the batch's contexts
        ("area", _F),  # batch-seconds
        ("stp", _F),  # step seconds at the current batch
        ("nxt", _F),  # next departure
        ("bm", _I),  # batch cap
        ("kc", _F),  # KV pool (bytes)
        ("is_rld", _I),
        ("tab", _I),  # its step table (index in T.steps)
        ("qhead", _I),  # FIFO wait queue
        ("qtail", _I),
        ("qlen", _I),
        ("hbase", _I),  # finish-tag heap: W.slots[hbase : hbase + hsize]
        ("hsize", _I),
    ],
    align=True,
)
# a step table: column c at batch b is T.s_vals[off + c * len + b]
STEPS = np.dtype([("off", _I), ("len", _I), ("ncol", _I), ("c0", _F), ("inv_dc", _F), ("bmax", _I)])
Tables = namedtuple(
    "Tables",
    [
        "steps",  # STEPS records
        "s_vals",
        "x_ctx",  # extend table: context points, [context, k] seconds, largest k
        "x_cols",
        "x_kmax",
        "n_md",
        "relay_cap",
        "one_shot",
        "lat",
    ],
)
Work = namedtuple("Work", ["slots", "joined", "heap", "counts", "now"])


_ROWS = 4096  # records filled at a time: ~0.8 MiB, so a block stays in cache for every field


def requests(inp: DecodeInputs) -> np.ndarray:
    """R, filled block by block: a field written over the whole array at once walks all of
    its 208-byte records (a million requests: ~200 MiB per field)."""
    n = len(inp.route)
    R = np.zeros(n, dtype=REQUEST)
    cols = {
        "route": np.asarray(inp.route),
        "out": np.asarray(inp.output_tokens),
        "ctx": np.asarray(inp.step_ctx),
        "ectx": np.asarray(inp.ext_ctx),
        "kvm": np.asarray(inp.kv_md),
        "kvr": np.asarray(inp.kv_rld),
        "rid": np.arange(n),
    }
    for lo in range(0, n, _ROWS):
        block = R[lo : lo + _ROWS]
        for f, col in cols.items():
            block[f] = col[lo : lo + _ROWS]
        for f in ("on", "q_md", "q_rld", "md_of"):
            block[f] = -1
        for f in ("first", "end", "md_arr", "md_adm"):
            block[f] = math.nan
    return R


def _step_tables(tabs: list) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(STEPS records, their values, each instance's table); instances of one type share a
    table. A table gives ``cols`` (step seconds by batch, per context point) and, with several
    columns, ``c0``, ``inv_dc`` and ``bmax`` (as :class:`~pdd_plan.sim.timings.StepTable`)."""
    index: dict[int, int] = {}
    vals: list[np.ndarray] = []
    meta: list[tuple] = []
    off = 0
    for tab in tabs:
        if id(tab) in index:
            continue
        index[id(tab)] = len(meta)
        cols = np.asarray(tab.cols, dtype=np.float64)
        if cols.ndim != 2:
            raise ValueError("a step table's columns must all have the same length")
        ncol, ln = cols.shape
        if ncol == 1:
            meta.append((off, ln, 1, 0.0, 0.0, ln - 1))
        else:
            meta.append((off, ln, ncol, float(tab.c0), float(tab.inv_dc), int(tab.bmax)))
        vals.append(cols.ravel())
        off += cols.size
    flat = np.concatenate(vals) if vals else np.zeros(1)
    return np.array(meta, dtype=STEPS), flat, [index[id(t)] for t in tabs]


def instances(inp: DecodeInputs, t0: float) -> tuple[np.ndarray, Tables, np.ndarray]:
    """(Q, T, the finish-tag heaps' slots)."""
    engines = inp.md + inp.rld
    for e in engines:
        cols = e.steps.cols
        if len(cols) == 1 and len(cols[0]) <= e.bmax:
            raise ValueError("a one-column step table needs a step for every batch to bmax")
    steps, vals, tab = _step_tables([e.steps for e in engines])
    Q = np.zeros(len(engines), dtype=INSTANCE)
    Q["tl"] = t0
    Q["nxt"] = math.inf
    Q["bm"] = [e.bmax for e in engines]
    Q["kc"] = [e.kv_pool_bytes for e in engines]
    Q["is_rld"][len(inp.md) :] = 1
    Q["tab"] = tab
    Q["qhead"] = Q["qtail"] = -1
    cap = np.maximum(Q["bm"], 1) + 1  # a batch never exceeds its cap: nor does its heap
    Q["hbase"][1:] = np.cumsum(cap)[:-1]
    ext = inp.extend
    if ext is None:
        x = (np.zeros(1), np.zeros((1, 1)), 0)
    else:
        ctx = np.array(ext.ctx, dtype=np.float64)
        x = (ctx, np.array(ext.cols, dtype=np.float64, order="C"), int(ext.kmax))
    T = Tables(
        steps, vals, *x, len(inp.md), int(inp.relay_cap), bool(inp.one_shot),
        float(inp.ids_latency_s),
    )  # fmt: skip
    return Q, T, np.zeros(int(cap.sum()), dtype=np.int64)


def work(slots: np.ndarray, bmax: int, n: int, t0: float) -> Work:
    """Each request has at most one pending dynamic event (from its handoff): n heap slots."""
    z = np.zeros
    return Work(slots, z(bmax + 1, _I), z(max(n, 1), _I), z(4, _I), np.full(1, t0))
