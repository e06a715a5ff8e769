"""A scenario's `engine:` limits: validated with one-line errors, each replacing the engine's
default, and read by the planner's catalog, the simulator's plan rows and an evaluated fleet;
the one engines file serves the batch limits and the serve phase alike."""

from __future__ import annotations

import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.common.errors import InputError
from pdd_plan.evaluate.fleet import instance as fleet_instance
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.schema.engine import EngineLimits
from pdd_plan.inputs.schema.fleet import FleetGroup
from pdd_plan.inputs.schema.io import parse
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.optimize.problem import Catalog
from pdd_plan.outputs.plan import InstanceGroup
from pdd_plan.perf import engine_limits
from pdd_plan.perf.instance import Instance
from pdd_plan.perf.serve_engine import serve_engine
from pdd_plan.sim.setup import row_instance

pytestmark = pytest.mark.unit

DEFAULT = str(profiles.data_dir() / "examples" / "pdd-paper.yaml")


def _scenario(engine: dict | None) -> Scenario:
    data = load_scenario(DEFAULT).model_dump(mode="json", exclude_none=True)
    if engine is not None:
        data["engine"] = engine
    return parse(Scenario, data, "s.yaml")


def _inst(**kw) -> Instance:
    return Instance(profiles.model("llama-3.1-8b"), cal.analytic_gpu("h100"), 1, tp=1, ep=1, **kw)


def test_each_configured_limit_replaces_its_default_and_the_smallest_binds():
    base = engine_limits.engine_caps(_inst())
    # SGLang on an 80 GB GPU at TP 1: graphs to 256, 8,192-token chunks, no running limit
    assert base == {"token_budget": 8192.0, "cuda_graph": 256.0}
    caps = engine_limits.engine_caps(_inst(limits=EngineLimits(max_running_requests=100)))
    assert caps["running_requests"] == 100 and caps["cuda_graph"] == 256
    assert _inst(limits=EngineLimits(max_running_requests=100)).max_batch(500.0) == 100
    # a raised graph cap lets the KV pool or the token budget bind instead
    big = _inst(limits=EngineLimits(cuda_graph_max_batch=4096))
    assert big.max_batch(500.0) == min(big.kv_max_batch(500.0), 8192)
    assert _inst(limits=EngineLimits(max_num_tokens=64)).max_batch(500.0) == 64


def test_the_running_limit_is_the_instances_and_the_graphs_per_dp_rank():
    v3 = profiles.model("deepseek-v3")
    lim = EngineLimits(max_running_requests=512, cuda_graph_max_batch=32)
    inst = Instance(v3, cal.analytic_gpu("h200"), 8, tp=8, ep=8, dp=8, limits=lim)
    caps = engine_limits.engine_caps(inst)
    # SGLang divides --max-running-requests among the DP ranks; each rank has its own graphs
    assert caps["running_requests"] == 512 and caps["cuda_graph"] == 8 * 32


def test_a_configured_batch_still_replaces_the_scenarios_limits():
    inst = _inst(max_running=300, limits=EngineLimits(max_running_requests=10))
    assert inst.max_batch(500.0) == 300  # `perf --batch` is the engine's configured limit


@pytest.mark.parametrize(
    "engine, field",
    [
        ({"max_running_requests": 0}, "engine.max_running_requests"),
        ({"cuda_graph_max_batch": 10**9}, "engine.cuda_graph_max_batch"),
        ({"max_num_tokens": -5}, "engine.max_num_tokens"),
        ({"max_running": 8}, "engine"),
    ],
)
def test_bad_engine_limits_are_one_line_errors(engine, field):
    with pytest.raises(InputError) as e:
        _scenario(engine)
    msg = str(e.value)
    assert field in msg and "\n" not in msg


def test_planner_simulator_and_evaluate_read_the_scenarios_limits():
    sc = _scenario({"max_running_requests": 48})
    ctx = build_context(sc, DEFAULT)
    assert ctx.profiles.engine == EngineLimits(max_running_requests=48)
    cat = Catalog.of(ctx.model, ctx.gpus, sc.search, sc.engine)
    for inst in cat.instances("h200"):
        assert inst.max_batch(2000.0) <= 48
    row = InstanceGroup(role="main_decode", gpu="h200", datacenter="dc-b", count=1,
                        gpus_per_instance=16, tp=16, dp=16, ep=16, cost_per_hour=1.0)  # fmt: skip
    assert row_instance(ctx.profiles, row).max_batch(2000.0) <= 48
    grp = FleetGroup(role="main_decode", gpu="h200", datacenter="dc-b", count=1,
                     gpus_per_instance=16)  # fmt: skip
    assert fleet_instance(ctx.profiles, "s.yaml", grp, "fleet").max_batch(2000.0) <= 48


def _main_decode_gpus(ctx) -> int:
    p = optimize(ctx, verify=False).plans["pdd"]
    return sum(g.count * g.gpus_per_instance for g in p.instances if g.role == "main_decode")


def test_a_lower_running_limit_needs_more_main_decode_gpus():
    # the default plan runs its main decode at a batch far above 32 per instance; capped at 32
    # the same rate needs more decode instances (monotone in the limit)
    free = _main_decode_gpus(build_context(_scenario(None), DEFAULT))
    capped = _main_decode_gpus(build_context(_scenario({"max_running_requests": 32}), DEFAULT))
    assert capped > free


def test_one_engines_file_for_batch_limits_and_the_serve_phase():
    # the serve phase's engine and the batch limits read the same entry (aliases resolved)
    assert (
        engine_limits.resolve("trtllm-bench") == "trtllm" == serve_engine("tensorrt-llm", 80).name
    )
    assert serve_engine("sglang", 80).step_tokens == engine_limits.defaults().token_budget(80)
    assert (
        engine_limits.defaults("vllm").max_running_requests == serve_engine("vllm", 80).max_running
    )
    with pytest.raises(InputError, match="unknown serving engine"):
        engine_limits.resolve("tgi")
