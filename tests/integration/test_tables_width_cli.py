"""Every command's tables fit their width through the CLI, and a plan's table keeps every
figure at 60 columns (unit side: tests/unit/report/test_tables_width.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from tests.unit.report.test_tables_width import _assert_fits  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


ROOT = Path(__file__).resolve().parents[2]


EX = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden"


CSV = ROOT / "pdd_plan" / "data" / "calibration" / "calibration_measurements.csv"


WIDTHS = (80, 60)


def _run(argv: list[str], width: int) -> str:
    r = CliRunner().invoke(app, argv, env={"COLUMNS": str(width)})
    assert r.exit_code == 0, (argv, r.output)
    return r.stdout


@pytest.fixture(scope="module")
def plans() -> dict[str, Path]:
    """Verified plans of two examples (narrow-line has an architecture that misses): their
    golden snapshots, which are `optimize EXAMPLE -f yaml` byte for byte (tests/golden/make.py
    writes them, test_golden.py checks an optimize run still prints them), so they are read
    here rather than planned again. Read only: the commands below write elsewhere."""
    return {ex: GOLDEN / f"{ex}.optimize.yaml" for ex in ("pdd-paper", "narrow-line")}


COMMANDS = {
    "optimize": lambda p: ["optimize", str(EX / "narrow-line.yaml"), "--sim-requests", "2000"],
    # --draws 0: the uncertainty block's tables are checked on narrow-line's plan above; on this
    # trace-driven example the block would add about 10 s of CPU to a unit test
    "optimize-no-verify": lambda p: [
        "optimize", str(EX / "mooncake-conversation.yaml"), "--no-verify", "--draws", "0",
    ],
    "report": lambda p: ["report", str(p["narrow-line"])],
    "report-paper": lambda p: ["report", str(p["pdd-paper"])],
    "simulate": lambda p: ["simulate", str(p["narrow-line"]), "-a", "pdd", "-n", "2000"],
    "sweep": lambda p: [
        "sweep", str(EX / "pdd-paper.yaml"), "--vary", "workload.rate_rps=20:40:20",
        "--vary", "sla.tpot_ms=5:35:30", "--executor", "serial",
    ],
    "perf": lambda p: [
        "perf", "-m", "deepseek-v3", "-g", "h200", "--phase", "offline", "-L", "4096",
        "--output-tokens", "256",
    ],
    "trace-stats": lambda p: ["trace", "stats", str(ROOT / "traces" / "mooncake_conversation_trace.jsonl")],
    "bathtub": lambda p: ["bathtub", "--model", "deepseek-v4-pro", "--gpu", "h100", "--input-tokens", "65536"],
    "calibrate": lambda p: ["calibrate", str(CSV)],
}  # fmt: skip


@pytest.fixture(scope="module")
def once():
    """The commands' work done once for both widths: a table's width is the rendering's, and
    the plan and the fit under it are the same at 80 and 60 columns (deterministic: the same
    inputs give the same plan and fit, tests/integration/test_determinism.py). Each is computed
    at the first width and reused, as a frozen Plan or a copy, at the second."""
    import copy
    import importlib

    # by module name: `pdd_plan.cli.main` is also the name of the console entry function
    opt_pkg, cal_cli, cli_main = map(
        importlib.import_module,
        ("pdd_plan.optimize", "pdd_plan.cli.calibrate", "pdd_plan.cli.main"),
    )

    plans, uncertain, fits = {}, {}, {}
    real_plan, real_uncertain, real_fit = opt_pkg.optimize, cli_main._uncertain, cal_cli._fit_all

    def plan(ctx, **kw):
        given = sorted((k, v) for k, v in kw.items() if k != "replay_worker")
        key = (ctx.scenario.model_dump_json(), repr(given))
        if key not in plans:
            plans[key] = real_plan(ctx, **kw)
        return plans[key]

    def with_draws(ctx, plan, *args):
        key = (id(plan), repr(args[:-1]))  # the progress bar, last, is not an input
        if key not in uncertain:
            uncertain[key] = (plan, real_uncertain(ctx, plan, *args))
        return uncertain[key][1]

    def fit(rows, gpus, targets, name):
        if targets:  # it writes files: always run
            return real_fit(rows, gpus, targets, name)
        key = repr((rows, gpus, name))
        if key not in fits:
            fits[key] = real_fit(rows, gpus, targets, name)
        return copy.deepcopy(fits[key])

    with pytest.MonkeyPatch.context() as m:
        m.setattr(opt_pkg, "optimize", plan)
        m.setattr(cli_main, "_uncertain", with_draws)
        m.setattr(cal_cli, "_fit_all", fit)
        yield


@pytest.mark.integration
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_command_tables_fit(cmd, width, plans, once):
    text = _run(COMMANDS[cmd](plans), width)
    assert "┃" in text or "│" in text, text  # a table was printed
    _assert_fits(text, width, cmd)


@pytest.mark.integration
def test_plan_table_keeps_every_figure_at_60_columns(plans):
    # the key figures are whole numbers in the table, not `p50/p…`
    text = _run(["report", str(plans["pdd-paper"])], 160)
    # the same command at 160 columns is a golden snapshot (tests/golden/make.py runs it and
    # test_golden.py checks it byte for byte): read, not planned a third time
    wide = (GOLDEN / "pdd-paper.optimize.table.txt").read_text(encoding="utf-8")
    narrow = _run(["optimize", str(EX / "pdd-paper.yaml"), "--no-verify"], 60)
    for label in ("TTFT p50 s", "TTFT p90 s", "TTFT p99 s", "TPOT p50 ms", "BCR req/$"):
        assert label in narrow
    row = lambda t, k: next(ln for ln in t.splitlines() if ln.startswith(f"│ {k}"))  # noqa: E731
    for k in ("TTFT p99 s", "$/h", "on p_md"):
        assert row(wide, k).split() == row(narrow, k).split(), k
    assert "Latency" in text
