"""Hostile input, round four: one table per family of cases, each with its example and its
neighbours (other fields of the same kind, other readers of the same format, other commands
reading the same section). Every refusal is one `error:` line naming the file or flag and the
field, exit 2, before any planning; what is honoured is checked against hand arithmetic.
(Family 2, `validate` against `optimize`, is tests/integration/test_validate_agrees.py; the
mutations of the day, `uncertainty:` and `owned:` sections are in test_mutation.py.)"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import invoke, refused
from tests.mutations import example, owned_scenario

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
IPERF = DATA / "iperf3" / "loopback-p1.json"
ENGINE = DATA / "engine_results"
HF = DATA / "hf_configs" / "Qwen3-32B.json"
BIG_INT = 10**400


def _put(d, path: str, value):
    *head, last = path.split(".")
    cur = d
    for k in head:
        cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
    if isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value
    return d


def _scenario(tmp_path: Path, name: str, edits: dict, file: str = "s.yaml") -> str:
    d = example(name) if name != "owned" else owned_scenario()
    for k, v in edits.items():
        _put(d, k, v)
    p = tmp_path / file
    p.write_text(yaml.safe_dump(d, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return str(p)


# ---------------------------------------------------------------- 3: numbers read from JSON


def _json_file(tmp_path: Path, src: Path, path: str, value, lines: bool = False) -> str:
    text = src.read_text()
    doc = json.loads(text.splitlines()[0] if lines else text)
    _put(doc, path, value)
    out = tmp_path / (src.stem + ("_x.jsonl" if lines else "_x.json"))
    out.write_text(json.dumps(doc) + ("\n" if lines else ""))
    return str(out)


NUMBER_CASES = [
    # (reader's command, source file, field, jsonl?)
    ("line", IPERF, "end.streams.0.sender.bytes", False),  # the neighbour: iperf3
    ("line", IPERF, "end.sum_received.bits_per_second", False),
    ("calibrate", ENGINE / "vllm_bench_serve_metadata.json", "completed", False),
    ("calibrate", ENGINE / "vllm_bench_serve_metadata.json", "output_throughput", False),
    ("calibrate", ENGINE / "sglang_bench_serving.jsonl", "output_throughput", True),
    ("calibrate", ENGINE / "trtllm_bench_report.json", "world_info.tp_size", False),
    ("calibrate", ENGINE / "trtllm_bench_report.json", "request_info.avg_input_length", False),
    ("import-hf", HF, "hidden_size", False),
]


@pytest.mark.parametrize("value", [BIG_INT, -BIG_INT, 10**21, "1e400"])
@pytest.mark.parametrize(("cmd", "src", "field", "lines"), NUMBER_CASES)
def test_a_number_past_the_bound_is_one_line(tmp_path, cmd, src, field, lines, value):
    f = _json_file(tmp_path, src, field, 0.123456789, lines)
    # the literal itself, as a file holds it (json.dumps cannot write 1e400)
    Path(f).write_text(Path(f).read_text().replace("0.123456789", str(value), 1))
    args = {
        "line": ("line", "calibrate", "--iperf3", f, "--cost-per-month", "100"),
        "calibrate": ("calibrate", "--from", f, "-m", "llama-3.1-8b", "-g", "h100", "--gpus", "1"),
        "import-hf": ("profiles", "import-hf", f, "--name", "x"),
    }[cmd]
    shown = field.replace(".0.", "[0].")
    msg = refused(*args, needle=(Path(f).name, shown, "digits"))
    assert "internal" not in msg


def _trace_rows(n: int, bad: dict | None = None) -> list[str]:
    rows = []
    for i in range(n):
        r = {"timestamp": i * 100, "input_length": 1000, "output_length": 100, "hash_ids": [i]}
        if bad and i == 3:
            r.update(bad)
        rows.append(json.dumps(r))
    return rows


@pytest.mark.parametrize(
    ("field", "needle"),
    [
        ("input_length", "input_length"),
        ("output_length", "output_length"),
        ("timestamp", "timestamp"),
        ("hash_ids", "hash_ids[0]"),
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_trace_numbers_past_the_bound_name_the_row(tmp_path, field, needle, gz):
    rows = _trace_rows(50)
    r = json.loads(rows[3])
    r[field] = [0] if field == "hash_ids" else 0
    rows[3] = json.dumps(r).replace(": 0", f": {BIG_INT}").replace("[0]", f"[{BIG_INT}]")
    text = "\n".join(rows) + "\n"
    f = tmp_path / ("t.jsonl.gz" if gz else "t.jsonl")
    if gz:
        with gzip.open(f, "wt") as g:
            g.write(text)
    else:
        f.write_text(text)
    refused("trace", "stats", f, needle=(f"{f.name}:4", needle, "digits"))


def test_csv_trace_cell_past_the_bound(tmp_path):
    rows = [f"2023-11-16 18:15:46.{i:06d},{100},{10}" for i in range(20)]
    rows[5] = rows[5].replace(",100,", f",{BIG_INT},")
    f = tmp_path / "azure.csv"
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    refused("trace", "stats", f, needle=("azure.csv:7", "ContextTokens", "digits"))


# ---------------------------------------------------------------- 4: spreads with bounds

FACTORS = ["prefill_speed", "decode_speed", "kv_bytes", "line_rate", "gpu_price", "line_price",
           "rate"]  # fmt: skip
WIDE = [
    {"dist": "lognormal", "median": 1.0, "sigma": 800.0},  # the example
    {"dist": "lognormal", "median": 1.0, "sigma": 2.0},  # 0.1%: 0.002
    {"dist": "normal", "mean": 1.0, "sd": 0.5},  # 0.1%: -0.55, floored before
    {"dist": "uniform", "low": 0.0, "high": 2.0},
    {"dist": "triangular", "low": 0.0, "mode": 0.05, "high": 1.5},  # 0.1%: 0.0087
]


@pytest.mark.parametrize("spread", WIDE)
@pytest.mark.parametrize("name", FACTORS)
def test_a_factor_spread_past_the_bound_is_refused(tmp_path, name, spread):
    s = {**spread, "source": "assumption"}
    f = _scenario(tmp_path, "pdd-paper-uncertain", {f"uncertainty.inputs.{name}": s})
    refused("validate", f, needle=(f"uncertainty.inputs.{name}", "0.1% and 99.9%"))


@pytest.mark.parametrize(
    ("name", "spread"),
    [
        ("prefix_hit", {"dist": "normal", "mean": 0.0, "sd": 0.5}),  # a shift past +-1
        ("request_state_bytes", {"dist": "lognormal", "median": 1e6, "sigma": 800.0}),
    ],
)
def test_shift_and_byte_spreads_are_bounded_too(tmp_path, name, spread):
    s = {**spread, "source": "assumption"}
    f = _scenario(tmp_path, "pdd-paper-uncertain", {f"uncertainty.inputs.{name}": s})
    refused("validate", f, needle=(f"uncertainty.inputs.{name}", "0.1% and 99.9%"))


@pytest.mark.parametrize(
    "spread",
    [
        {"dist": "lognormal", "median": 1.0, "sigma": 1.4},  # 0.1%: 0.013, 99.9%: 76
        {"dist": "normal", "mean": 1.0, "sd": 0.3},  # 0.1%: 0.073
        {"dist": "uniform", "low": 0.5, "high": 2.0},
    ],
)
def test_spreads_inside_the_bound_pass(tmp_path, spread):
    s = {**spread, "source": "assumption"}
    f = _scenario(tmp_path, "pdd-paper-uncertain", {"uncertainty.inputs.rate": s})
    assert invoke("validate", f).exit_code == 0


@pytest.mark.integration
def test_a_floored_draw_is_said():
    from pdd_plan.inputs import profiles
    from pdd_plan.inputs.schema.uncertainty import Uncertainty
    from pdd_plan.uncertainty import draws

    os.environ["PDD_PLAN_MAX_FACTOR_SPREAD"] = "1000"  # U(0, 1)'s 0.1% quantile is 0.001
    try:
        u = Uncertainty.model_validate(
            {"inputs": {"rate": {"dist": "uniform", "low": 0.0, "high": 1.0, "source": "x"}}}
        )
    finally:
        del os.environ["PDD_PLAN_MAX_FACTOR_SPREAD"]
    ms, _ = draws.marginals(u, profiles.model("llama-3.1-8b"))
    d = draws.draw([m for m in ms if m.name == "rate"], 1000, 0)
    n = int((d.values[:, 0] <= draws.FLOOR).sum())
    assert n >= 1  # strata below 0.01 of 1,000: the first ten
    notes = draws.floored(d)
    assert notes == [
        f"rate: {n} of 1000 draws fell at or below 0.01 x nominal and were raised to it "
        "(the uniform's lower tail)"
    ]


# ---------------------------------------------------------------- 5 and 1: draw flags


@pytest.mark.parametrize(
    ("scenario", "flags", "needle"),
    [
        ("pdd-paper", ("--draws", "0", "--robust", "0.9"), ("--draws", "--robust")),
        ("pdd-paper", ("--draws", "0", "--verify-draws", "2"), ("--draws", "--verify-draws")),
        ("pdd-paper", ("--draws", "0", "--replan"), ("--draws", "--replan")),
        ("pdd-paper", ("--draws", "1000", "--verify-draws", "1000"), ("--verify-draws", "PDD_PLAN_MAX_CONFIRM")),
        ("pdd-paper", ("--draws", "8", "--verify-draws", "10"), ("--verify-draws", "at most 8")),
        ("pdd-paper", ("--verify-draws", "-1"), ("--verify-draws", ">= 0")),
        ("pdd-paper", ("--robust", "1.5"), ("--robust", "(0, 1)")),
        ("a-day", ("--robust", "0.9"), ("--robust", "day")),
        ("a-day", ("--verify-draws", "2"), ("--verify-draws", "day")),
        ("a-day", ("--replan",), ("--replan", "day")),
        ("a-day-narrow-line", ("--robust", "0.5"), ("--robust", "day")),
    ],
)  # fmt: skip
def test_flags_that_would_silently_lose_are_refused_before_planning(scenario, flags, needle):
    refused("optimize", scenario, "--no-verify", *flags, needle=needle)


def test_search_robust_on_a_day_is_refused_by_validate(tmp_path):
    f = _scenario(tmp_path, "a-day", {"search.robust": 0.9})
    refused("validate", f, needle=("search.robust", "day"))


# ---------------------------------------------------------------- 6: two lines with one name

LINE_CASES = [
    ([{"name": "shared-10g", "gbps": 100, "cost_per_month": 9000}], "'shared-10g'"),  # the issue's
    ([{"name": "shared-40g", "gbps": 100, "cost_per_month": 9000, "base": "eth-100g"}],
     "'shared-40g'"),  # on a base profile, beside the bundled one of its name
    (["shared-25g"], "like candidates[1]"),  # a bundled name listed twice
    ([{"name": "x", "gbps": 10, "cost_per_month": 900}, {"name": "x", "gbps": 20,
                                                          "cost_per_month": 1800}], "like"),
    ([{"name": "custom-5-20g", "gbps": 20, "cost_per_month": 1800},
      {"gbps": 20, "cost_per_month": 1800}], "like"),  # a named one, and one named by default
]  # fmt: skip


@pytest.mark.parametrize(("extra", "needle"), LINE_CASES)
@pytest.mark.parametrize("command", ["validate", "optimize", "evaluate"])
def test_two_lines_with_one_name_are_refused(tmp_path, extra, needle, command):
    d = example("pdd-paper" if command != "evaluate" else "pdd-paper-fleet")
    d["link"]["candidates"] = [*d["link"]["candidates"], *extra]
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False))
    refused(command, f, needle=("link.candidates", needle))


# ---------------------------------------------------------------- 8: sizes without limits


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "csv"])
@pytest.mark.parametrize("command", ["stats", "simulate"])
def test_a_trace_past_the_requests_limit_is_refused_as_read(tmp_path, monkeypatch, kind, command):
    monkeypatch.setenv("PDD_PLAN_MAX_REQUESTS", "30000")  # above the default samples
    n = 70_000  # past one 65,536-row chunk: the count is checked as the rows come
    if kind == "csv":
        text = "arrival_s,input_tokens,output_tokens\n" + "".join(
            f"{i * 0.01:.2f},100,10\n" for i in range(n)
        )
    else:
        text = "".join(
            f'{{"timestamp": {i}, "input_length": 100, "output_length": 10}}\n' for i in range(n)
        )
    f = tmp_path / f"t.{kind}"
    if kind.endswith(".gz"):
        with gzip.open(f, "wt") as g:
            g.write(text)
    else:
        f.write_text(text)
    args = ("trace", "stats", f)
    if command == "simulate":
        args = ("simulate", "--trace", f)
    refused(*args, needle=(f.name, "over the limit of 30,000", "PDD_PLAN_MAX_REQUESTS"))


# ---------------------------------------------------------------- 9: messages


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("optimize", "--draws", "abc"), ("--draws", "optimize --help")),
        (("optimize", "--robust", "high"), ("--robust",)),
        (("simulate", "-n", "x"), ("--requests", "simulate --help")),
        (("evaluate", "pdd-paper-fleet", "--step", "fast"), ("--step",)),
        (("perf", "-m", "llama-3.1-8b", "-g", "h100", "--batch", "many"), ("--batch",)),
        (("optimize", "--drawz", "3"), ("--drawz",)),
        (("validate",), ("Missing",)),
        (("nosuch",), ("nosuch",)),
    ],
)
def test_parse_errors_are_one_line(args, needle):
    refused(*args, needle=("error: ", *needle))


@pytest.fixture
def pipe_link(tmp_path):
    """A link to a FIFO: what /dev/stdout is when the output goes into a pipe."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    return str(link)


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("plan") / "plan.yaml"
    r = invoke("optimize", "--no-verify", "--draws", "0", "-o", f, "-f", "json")
    assert r.exit_code == 0, r.stderr
    return str(f)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("optimize", "--no-verify", "--draws", "0", "--out"), "--out"),
        (("report", "PLAN", "--html"), "--html"),
        (("simulate", "PLAN", "--records"), "--records"),
        (("line", "calibrate", "--iperf3", str(IPERF), "--cost-per-month", "9", "--out"), "--out"),
        (("profiles", "import-hf", str(HF), "--name", "x", "--out"), "--out"),
    ],
)
def test_output_into_a_pipe_is_refused_before_work(pipe_link, plan_file, args, flag):
    args = tuple(plan_file if a == "PLAN" else a for a in args)
    refused(*args, pipe_link, needle=(flag, "FIFO"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_tokens", {"fixed": 0}),
        ("output_tokens", {"fixed": 0}),
        ("input_tokens", {"lognormal": {"mu": 1, "sigma": 1, "min": 0, "max": 10}}),
        ("input_tokens", {"fixed": 1e9}),
        ("prefix_hit", {"fixed": 2}),
    ],
)
def test_a_periods_field_is_blamed_on_the_period(tmp_path, field, value):
    f = _scenario(tmp_path, "a-day", {f"workload.periods.7.{field}": value})
    refused("validate", f, needle=f"workload.periods[7].{field}")


