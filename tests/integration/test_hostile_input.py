"""Hostile and careless input (issue 11): every case ends in one `error:` line naming the
culprit (file, field or flag) with exit 2 -- never an internal error (exit 3), a traceback, a
hang, or a silently wrong answer. Each case here failed before the fix that it guards."""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema.io import MAX_YAML_MB_ENV, read_yaml
from tests.cli_helpers import refused, runner

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "benchmarks" / "scenarios" / "tiny.yaml"
CALIBRATION = ROOT / "pdd_plan" / "data" / "calibration" / "calibration_measurements.csv"
HF = ROOT / "tests" / "data" / "hf_configs" / "Meta-Llama-3.1-8B.json"
MOONCAKE = ROOT / "traces" / "mooncake_conversation_trace.jsonl"


def tiny() -> dict:
    return yaml.safe_load(TINY.read_text(encoding="utf-8"))


def scenario(tmp_path: Path, edit) -> str:
    d = tiny()
    edit(d)
    f = tmp_path / "scenario.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    return str(f)


# ---------------------------------------------------------------- scenario fields


def _set(path: str, value):
    def edit(d: dict) -> None:
        *head, last = path.split(".")
        for k in head:
            d = d[int(k)] if isinstance(d, list) else d[k]
        d[last] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        # booleans where numbers belong: pydantic's lax mode read them as 1
        (_set("workload.rate_rps", True), ("workload.rate_rps", "boolean")),
        (_set("workload.classes", True), ("workload.classes", "boolean")),
        (_set("datacenters.0.gpus.h100", True), ("datacenters[0].gpus", "boolean")),
        (_set("sla.tpot_ms", False), ("sla.tpot_ms", "boolean")),
        # token counts: 0 or a fraction were rounded silently by the sampler
        (_set("workload.input_tokens", {"fixed": 0}), ("workload.input_tokens", ">= 1")),
        (_set("workload.output_tokens", {"fixed": 0}), ("workload.output_tokens", ">= 1")),
        (_set("workload.input_tokens", {"fixed": 100.5}), ("input_tokens", "whole number")),
        (
            _set("workload.output_tokens", {"histogram": [[0, 10, 1.0]]}),
            ("workload.output_tokens", ">= 1"),
        ),
        # validate must refuse what optimize refuses
        (_set("objective", "goodput"), ("objective 'goodput' needs budget_per_hour",)),
        # prices and lines bounded: 1.7e308 overflows to inf in the solver's rows
        (_set("prices", {"h100": 1.7e308}), ("prices.h100", "less than or equal")),
        (
            _set("link.candidates", [{"gbps": 1e308, "cost_per_month": 1}]),
            ("link.candidates[0].gbps",),
        ),
        (_set("budget_per_hour", 1e300), ("budget_per_hour",)),
    ],
)
def test_scenario_fields_refused_by_validate(tmp_path, edit, needle):
    refused("validate", scenario(tmp_path, edit), needle=needle)


def test_objective_cost_without_rate_refused_by_validate(tmp_path):
    def edit(d):
        d["objective"] = "cost"
        del d["workload"]["rate_rps"]

    refused("validate", scenario(tmp_path, edit), needle="objective 'cost' needs")


def test_booleans_still_accepted_where_booleans_belong(tmp_path):
    f = scenario(tmp_path, _set("policy", {"drc": False}))
    r = runner().invoke(app, ["validate", f])
    assert r.exit_code == 0, r.output


def test_huge_prices_in_optimize_are_one_line_errors(tmp_path):
    f = scenario(tmp_path, _set("prices", {"h100": 1.7e308, "h200": 1.7e308}))
    refused("optimize", f, "--no-verify", needle="prices.h")


# ---------------------------------------------------------------- YAML files


