"""Hostile input, family 1: a day that contradicts itself. One table of day scenarios (the
bundled days and their neighbours: on-demand dearer, every GPU owned at $0, part of one type
owned, a day with `owned:`), each planned once without replays and held to what any day plan
must satisfy:

* it never costs more than the busiest period's plan held all day (`peak_plan_cost_day`);
* its cost splits into base + elastic + line;
* no period buys elastic (on-demand) GPUs of a (datacenter, type) while owned ones of it sit
  outside the base (owned capacity first);
* each emitted KEDA cron window opens and closes at different minutes, and every period runs
  the plan's replicas.

Then the commands that read a day and refuse what would contradict it (`--robust`, a period
off the minute, a hand-edited `day` section), and the planner's fallback to the held fleet."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import pytest
import yaml

from pdd_plan.architectures import get
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.day import search
from pdd_plan.optimize.day.day_problem import DayProblem
from pdd_plan.outputs.plan import Plan
from pdd_plan.workload.periods import build_day
from tests.cli_helpers import invoke, refused
from tests.mutations import example, owned_day

pytestmark = pytest.mark.integration

ALL_OWNED = {  # every GPU of both datacenters owned, sunk
    "gpus": [
        {"datacenter": "dc-a", "gpu": "h100", "count": 512, "cost_per_gpu_hour": 0.0},
        {"datacenter": "dc-b", "gpu": "h200", "count": 256, "cost_per_gpu_hour": 0.0},
    ]
}


def _edit(name: str, archs: list[str] | None = None, **top) -> dict:
    d = copy.deepcopy(example(name))
    if archs is not None:
        d["architectures"] = archs
    d.update(top)
    return d


def _dearer(name: str, factor: float, archs: list[str]) -> dict:
    d = _edit(name, archs)
    d["on_demand_prices"] = {g: p * factor for g, p in d["on_demand_prices"].items()}
    return d


def _part_owned() -> dict:
    """a-day at its own rate (7 prefill instances at the peak) with 64 of its H100s sunk: four
    instances' worth, fewer than the peak pool."""
    own = {"gpus": [{"datacenter": "dc-a", "gpu": "h100", "count": 64, "cost_per_gpu_hour": 0}]}
    return _edit("a-day", ["idc_pd"], owned=own)


def _owned_near_on_demand() -> dict:
    """a-day with owned GPUs at $4/GPU-h: under the H100's $4.25 on-demand, so a few peak
    hours of on-demand cost less than owned GPUs all day, yet the owned ones are there all
    day: they must be in use before any is bought."""
    own = {
        "gpus": [
            {"datacenter": "dc-a", "gpu": "h100", "count": 80, "cost_per_gpu_hour": 4.0},
            {"datacenter": "dc-b", "gpu": "h200", "count": 96, "cost_per_gpu_hour": 4.0},
        ]
    }
    return _edit("a-day", ["pdd"], owned=own)


# case -> (the scenario, what else holds for it)
CASES = {
    # the example: at 30d13eb PDD's unverified day cost $3,814 against $2,522 held
    "a-day-narrow-line": (lambda: _edit("a-day-narrow-line"), "elastic"),
    "a-day": (lambda: _edit("a-day"), "elastic"),
    # on-demand 20x the base: no elastic run pays, the day is the peak fleet held
    "on-demand-dearer": (lambda: _dearer("a-day-narrow-line", 20, ["pdd"]), "held"),
    # the other example: every GPU owned at $0, yet on-demand prefill was bought
    "all-owned-narrow": (lambda: _edit("a-day-narrow-line", ["pdd"], owned=ALL_OWNED), "free"),
    "all-owned-a-day": (lambda: _edit("a-day", ["idc_pd"], owned=ALL_OWNED), "free"),
    "part-owned": (_part_owned, None),
    "owned-day": (owned_day, None),
    "owned-near-on-demand": (_owned_near_on_demand, "elastic"),
}


@cache
def _planned(case: str, tmp: str) -> tuple[Plan, dict, str]:
    doc = CASES[case][0]()
    f = Path(tmp) / f"{case}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    # a-day-narrow-line verified, as a user runs it: its law needs no relay at the peak, and the
    # relay it buys for 10 h comes after the replay finds the line's delay 1.37 x the law's
    verify = case == "a-day-narrow-line"
    plan = optimize(build_context(load_scenario(str(f)), str(f)), verify=verify)
    out = Path(tmp) / f"{case}.plan.yaml"
    out.write_text(plan.to_text("yaml"))
    return plan, doc, str(out)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("days"))


def _owned_first(plan: Plan, doc: dict) -> None:
    owned = {(g["datacenter"], g["gpu"]): g["count"] for g in (doc.get("owned") or {})["gpus"]}
    for a, d in plan.day.architectures.items():
        for (dc, gpu), count in owned.items():
            mine = [g for g in d.groups if (g.datacenter, g.gpu) == (dc, gpu)]
            base = sum(g.base * g.gpus_per_instance for g in mine)
            for k, p in enumerate(d.periods):
                bought = sum((g.per_period[k] - g.base) * g.gpus_per_instance for g in mine)
                assert not (bought > 0 and base < count), (a, dc, gpu, p.start_hour, base, bought)