def test_validate_of_a_plan_says_it_is_a_plan(plan_file, tmp_path):
    r = invoke("validate", plan_file)
    assert r.exit_code == 0 and "valid plan, not a scenario" in r.stdout
    d = yaml.safe_load(Path(plan_file).read_text())
    d["plans"]["pdd"]["instances"][0]["count"] = -3
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(d))
    refused("validate", bad, needle=("plans.pdd.instances[0].count",))


# ---------------------------------------------------------------- 10: the rest

RLO, ZWSP = "\u202e", "\u200b"


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("name", f"evil{RLO}gnp.exe"),
        ("datacenters.0.name", f"dc{ZWSP}a"),
        ("link.candidates.0", {"name": f"l{RLO}x", "gbps": 10, "cost_per_month": 900}),
    ],
)
def test_names_with_format_characters_are_refused(tmp_path, where, value):
    f = _scenario(tmp_path, "pdd-paper", {where: value})
    line = refused("validate", f, needle=("control character",))
    assert RLO not in line and ZWSP not in line  # echoed escaped, never raw


@pytest.mark.parametrize(
    ("a", "b"), [("dc-a", "DC_A"), ("dc-a", "dc.a"), ("dc-a", "Dc A"), ("x", "X")]
)
def test_datacenters_one_name_once_normalised_are_refused(tmp_path, a, b):
    d = example("pdd-paper")
    d["datacenters"][0]["name"], d["datacenters"][1]["name"] = a, b
    d["placement"] = {"prefill": a, "main_decode": b}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(d))
    refused("validate", f, needle=("once normalised",))
    refused("optimize", f, "--no-verify", needle=("once normalised",))