def test_duplicate_key_is_refused_naming_key_and_lines(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text(TINY.read_text(encoding="utf-8") + "name: again\n", encoding="utf-8")
    last = len(f.read_text().splitlines())
    refused("validate", str(f), needle=("'name' given twice", f"line {last}", "first on line"))


def test_duplicate_key_in_flow_mapping(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("sla: {tpot_ms: 20, tpot_ms: 30}\n", encoding="utf-8")
    with pytest.raises(InputError, match="'tpot_ms' given twice"):
        read_yaml(f)


def test_merge_keys_are_not_duplicates(tmp_path):
    f = tmp_path / "merge.yaml"
    f.write_text("a: &x {p: 1, q: 2}\nb:\n  <<: *x\n  p: 3\n", encoding="utf-8")
    assert read_yaml(f)["b"] == {"p": 3, "q": 2}


def test_deeply_nested_yaml_is_a_one_line_error(tmp_path):
    f = tmp_path / "nest.yaml"
    f.write_text("[" * 100_000, encoding="utf-8")
    refused("validate", str(f), needle=str(f))


def test_billion_laughs_is_refused_before_expansion(tmp_path):
    # nine levels of nine aliases: 1 KB of text, 9^10 values once expanded
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    f = tmp_path / "laughs.yaml"
    f.write_text("\n".join(rows) + "\n", encoding="utf-8")
    refused("validate", str(f), needle=(str(f), "alias *a", "anchor &a"))


def test_aliases_that_stay_small_are_read(tmp_path):
    f = tmp_path / "small.yaml"
    f.write_text("a: &x [1, 2, 3]\nb: [*x, *x]\n", encoding="utf-8")
    assert read_yaml(f) == {"a": [1, 2, 3], "b": [[1, 2, 3], [1, 2, 3]]}


def test_device_file_is_not_a_regular_file():
    refused("validate", "/dev/zero", needle=("/dev/zero", "not a regular file"))


def test_yaml_size_cap_and_how_to_raise_it(tmp_path, monkeypatch):
    f = tmp_path / "big.yaml"
    f.write_text("x: " + "a" * 2_000_000 + "\n", encoding="utf-8")
    monkeypatch.setenv(MAX_YAML_MB_ENV, "1")
    with pytest.raises(InputError, match=MAX_YAML_MB_ENV) as e:
        read_yaml(f)
    assert "2.0 MB" in str(e.value)
    monkeypatch.setenv(MAX_YAML_MB_ENV, "3")
    assert len(read_yaml(f)["x"]) == 2_000_000
    monkeypatch.setenv(MAX_YAML_MB_ENV, "lots")
    with pytest.raises(InputError, match=MAX_YAML_MB_ENV):
        read_yaml(f)


def test_c_loader_used_when_libyaml_present():
    from pdd_plan.inputs.schema import io as sio

    if yaml.__with_libyaml__:
        assert issubclass(sio.UniqueKeyLoader, yaml.CSafeLoader)
    assert issubclass(sio.UniqueKeyLoader, (yaml.SafeLoader, yaml.CSafeLoader))


def test_long_profile_names_are_one_line_errors(tmp_path):
    refused("validate", scenario(tmp_path, _set("model", "x" * 300)), needle="field 'model'")
    long_path = "y" * 300 + ".yaml"
    refused("validate", scenario(tmp_path, _set("model", long_path)), needle="field 'model'")
    refused("perf", "-m", "x" * 300, "-g", "h100", "--phase", "prefill", "-L", "100",
            needle="--model")  # fmt: skip


# ---------------------------------------------------------------- calibration CSV


def _calibration_rows() -> list[list[str]]:
    return list(csv.reader(io.StringIO(CALIBRATION.read_text(encoding="utf-8"))))


def _csv(tmp_path: Path, rows: list[list[str]]) -> str:
    s = io.StringIO()
    csv.writer(s).writerows(rows)
    f = tmp_path / "m.csv"
    f.write_text(s.getvalue(), encoding="utf-8")
    return str(f)


@pytest.mark.parametrize(
    ("column", "value", "needle"),
    [
        ("value", "abc", "row 1 value"),
        ("value", "nan", "row 1 value"),
        ("value", "-5", "row 1 value"),
        ("n_gpus", "x", "row 1 n_gpus"),
        ("n_gpus", "1.5", "row 1 n_gpus"),
    ],
)
def test_calibration_bad_cells(tmp_path, column, value, needle):
    rows = _calibration_rows()[:3]
    rows[1][rows[0].index(column)] = value
    refused("calibrate", _csv(tmp_path, rows), needle=needle)


def test_calibration_short_row_header_only_and_binary(tmp_path):
    rows = _calibration_rows()[:3]
    rows[2] = rows[2][:4]
    refused("calibrate", _csv(tmp_path, rows), needle=("row 2", "4 cells"))
    refused("calibrate", _csv(tmp_path, rows[:1]), needle="no measurement rows")
    f = tmp_path / "bin.csv"
    f.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8)))
    refused("calibrate", str(f), needle="not a UTF-8 CSV")


# ---------------------------------------------------------------- traces, HF configs, flags


def test_truncated_gz_trace(tmp_path):
    gz = gzip.compress(MOONCAKE.read_bytes())
    f = tmp_path / "t.jsonl.gz"
    f.write_bytes(gz[: len(gz) // 2])
    refused("trace", "stats", str(f), needle=(str(f), "cannot read trace"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_attention_heads", 0),
        ("num_key_value_heads", 0),
        ("hidden_size", True),
        ("num_hidden_layers", 2.5),
        ("intermediate_size", "big"),
    ],
)
def test_import_hf_bad_counts_name_the_key(tmp_path, key, value):
    cfg = json.loads(HF.read_text(encoding="utf-8"))
    cfg[key] = value
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg), encoding="utf-8")
    refused("profiles", "import-hf", str(f), "--name", "t", needle=f"field '{key}'")