@pytest.mark.parametrize("case", list(CASES))
def test_a_day_plan_never_contradicts_itself(tmp, case):
    plan, doc, _ = _planned(case, tmp)
    kind = CASES[case][1]
    assert plan.day is not None and plan.day.architectures, case
    for a, d in plan.day.architectures.items():
        n = len(d.periods)
        assert d.peak_plan_cost_day is not None, a  # $0 included
        assert d.cost_day <= d.peak_plan_cost_day + 0.01, (a, d.cost_day, d.peak_plan_cost_day)
        # tolerance: $0.02: the four figures are each rounded to the cent in the plan
        # (day/summary.py), $0.005 each
        assert d.cost_day == pytest.approx(d.cost_base + d.cost_elastic + d.cost_line, abs=0.02)
        assert min(d.cost_base, d.cost_elastic, d.cost_line) >= 0, a
        for g in d.groups:
            assert len(g.per_period) == n and min(g.per_period) >= g.base, (a, g.role)
        elastic = sum(max(g.per_period) - g.base for g in d.groups)
        if kind in ("held", "free"):  # no elastic instance pays: the peak fleet, held
            assert elastic == 0 and d.cost_elastic == 0, (a, d.groups)
            # tolerance: $0.01: both day costs are rounded to the cent ($0.005 each)
            assert d.cost_day == pytest.approx(d.peak_plan_cost_day, abs=0.01), a
        if kind == "free":  # owned GPUs cost nothing: the day pays only the line
            # tolerance: $0.01: both day costs are rounded to the cent ($0.005 each)
            assert d.cost_base == 0 and d.cost_day == pytest.approx(d.cost_line, abs=0.01), a
    if kind == "elastic":  # the cases where elastic instances save: some are bought
        assert any(
            max(g.per_period) > g.base for d in plan.day.architectures.values() for g in d.groups
        ), case
    if doc.get("owned"):
        _owned_first(plan, doc)


def _minute(cron: str) -> int:
    m, h, *_ = cron.split()
    return int(h) * 60 + int(m)


@pytest.mark.parametrize("case", ["a-day-narrow-line", "a-day"])
def test_emitted_windows_open_and_close_and_run_the_plans_replicas(tmp, case):
    plan, _, plan_file = _planned(case, tmp)
    for a, d in plan.day.architectures.items():
        out = Path(tmp) / f"emit-{case}-{a}"
        r = invoke("emit", plan_file, "-t", "lws", "-o", out, "-a", a, "--check")
        assert r.exit_code == 0, r.output
        docs = [x for f in sorted(out.glob("*.yaml")) for x in yaml.safe_load_all(f.read_text())]
        scaled = [x for x in docs if x and x.get("kind") == "ScaledObject"]
        assert len(scaled) == sum(max(g.per_period) > g.base for g in d.groups), a
        for so in scaled:
            for t in so["spec"]["triggers"]:
                md = t["metadata"]
                assert _minute(md["start"]) != _minute(md["end"]), (a, md)
        sched = yaml.safe_load((out / "schedule.yaml").read_text())
        for g in sched["groups"]:
            want = next(
                x.per_period
                for x in d.groups
                if (x.role, x.gpu, x.datacenter) == (g["role"], g["gpu"], g["datacenter"])
                and x.gpus_per_instance == g["gpus_per_instance"]
            )
            assert [p["replicas"] for p in g["replicas"]] == want, (a, g["group"])


def test_a_fractional_start_up_opens_the_window_early_enough(tmp):
    from pdd_plan.emit.schedule import windows

    plan, _, _ = _planned("a-day", tmp)
    d = plan.day.architectures["idc_pd"]
    g = next(x for x in d.groups if max(x.per_period) > x.base)
    first = next(k for k, n in enumerate(g.per_period) if n > g.base)
    start = int(round(d.periods[first].start_hour * 60))
    for minutes, lead in ((0.0, 0), (0.4, 1), (10.0, 10), (10.5, 11)):
        day = plan.day.model_copy(update={"startup_minutes": minutes})
        assert windows(day, d, g)[0][0] == start - lead, minutes


def _periods(d: dict, seconds: float) -> dict:
    """The first period `seconds` long, the second taking the rest of both hours."""
    h = seconds / 3600
    d["workload"]["periods"][0]["hours"] = h
    d["workload"]["periods"][1].update(start_hour=h, hours=2 - h)
    return d


def _hand_edited(tmp: str, cut: int) -> str:
    _, _, plan_file = _planned("a-day-narrow-line", tmp)
    d = yaml.safe_load(Path(plan_file).read_text())
    g = d["day"]["architectures"]["pdd"]["groups"][0]
    g["per_period"] = g["per_period"][:cut]
    f = Path(tmp) / f"edited-{cut}.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False))
    return str(f)


def _scenario_file(tmp: str, name: str, doc: dict) -> str:
    f = Path(tmp) / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(f)