def test_emit_removes_what_an_earlier_emit_wrote(plan_file, tmp_path):
    out = tmp_path / "deploy"
    mine = out / "notes.txt"
    assert invoke("emit", plan_file, "--target", "lws", "--out", out).exit_code == 0
    first = {p.name for p in out.iterdir()}
    mine.write_text("the user's own file")
    r = invoke("emit", plan_file, "--target", "sglang", "--out", out)
    assert r.exit_code == 0, r.stderr
    gone = sorted(n for n in first if n.startswith("lws-"))
    assert gone and f"removed {len(gone)} files an earlier emit wrote there" in r.stdout
    assert not any((out / n).exists() for n in gone)
    assert mine.read_text() == "the user's own file"  # never what emit did not write


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--image", "img\nrm -rf /"),
        ("--image", "a b"),
        ("--image", "img;reboot"),
        ("--image", ""),
        ("--model-path", "/models/x\n--evil"),
        ("--ib-device", "mlx5_0 --x"),
    ],
)
def test_emit_options_that_would_break_a_script(plan_file, tmp_path, flag, value):
    out = tmp_path / "deploy"
    refused("emit", plan_file, "--target", "sglang", "--out", out, flag, value, needle=flag)
    assert not out.exists()


@pytest.mark.parametrize("n", ["1", "50", "99"])
def test_simulate_too_few_requests(n):
    refused("simulate", "-n", n, needle=("--requests", "at least 100"))


