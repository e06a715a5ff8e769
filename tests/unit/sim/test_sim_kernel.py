"""The compiled decode kernel: its constants against states.py, its array heaps against
heapq, and the relay handoffs (one_shot, catch_up, paused) against hand arithmetic."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from pdd_plan.sim.decode import heaps
from pdd_plan.sim.decode import kernel as dk
from pdd_plan.sim.decode.decoder import DecodeInputs, Engine, run_decode
from pdd_plan.sim.queues import Route
from pdd_plan.sim.states import Event, State

pytestmark = pytest.mark.unit


def test_kernel_constants_match_the_named_states_and_events() -> None:
    names = ["NEW", "QUEUED_RLD", "ON_RLD", "PAUSED", "DONE_RLD", "ON_MD"]
    assert [getattr(dk, n) for n in names] == [int(State[n]) for n in names]
    events = ["KV_AT_RLD", "KV_AT_MD", "HANDOFF", "EXTENDED", "CAUGHT_UP"]
    assert [getattr(dk, n) for n in events] == [int(Event[n]) for n in events]
    assert dk.P_RLD_MD == int(Route.P_RLD_MD)


def test_array_heap_pops_in_heapq_order_with_ties_and_removals() -> None:
    # twins callable from Python: the kernels themselves are built for kernels to call
    heap_push, heap_remove, heap_pop = map(
        heaps.from_python, (heaps.heap_push, heaps.heap_remove, heaps.heap_pop)
    )
    rng = np.random.default_rng(5)
    n = 400
    key = rng.integers(0, 20, n).astype(float)  # many ties: the tie array decides
    tie = rng.permutation(n).astype(np.int64)
    slots, pos = np.zeros(n, np.int64), np.zeros(n, np.int64)
    ref: list[tuple[float, int, int]] = []
    size = 0
    for r in range(n):
        heap_push(slots, pos, key, tie, 0, size, r)
        size += 1
        heapq.heappush(ref, (key[r], tie[r], r))
    gone = set(rng.choice(n, 100, replace=False).tolist())
    for r in gone:
        heap_remove(slots, pos, key, tie, 0, size, r)
        size -= 1
    got = []
    while size:
        got.append(heap_pop(slots, pos, key, tie, 0, size))
        size -= 1
    want = [r for _, _, r in sorted(ref) if r not in gone]
    assert got == want


class _Steps:
    cols = [[1.0, 1.0, 1.0]]  # one token a second at any batch


class _Extend:
    ctx = [100.0]
    cols = [[0.1 * k for k in range(9)]]  # 0.1 s a relay token
    kmax = 8


def _relay(one_shot: bool, cap: int):
    """One p_rld_md request of 10 tokens: KV at RLD at 0, across the line at 3.5 s; token ids
    take 0.25 s to MD."""
    one, z = np.ones(1), np.zeros(1)
    eng = Engine(_Steps(), 2, 1e30)  # type: ignore[arg-type]
    inp = DecodeInputs(
        np.array([Route.P_RLD_MD]), one * 3.5, z, np.array([10]), one, one * 100, z, z,
        [eng], [eng], _Extend(), cap, one_shot, 0.25,  # type: ignore[arg-type]
    )  # fmt: skip
    return run_decode(inp)


def test_one_shot_handoff_by_hand() -> None:
    d = _relay(True, 8)
    # 3 tokens on RLD by 3.5 s; MD extends them (0.3 s) after the ids arrive: 3.5 + 0.25 + 0.3
    assert d.rld_tokens[0] == 3 and d.first_s[0] == 1.0
    assert d.md_arrive_s[0] == pytest.approx(4.05) and d.md_admit_s[0] == pytest.approx(4.05)
    assert d.end_s[0] == pytest.approx(4.05 + 7)


def test_catch_up_handoff_by_hand() -> None:
    d = _relay(False, 8)
    # RLD keeps decoding until MD has extended the first 3: at 4.05 it has made 4
    assert d.rld_tokens[0] == 4
    assert d.end_s[0] == pytest.approx(4.05 + 6)


def test_paused_relay_by_hand() -> None:
    d = _relay(True, 2)
    # the relay cap (2 tokens, done at 2 s) comes before the KV crosses: paused until MD
    # extended both, 3.5 + 0.25 + 0.2
    assert d.rld_tokens[0] == 2 and d.first_s[0] == 1.0
    assert d.end_s[0] == pytest.approx(3.95 + 8)


def test_one_column_step_table_must_reach_bmax() -> None:
    z = np.zeros(1)
    eng = Engine(_Steps(), 5, 1e30)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bmax"):
        run_decode(DecodeInputs(np.zeros(1, np.int8), z, z, np.ones(1), z, z, z, z, [eng]))