PERF = ("perf", "-m", "llama-3.1-8b", "-g", "h100")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--phase", "offline", "-L", "1000", "-O", "-50000"), ("--output-tokens", ">= 1")),
        (("--phase", "prefill", "-L", "1000", "--dp", "2"), ("--dp", "--dp-attention")),
        (("--phase", "prefill", "-L", "100", "--tp", "3"), ("'--tp'",)),
        (("--phase", "extend", "-L", "100", "--extend-tokens", "500"), ("--extend-tokens",)),
        (("--phase", "prefill", "-L", "100", "--gpus", "-8"), ("--gpus", ">= 1")),
    ],
)
def test_perf_flags_name_the_culprit(args, needle):
    refused(*PERF, *args, needle=needle)


def test_negative_seed(tmp_path):
    plan = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"
    refused("simulate", str(plan), "--seed", "-1", "--requests", "100", needle="--seed")


def test_validate_and_optimize_agree_on_goodput_budget(tmp_path):
    f = scenario(tmp_path, _set("objective", "goodput"))
    refused("optimize", f, "--no-verify", needle="budget_per_hour")


def test_scenario_without_bool_fields_unchanged():
    d = copy.deepcopy(tiny())
    r = runner().invoke(app, ["validate", str(TINY)])
    assert r.exit_code == 0 and d == tiny(), r.output


# ---------------------------------------------------------------- large traces, same answers


def _mooncake_lines(rng: np.random.Generator, n: int) -> list[dict]:
    recs, t = [], 0
    for _ in range(n):
        t += int(rng.integers(0, 50))
        k = int(rng.integers(0, 6))
        ids = [int(x) for x in rng.integers(0, 40, k)]  # repeats within a row and across rows
        recs.append({"timestamp": t, "input_length": int(rng.integers(1, 4000)),
                     "output_length": int(rng.integers(0, 300)), "hash_ids": ids})  # fmt: skip
    return recs


def test_fast_mooncake_reading_equals_the_simulator(tmp_path):
    """The chunked numpy reader and vectorized infinite caches give the LRU simulator's
    hits exactly, across chunk boundaries, for canonical and non-canonical layouts."""
    from pdd_plan.workload.cache import simulate_hits
    from pdd_plan.workload.traces import read_trace

    recs = _mooncake_lines(np.random.default_rng(1), 3000)
    want_p, want_d = simulate_hits([r["hash_ids"] for r in recs], [r["input_length"] for r in recs])
    canonical = tmp_path / "a.jsonl"
    canonical.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    spaced = tmp_path / "b.jsonl"  # another spacing: the json.loads path
    spaced.write_text("".join(json.dumps(r, indent=None, separators=(",", ":")) + "\n"
                              for r in recs), encoding="utf-8")  # fmt: skip
    for f in (canonical, spaced):
        reqs, info = read_trace(f, chunk_rows=700)
        np.testing.assert_array_equal(reqs.hit_p, want_p)
        np.testing.assert_array_equal(reqs.hit_d, want_d)
        assert info.rows == 3000 and info.has_hashes
        assert info.prefill_blocks_held == len({x for r in recs for x in r["hash_ids"]})


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ('{"timestamp": 1, "input_length": true, "output_length": 1, "hash_ids": []}',
         "input_length"),
        ('{"timestamp": 1, "input_length": 0, "output_length": 1, "hash_ids": [1]}',
         "input_length"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1.5]}',
         "hash_ids"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1}', "hash_ids"),
    ],
)  # fmt: skip
def test_fast_mooncake_reading_still_names_the_bad_line(tmp_path, bad, needle):
    from pdd_plan.workload.traces import read_trace

    recs = _mooncake_lines(np.random.default_rng(2), 50)
    lines = [json.dumps(r) for r in recs]
    lines[30] = bad
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=needle) as e:
        read_trace(f)
    assert f"{f}:31" in str(e.value)
    reqs, info = read_trace(f, skip_bad_rows=True)
    assert info.rows == 49 and info.bad_lines == (31,)


def test_perf_gpus_alone_is_named_not_the_tp_it_defaulted():
    """--tp defaults to --gpus: an impossible --gpus must be blamed on --gpus, and a count past
    the GPUS limit refused before any instance is built."""

    from pdd_plan.cli.main import app

    base = ["perf", "-m", "llama-3.1-8b", "-g", "h100", "--phase", "decode", "-L", "1000"]
    r = CliRunner().invoke(app, [*base, "--gpus", "100000"])
    assert r.exit_code == 2 and "'--gpus'" in r.output and "'--tp'" not in r.output, r.output
    r = CliRunner().invoke(app, [*base, "--gpus", "100000000"])
    assert r.exit_code == 2 and "PDD_PLAN_MAX_GPUS" in r.output, r.output
    r = CliRunner().invoke(app, [*base, "--gpus", "2", "--tp", "3"])
    assert r.exit_code == 2 and "'--tp'" in r.output, r.output
