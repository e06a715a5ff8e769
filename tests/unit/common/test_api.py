"""The Python entry points (`pdd_plan.api`) as a new user calls them: from an empty directory,
a scenario by bundled name or by path; `build_context`'s file optional."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pdd_plan
from pdd_plan import api
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles

pytestmark = pytest.mark.unit

EXAMPLES = profiles.data_dir() / "examples"


def test_a_bundled_name_loads_from_an_empty_directory(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    by_name = pdd_plan.load_scenario("pdd-paper")
    assert by_name == api.load_scenario(EXAMPLES / "pdd-paper.yaml")  # the same file by path
    assert by_name.model == "deepseek-v4-pro"  # as the bundled file says


def test_a_relative_path_is_read_against_the_working_directory(monkeypatch, tmp_path):
    shutil.copy(EXAMPLES / "narrow-line.yaml", tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    assert api.load_scenario("mine.yaml") == api.load_scenario("narrow-line")
    with pytest.raises(InputError, match="not found"):
        api.load_scenario("no-such-scenario.yaml")


def test_build_context_file_is_optional_and_resolves_relative_paths(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    sc = api.load_scenario("pdd-paper")
    ctx = api.build_context(sc)  # no file: the working directory
    assert ctx.base_dir == tmp_path and ctx.scenario == sc
    # a trace replay names its trace relative to its own file: a name or path gives that file
    trace = api.build_context("mooncake-conversation")
    assert trace.base_dir == EXAMPLES
    given = api.build_context(api.load_scenario("mooncake-conversation"), "mooncake-conversation")
    assert given.base_dir == EXAMPLES and given.file == trace.file


def test_the_packages_stay_packages_and_the_functions_are_in_api():
    import pdd_plan.evaluate
    import pdd_plan.optimize

    # no module turned callable: the entry points are plain functions in pdd_plan.api
    assert not callable(pdd_plan.optimize) and not callable(pdd_plan.evaluate)
    assert pdd_plan.api is api and pdd_plan.build_context is api.build_context
    with pytest.raises(AttributeError):
        pdd_plan.no_such_thing  # noqa: B018


def test_importing_the_api_loads_neither_the_planner_nor_the_simulator():
    code = (
        "import sys, pdd_plan.api\n"
        "heavy = [m for m in ('pdd_plan.optimize', 'pdd_plan.sim.run', 'numba', 'highspy')"
        " if m in sys.modules]\n"
        "print(heavy)"
    )
    root = Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
