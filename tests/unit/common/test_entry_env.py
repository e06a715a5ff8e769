"""The entry point's environment defaults: set before numpy loads, never over a user's own."""

from __future__ import annotations

import gc

import pytest

import pdd_plan.cli as cli

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _gc_threshold_kept():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def _run_main(monkeypatch, preset: dict[str, str]) -> dict[str, str]:
    for k in cli.ENV_DEFAULTS:
        monkeypatch.delenv(k, raising=False)
    for k, v in preset.items():
        monkeypatch.setenv(k, v)
    seen: dict[str, str] = {}

    def fake_app() -> None:
        import os

        seen.update({k: os.environ[k] for k in cli.ENV_DEFAULTS})

    monkeypatch.setattr(cli, "app", fake_app)
    cli.main()
    return seen


def test_defaults_one_blas_thread_no_huge_page_advice_no_pydantic_plugins(monkeypatch):
    seen = _run_main(monkeypatch, {})
    assert seen == {
        "NUMPY_MADVISE_HUGEPAGE": "0",
        "OPENBLAS_NUM_THREADS": "1",
        "PYDANTIC_DISABLE_PLUGINS": "__all__",  # the value pydantic reads as "every plugin off"
    }


def test_a_users_settings_win(monkeypatch):
    mine = {cli.HUGEPAGE_ENV: "1", cli.BLAS_THREADS_ENV: "8", cli.PLUGINS_ENV: "logfire"}
    seen = _run_main(monkeypatch, mine)
    assert seen == mine


def test_pydantic_reads_the_default_as_every_plugin_off(monkeypatch):
    # the value the entry point sets must be one pydantic's loader knows, or the scan still runs
    from pydantic.plugin import _loader

    monkeypatch.setenv(cli.PLUGINS_ENV, cli.ENV_DEFAULTS[cli.PLUGINS_ENV])
    monkeypatch.setattr(_loader, "entry_points", lambda **k: pytest.fail("plugins scanned"))
    monkeypatch.setattr(_loader, "_plugins", None)
    assert tuple(_loader.get_plugins()) == ()


def test_main_called_in_a_process_returns_to_its_caller(monkeypatch):
    # only the installed command (argv[0] `pdd-plan`) leaves early; a caller's main() returns
    monkeypatch.setattr(cli.sys, "argv", ["pytest"])
    monkeypatch.setattr(cli, "app", lambda: None)
    called: list[int] = []
    monkeypatch.setattr(cli, "done", lambda: called.append(1))
    cli.main()
    assert called == []
    monkeypatch.setattr(cli.sys, "argv", ["/usr/bin/pdd-plan", "validate"])
    cli.main()
    assert called == [1]


def test_a_failed_command_is_not_cut_short(monkeypatch):
    def fail() -> None:
        raise SystemExit(2)

    monkeypatch.setattr(cli.sys, "argv", ["pdd-plan", "validate"])
    monkeypatch.setattr(cli, "app", fail)
    monkeypatch.setattr(cli, "done", lambda: pytest.fail("done() after a failure"))
    with pytest.raises(SystemExit) as e:
        cli.main()
    assert e.value.code == 2


def test_the_young_generation_is_collected_every_50000_objects_not_700(monkeypatch):
    gc.set_threshold(700, 10, 10)  # Python's defaults
    _run_main(monkeypatch, {})
    assert gc.get_threshold() == (50_000, 10, 10)  # the older generations' as they were
