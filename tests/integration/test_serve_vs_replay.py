"""The serve phase (perf's closed-loop benchmark model) against the simulator's replay of the
same load (unit side: tests/unit/sim/test_serve_replay.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.perf import serve_lengths as sl
from pdd_plan.perf.serve import Load, serve
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.perf.serve_step import StepCost
from pdd_plan.sim.serve_replay import replay
from tests.unit.sim.test_serve_replay import INSTANCES, _inst  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


# (input, output, SGLang range ratio; None: fixed lengths)
LENGTHS = [(1024, 256, 0.8), (3000, 128, 0.8), (256, 256, None)]


CONCURRENCY = [1, 16, 48]


def _errors(kind: str, engine: str, lengths, c: int) -> tuple[float, float, float]:
    inst = _inst(kind)
    eng = serve_engine(engine, inst.gpu.memory.hbm_gb)
    cost = StepCost(inst, eng)
    i, o, r = lengths
    isl, osl = sl.drawn(i, r, "sglang"), sl.drawn(o, r, "sglang")
    n = max(6 * c, 12)
    rep = replay(inst, eng, isl, osl, num_prompts=n, concurrency=c, seed=7, cost=cost)
    ana = serve(inst, eng, Load(isl, osl, concurrency=c, num_prompts=n), cost=cost)
    return (
        ana.output_tokens_per_s / rep.output_tokens_per_s - 1.0,
        ana.tpot_s.mean / float(np.mean(rep.tpot_s)) - 1.0,
        ana.ttft_s.p90 / float(np.percentile(rep.ttft_s, 90)) - 1.0,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(INSTANCES))
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda x: f"{x[0]}-{x[1]}-{x[2]}")
@pytest.mark.parametrize("c", CONCURRENCY)
def test_serve_phase_agrees_with_the_replay(kind, engine, lengths, c):
    thr, tpot, ttft90 = _errors(kind, engine, lengths, c)
    assert abs(thr) <= 0.10, f"throughput {thr:+.1%}"
    assert abs(tpot) <= 0.10, f"TPOT {tpot:+.1%}"
    assert abs(ttft90) <= 0.15, f"P90 TTFT {ttft90:+.1%}"
