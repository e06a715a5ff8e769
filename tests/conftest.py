"""Results several test modules read, computed once per session.

`report --html` on the default scenario's unverified plan replays every architecture and draws
the 5x5 regime map around it (25 optimize runs): tests/integration/test_report.py and
tests/integration/test_regimes_map.py both read that page, so it is built once, with every
option either needs."""

from __future__ import annotations

import os

# as the CLI's entry point does (pdd_plan/cli/__init__.py), before numpy loads: one OpenBLAS
# thread per test process, so the -n workers do not oversubscribe the cores
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# ruff: noqa: E402 (the imports below come after it on purpose)

import copy
import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdd_plan.cli import figure_data
from pdd_plan.cli.common import dumps
from pdd_plan.cli.main import app
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from tests import markers

_REGIME_MAP = figure_data.regime_map
_MAPS: dict[str, object] = {}  # serial regime maps drawn this session, by their inputs


def _map_once(data, file, x, y, **kw):
    """figure_data.regime_map, once per inputs a session: the reports of the default plan,
    verified (test_report.py) and not (unverified_html), map the same 25 cells around the same
    fleet. A copy each time; test_report.py's pool rerun computes its own and compares."""
    # the file names errors and resolves a trace's relative path: it matters with a trace only
    where = str(file) if (data.get("workload") or {}).get("trace") else None
    key = json.dumps([data, where, repr(x), repr(y), sorted(kw.items())], default=str)
    if key not in _MAPS:
        _MAPS[key] = _REGIME_MAP(data, file, x, y, **kw)
    return copy.deepcopy(_MAPS[key])


@contextmanager
def _serial_regime_map() -> Iterator[None]:
    """`report --html` with its regime map's 25 cells run in this process, not a process pool:
    each pool worker imports the package first (seconds on a busy 2-core box), and the cells
    share this process's memoized timings. The map is the same byte for byte whatever the
    executor (tests/unit/sweep/test_sweep.py); test_report.py's rerun uses the pool and compares.
    A map drawn once is reused for the same inputs (`_map_once`)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(
            figure_data,
            "regime_data",
            functools.partial(figure_data.regime_data, executor="serial"),
        )
        m.setattr(figure_data, "regime_map", _map_once)
        yield


@dataclass(frozen=True)
class HtmlReport:
    plan: dict  # what `optimize --no-verify` plans for the default scenario
    html: str  # `report --html` of that plan (replayed by the report: it has no simulation)
    plots: Path  # the `--plots` folder of the same run
    stdout: str  # the report's tables (-f json)


@pytest.fixture(scope="session")
def serial_regime_map():
    """A context manager: `report --html` inside it draws its regime map serially."""
    return _serial_regime_map


@pytest.fixture(scope="session")
def example_plan() -> dict:
    """The default scenario planned without verification (a plan file's dict)."""
    path = profiles.example_path()
    return optimize(build_context(load_scenario(path), str(path)), verify=False).dump()


@pytest.fixture(scope="session")
def unverified_html(example_plan, tmp_path_factory) -> HtmlReport:
    work = tmp_path_factory.mktemp("unverified-report")
    plan, out, pngs = work / "plan.yaml", work / "r.html", work / "png"
    plan.write_text(dumps(example_plan, "yaml"))
    args = ["report", str(plan), "--html", str(out), "--plots", str(pngs)]
    with _serial_regime_map():
        r = CliRunner().invoke(app, [*args, "--sim-requests", "300", "-f", "json"])
    assert r.exit_code == 0, r.output
    return HtmlReport(example_plan, out.read_text(encoding="utf-8"), pngs, r.stdout)


def pytest_collection_modifyitems(config, items):
    """Each test is marked with its folder's kind (tests/markers.py: tests/unit `unit`,
    tests/integration `integration`, tests/golden `golden`); a marker that contradicts the
    folder (`slow` or `integration` under tests/unit, `unit` elsewhere) fails collection, named."""
    bad = []
    for i in items:
        why = markers.mismatch(i.nodeid, (m.name for m in i.iter_markers()))
        if why is not None:
            bad.append(why)
        elif not i.get_closest_marker(kind := markers.folder_kind(i.nodeid)):
            i.add_marker(kind)
    if bad:
        raise pytest.UsageError(
            f"{len(bad)} tests' markers contradict their folders: "
            + "; ".join(bad[: 20 if not config.getoption("verbose") else None])
        )
