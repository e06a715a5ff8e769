"""benchmarks/speed.py's table: medians, the targets' verdicts and the first-run ratio, from
given timings (the harness itself is run by hand, not in CI)."""

from __future__ import annotations

import pytest

from benchmarks import speed

pytestmark = pytest.mark.unit


def test_table_reports_medians_targets_and_the_first_run_ratio() -> None:
    cases = {c.name: c for c in speed._cases("plan.yaml")}
    plain, warm, first, cold, reg = (
        cases["optimize plain"],
        cases["optimize"],
        cases["first optimize after install"],
        cases["first optimize without compile"],
        cases["regimes 10x10"],
    )
    plain.times, plain.cpus, plain.loads = [1.2, 3.0, 1.4], [1.0, 1.1, 0.9], [0.5, 0.7, 0.6]
    warm.times, warm.cpus, warm.loads = [1.4, 1.3, 1.5], [1.0, 1.0, 1.0], [0.5, 0.5, 0.5]
    first.times, first.cpus, first.loads = [3.5, 2.5], [2.0, 2.0], [0.4, 0.4]
    first.install_times, first.install_cpus = [9.0, 11.0], [8.0, 10.0]
    cold.times, cold.cpus, cold.loads = [14.0], [13.0], [0.3]
    reg.times, reg.cpus, reg.loads = [13.0], [0.1], [1.0]
    rows = {
        r.split(" | ")[0].lstrip("| "): r for r in speed.table(list(cases.values())).splitlines()
    }
    assert "| 3 | 1.40 | 1.20 | 1.00 | 0.5-0.7 | <= 1.5 s | yes |" in rows["optimize plain"]
    # the plan with its uncertainty block has no bar of its own, only a note beside it
    assert rows["optimize"].endswith("|  |  |")
    # median 3.0 s over the warm (uncertainty block) median 1.4 s: 2.1x, over the bar of 2x
    assert "<= 2x warm (2.1x) | no |" in rows["first optimize after install"]
    # its install step is a row of its own, just before it: medians 10.0 s wall, 9.0 s CPU
    install = rows["install step, before first optimize after install"]
    assert "`pdd-plan compile` | 2 | 10.00 | 9.00 | 9.00 |" in install
    names = list(rows)
    assert (
        names.index("first optimize after install")
        == names.index(install.split(" | ")[0].lstrip("| ")) + 1
    )
    # the cold run without the install step: its ratio (14.0 / 1.4 = 10x), no verdict
    assert rows["first optimize without compile"].endswith("| (10.0x warm) |  |")
    assert "| - |" in rows["regimes 10x10"] and rows["regimes 10x10"].endswith("| no |")
    assert "optimize --no-verify" not in rows  # cases without timings are left out


def test_side_by_side_gives_each_rounds_ratio_when_interleaved(tmp_path) -> None:
    aic = speed._aic_case("aiconfigurator", tmp_path)
    plain = next(c for c in speed._cases("plan.yaml") if c.name == "optimize plain")
    aic.times, aic.cpus, aic.loads = [40.0, 50.0, 45.0], [40.0, 50.0, 45.0], [1.0] * 3
    plain.times, plain.cpus, plain.loads = [0.8, 1.0, 0.5], [1.0] * 3, [1.0] * 3
    text = speed.table([plain, aic], paired=True)
    # medians: 45.0 s over 0.8 s = 56.2x; per round 50.0x, 50.0x, 90.0x, median 50.0x
    assert "optimize plain: 56.2x" in text
    assert "Per round (optimize plain): 50.0x, 50.0x, 90.0x; median 50.0x." in text
    # runs not taken in rounds, or a count that does not pair up: no per-round line
    assert "Per round" not in speed.table([plain, aic])
    plain.times = [0.8, 1.0]
    assert "Per round" not in speed.table([plain, aic], paired=True)


def test_interleave_says_which_cases_it_leaves_out(tmp_path, monkeypatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(
        speed, "_run", lambda args, env, exe=None: (ran.append(args), (1.0, 1.0))[1]
    )
    cases = [
        c for c in speed._cases("plan.yaml") if c.name in ("--help", "first optimize after install")
    ]
    logs: list[str] = []
    speed.measure_interleaved(cases, 2, tmp_path, logs.append)
    assert (
        logs[0]
        == "first optimize after install: not timed with --interleave (a fresh install each run)"
    )
    help_case = next(c for c in cases if c.name == "--help")
    assert help_case.times == [1.0, 1.0]  # two rounds, after one untimed warm run
    assert ran.count(["--help"]) == 3 and ran[0] == ["compile"]