# (case, the command's arguments, what its one line names)
REFUSED = [
    # a robust single-rate fleet would replace the day's plan while `day` kept the schedule
    ("robust", lambda t: ("optimize", "a-day", "--robust", "0.9"), ("--robust", "day")),
    ("robust-narrow", lambda t: ("optimize", "a-day-narrow-line", "--robust", "0.5"), ("day",)),
    ("robust-in-scenario", lambda t: ("validate", _scenario_file(t, "rb", _edit("a-day", search={"robust": 0.9}))), ("search.robust", "day")),
    # a 30 s period: its cron window would start and end at one minute
    ("30-s-period", lambda t: ("validate", _scenario_file(t, "p30", _periods(_edit("a-day"), 30))), ("whole minutes",)),
    ("30-s-period-optimize", lambda t: ("optimize", _scenario_file(t, "p30o", _periods(_edit("a-day"), 30)), "--no-verify"), ("whole minutes",)),
    ("90-s-period", lambda t: ("validate", _scenario_file(t, "p90", _periods(_edit("a-day"), 90))), ("whole minutes",)),
    # a hand-edited day section: too few per_period entries, read by each command
    ("per-period-short-validate", lambda t: ("validate", _hand_edited(t, 20)), ("20 entries for 24 periods",)),
    ("per-period-short-report", lambda t: ("report", _hand_edited(t, 23)), ("23 entries for 24 periods",)),
    ("per-period-short-emit", lambda t: ("emit", _hand_edited(t, 1), "-t", "lws", "-o", Path(t) / "e-short"), ("1 entries for 24 periods",)),
]  # fmt: skip


@pytest.mark.parametrize(("case", "args", "needle"), REFUSED, ids=[c[0] for c in REFUSED])
def test_what_would_contradict_the_day_is_refused_in_one_line(tmp, case, args, needle):
    refused(*args(tmp), needle=needle)


def test_an_elastic_day_that_finds_nothing_falls_back_to_the_held_fleet(tmp, monkeypatch):
    """Where the elastic day over the busiest period's combination finds nothing (the issue's
    day fell to the search over every combination and cost 1.5 x its peak fleet held), the
    held day is the incumbent: the plan is never dearer than the peak plan held."""
    f = _scenario_file(tmp, "fallback", _edit("a-day-narrow-line", ["idc_pd"]))
    ctx = build_context(load_scenario(f), f)
    dp = DayProblem.of(problem_of(ctx), ctx.replay_setup, build_day(ctx.class_spec), ctx.scenario)
    caps = Caps(decode=dp.pb.search.decode_utilization)
    seed = search.peak_plan(dp, get("idc_pd"), dp.day, caps)
    solve = search._solve
    monkeypatch.setattr(
        search, "_solve", lambda d, *a: None if d.elastic is not None else solve(d, *a)
    )
    ds = search.plan_day(dp, get("idc_pd"), dp.day, caps, seed=seed)
    assert ds.points.elastic is None and all(not p.elastic for p in ds.solution.points)
    assert ds.cost_per_hour <= seed.cost_per_hour + 1e-9


@pytest.mark.parametrize(
    ("last_ms", "minutes", "want"),
    [
        (600_010, 5, [5, 5]),  # a request 10 ms past two periods: was a 0.01 s period at 100 req/s
        (540_010, 4, [4, 5]),  # 9 min in 4-min periods: the 1-min rest joins the one before
        (600_010, 4, [4, 4, 2]),  # a rest of half a period stays a period
        (595_000, 5, [5, 5]),  # 9 min 55 s: to the nearest minute
        (480_000, 5, [5, 3]),  # a rest of at least half a period stays a period
    ],
)
def test_periods_cut_from_a_trace_last_whole_minutes(tmp_path, last_ms, minutes, want):
    """A day cut from a trace: every period lasts whole minutes (the schedule's cron has no
    seconds; a seconds-long period would give a window that starts as it ends) and no
    trailing request becomes a period of its own; every request is kept."""
    import json

    from pdd_plan.workload.periods import build_day

    src = Path(__file__).resolve().parents[2] / "examples" / "traces"
    rows = [json.loads(x) for x in (src / "mooncake_conversation_trace.jsonl").open()][:400]
    for i, r in enumerate(rows):
        r["timestamp"] = int(i * (last_ms - 10_000) / 398) if i < 399 else last_ms
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    doc = {
        "name": "tail",
        "model": "llama-3.1-70b",
        "workload": {"trace": "t.jsonl", "periods_from_trace": {"period_minutes": minutes}},
        "datacenters": [{"name": "a", "gpus": {"h100": 64}}],
        "sla": {"ttft_p90_s": 5, "ttft_p99_s": 10, "tpot_ms": 60},
        "architectures": ["idc_pd"],
    }
    f = _scenario_file(str(tmp_path), "tail", doc)
    day = build_day(build_context(load_scenario(f), f).class_spec)
    got = [p.hours * 60 for p in day.periods]
    assert got == pytest.approx(want), got
    assert sum(p.rate_rps * p.hours * 3600 for p in day.periods) == pytest.approx(400)
    assert max(p.rate_rps for p in day.periods) < 2 * 400 / (sum(want) * 60)