@pytest.mark.parametrize(
    "rows",
    [
        [0],  # one request: no arrival rate; was "1.5% utilized" beside "offered 0 Gb/s"
        [0, 0],  # two arriving at once
        [0, 0, 0],
    ],
)
def test_simulate_of_a_few_rows_says_one_load(tmp_path, rows):
    """A replay too short to measure an arrival rate states its line's offered load over the
    window the line was in use, as its utilization (test_offered_load_window has the
    arithmetic): never a used line beside 0 Gb/s offered."""
    src = ROOT / "examples" / "traces" / "mooncake_conversation_trace.jsonl"
    first = json.loads(src.read_text().splitlines()[0])
    f = tmp_path / "few.jsonl"
    f.write_text("".join(json.dumps({**first, "timestamp": t}) + "\n" for t in rows))
    r = invoke("simulate", "--trace", f, "-f", "json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    st, cp = s["stability"], s["connection_pool"]
    assert s["line_utilization"] > 0 and st["offered_gbps"] > 0, st
    if len(rows) == 1:  # one transfer: the pool's offered load and occupancy are one window's
        # tolerance: rel 1e-5: one window, so the same ratio; each is printed to 6 significant
        # digits (sim/result.py sig: up to 5e-6 each)
        assert cp["utilization"] == pytest.approx(cp["occupancy"], rel=1e-5)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("transfers", "ready_span", "span", "want"),
    [
        (1, 0.0, 2.0, 0.5e9),  # one transfer: over its span, as utilization (0.5 of 1 GB/s)
        (3, 0.0, 4.0, 0.25e9),  # ready at once: no rate either
        (100, 10.0, 12.0, 0.1e9),  # a rate: over the KV-ready window
    ],
)
def test_offered_load_window(transfers, ready_span, span, want):
    from types import SimpleNamespace

    from pdd_plan.sim.queues import LineStats
    from pdd_plan.sim.result import SimResult

    ls = LineStats(span_s=span, bytes_sent=1e9, transfers=transfers, ready_span_s=ready_span)
    ns = SimpleNamespace(line=ls, line_capacity_bytes_s=1e9, line_usable_bytes_s=1e9)
    ns.offered_window_s = lambda: SimResult.offered_window_s(ns)
    offered, usable = SimResult.line_load(ns)
    assert offered == pytest.approx(want) and usable == 1e9


