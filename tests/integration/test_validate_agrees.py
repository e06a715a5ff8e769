"""Property: `validate` and `optimize` agree. Every scenario `validate` accepts plans (exit 0)
or is infeasible (exit 1, one line with the reason), never an input error `validate` should
have given (2) nor an internal one (3): every cross-field rule lives in the schema, which both
run. Hypothesis mutates the bundled examples (the default, a day, `uncertainty:`, `owned:`,
a day with `owned:`)
one to three fields at a time, as the mutation test does; the explicit examples are the cases
that once passed `validate` and then failed in `optimize`.

The one input error `validate` cannot foresee is the wall clock: `search.time_limit_s` is
allowed to run out (a mutation scales it down to a fraction of a second).
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli_helpers import invoke
from tests.mutations import apply, example, mutation

pytestmark = pytest.mark.integration

NAMES = ("pdd-paper", "a-day", "pdd-paper-uncertain", "owned", "a-day-owned")


def _doc(name: str) -> dict:
    d = example(name)
    if name == "a-day":
        d["workload"]["rate_rps"] = 10  # the periods are multipliers of it: each run ~1 s
    if d.get("uncertainty"):
        d["uncertainty"]["draws"] = 8
    return d


def agree(tmp_path, doc: dict, log: str = "") -> int:
    """Validate, and where it says ok, optimize (no replays, no draws: what validate claims
    is that the inputs plan): the exit codes must agree. Returns validate's exit code."""
    f = tmp_path / "scenario.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    v = invoke("validate", f)
    assert v.exit_code in (0, 2), f"{log}\nvalidate: {v.exit_code} {v.stderr}"
    if v.exit_code:
        return 2
    r = invoke("optimize", f, "--format", "json", "--no-verify", "--draws", "0")
    lines = r.stderr.strip().splitlines()
    report = f"{log}\nvalidate ok, optimize exit {r.exit_code}: {r.stderr}\n{f.read_text()}"
    if r.exit_code == 2:
        assert "search.time_limit_s" in r.stderr, report  # the one thing validate cannot know
    else:
        assert r.exit_code in (0, 1), report
    if r.exit_code:
        assert len(lines) == 1 and lines[0].startswith("error: "), report
    return 0


def _edit(name: str, where: str, value) -> dict:
    d = _doc(name)
    *head, last = where.split(".")
    cur = d
    for k in head:
        cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
    cur[last] = value
    return d


# the cases (and their neighbours: every price table, every elastic table, every GPU-naming
# field) that validate passed and optimize then refused or crashed on
CASES = [
    ("a-day", "on_demand_prices.zz9", 3.0),  # a GPU no profile has: KeyError in the day search
    ("a-day", "on_demand_prices.b200", 3.0),  # a profile no datacenter lists
    ("pdd-paper", "on_demand_prices.h100", 3.0),  # no periods: the price would be dropped
    ("pdd-paper", "prices.b200", 3.0),
    ("a-day", "elastic.max_gpus.dc-a.b200", 8),  # a GPU the datacenter lacks: silently unused
    ("a-day", "workload.periods.3.elastic_max_gpus", {"dc-b": {"h100": 4}}),
    ("a-day", "search.robust", 0.9),  # a robust fleet the day's schedule would not follow
    ("pdd-paper-uncertain", "uncertainty.inputs.prefill_speed.sigma", 800.0),
    ("owned", "owned.gpus.0.gpu", "h200"),  # owned GPUs of a type the datacenter lacks
]


@pytest.mark.parametrize(("name", "where", "value"), CASES)
def test_cross_field_rules_are_validates(tmp_path, name, where, value):
    code = agree(tmp_path, _edit(name, where, value), f"{name}: {where} = {value!r}")
    assert code == 2, "validate must refuse it, naming the rule"


@pytest.mark.slow
@settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=st.sampled_from(NAMES), mutations=st.lists(mutation, min_size=1, max_size=3))
def test_what_validate_accepts_optimize_plans(tmp_path, name, mutations):
    doc = _doc(name)
    log = [apply(doc, m) for m in mutations]
    agree(tmp_path, doc, f"{name}: {log}")