def test_rtt_below_the_measured_minimum(tmp_path):
    refused(
        "line", "calibrate", "--iperf3", IPERF, "--cost-per-month", "100", "--rtt-ms", "0",
        needle=("--rtt-ms", "below the measured minimum"),
    )  # fmt: skip
    prof = tmp_path / "line.yaml"
    r = invoke("line", "calibrate", "--iperf3", IPERF, "--cost-per-month", "100", "-o", prof)
    assert r.exit_code == 0, r.stderr
    d = yaml.safe_load(prof.read_text())
    d["rtt_ms"] = d["rtt_min_ms"] / 2  # the hand-edited profile: the same rule
    prof.write_text(yaml.safe_dump(d))
    refused("validate", prof, needle=("below the path's measured minimum",))


@pytest.mark.integration
def test_a_killed_writes_temporary_is_removed_by_the_next_write(tmp_path):
    from pdd_plan.common.atomic import write_atomic

    target = tmp_path / "records.csv"
    dead = tmp_path / ".records.csv.999999999.abc123"  # no such PID
    live = tmp_path / f".records.csv.{os.getppid()}.def456"  # a live process: kept
    other = tmp_path / ".other.csv.999999999.abc123"  # another file's: not this write's
    for p in (dead, live, other):
        p.write_text("partial")
    write_atomic(target, "a,b\n")
    assert target.read_text() == "a,b\n"
    assert not dead.exists() and live.exists() and other.exists()


# ---------------------------------------------------------------- 1 and 7: a day, other commands


@pytest.mark.parametrize(
    "edits",
    [
        {"workload.periods.0.hours": 1 - 1 / 120, "workload.periods.1.start_hour": 1 - 1 / 120,
         "workload.periods.1.hours": 1 + 1 / 120},  # a 30 s boundary
        {"workload.periods.0.hours": 0.5 / 60, "workload.periods.1.start_hour": 0.5 / 60,
         "workload.periods.1.hours": 2 - 0.5 / 60},  # a 30 s period
    ],
)  # fmt: skip
def test_periods_off_the_minute_are_refused(tmp_path, edits):
    f = _scenario(tmp_path, "a-day", edits)
    refused("validate", f, needle=("whole minutes", "cron"))


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda g, d: g.update(per_period=g["per_period"][:20]), "20 entries for 24 periods"),
        (lambda g, d: g.update(per_period=[*g["per_period"], 4]), "25 entries for 24 periods"),
        (lambda g, d: g.update(base=g["base"] + 50), "below its base"),
        (lambda g, d: d["periods"].reverse(), "not in the order"),
        (lambda g, d: d["periods"][0].update(hours=2.0), "the periods last 25 h"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "report", "emit"])
def test_a_hand_edited_day_that_contradicts_itself(tmp_path, day_plan, edit, needle, command):
    d = yaml.safe_load(Path(day_plan).read_text())
    arch = d["day"]["architectures"]["pdd"]
    edit(arch["groups"][0], arch)
    f = tmp_path / "day.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False))
    extra = ("--target", "lws", "--out", tmp_path / "o") if command == "emit" else ()
    refused(command, f, *extra, needle=("day", "architectures.pdd", needle))


@pytest.fixture(scope="module")
def day_plan(tmp_path_factory):
    f = tmp_path_factory.mktemp("day") / "day.yaml"
    r = invoke("optimize", "a-day", "--no-verify", "-o", f, "-f", "json")
    assert r.exit_code == 0, r.stderr
    return str(f)


def test_evaluate_costs_owned_gpus_as_optimize_does(tmp_path):
    d = owned_scenario()  # 48 H100 at $1/GPU-h, 32 H200 sunk, one eth-10g sunk
    f = tmp_path / "own.yaml"
    f.write_text(yaml.safe_dump(d))
    plan = tmp_path / "plan.yaml"
    r = invoke("optimize", f, "--no-verify", "--draws", "0", "-o", plan, "-f", "json")
    assert r.exit_code == 0, r.stderr
    planned = json.loads(r.stdout)["plans"]
    r = invoke("evaluate", plan, "--no-simulate", "-f", "json")
    assert r.exit_code == 0, r.stderr
    for a, got in json.loads(r.stdout)["architectures"].items():
        # tolerance: $0.02: both sides round each group's cost to the cent (two roundings)
        assert got["cost_per_hour"] == pytest.approx(planned[a]["cost_per_hour"], abs=0.02), a
        assert got["cost_owned_per_hour"] == pytest.approx(
            planned[a]["cost_owned_per_hour"], abs=0.02
        ), a


@pytest.mark.integration
def test_owned_cost_hand_arithmetic():
    from pdd_plan.evaluate.fleet import FleetSpec
    from pdd_plan.evaluate.run import owned_cost
    from pdd_plan.optimize.owned import OwnedGPU, OwnedPrices
    from pdd_plan.outputs.plan import InstanceGroup, LineChoice

    g = InstanceGroup(role="prefill", gpu="h100", datacenter="dc-a", count=3,
                      gpus_per_instance=16, tp=16, dp=1, ep=1, cost_per_hour=120.0)  # fmt: skip
    line = LineChoice(sku="eth-10g", gbps=10, count=2, cost_per_hour=7.5, utilization=0.5,
                      rtt_ms=10)  # fmt: skip
    fs = FleetSpec("pdd", [g], line, [], "plan")
    prices = OwnedPrices({("dc-a", "h100"): OwnedGPU(40, 1.0, 2.5, 512)}, {"eth-10g": (1, 0.0)},
                         True)  # fmt: skip
    total, mine = owned_cost(prices, fs)
    # 40 of 48 GPUs owned at $1 (40), 8 bought at $2.5 (20); one line owned at 0, one at 3.75
    assert mine == pytest.approx(40.0)
    assert total == pytest.approx(40.0 + 20.0 + 3.75)
    assert owned_cost(OwnedPrices({}, {}), fs) == (fs.cost_per_hour, None)


def test_other_commands_say_what_they_do_with_a_day(day_plan):
    refused("regimes", "a-day", needle=("workload.periods", "one rate per cell"))
    refused("regimes", "a-day-narrow-line", needle=("workload.periods",))
    r = invoke("evaluate", day_plan, "--no-simulate", "-f", "json")
    assert r.exit_code == 0, r.stderr
    assert "busiest-period fleet" in json.loads(r.stdout)["note"]
