"""The entry point's environment defaults: set before numpy loads, never over a user's own."""

from __future__ import annotations

import pytest

import pdd_plan.cli as cli

pytestmark = pytest.mark.unit


def _run_main(monkeypatch, preset: dict[str, str]) -> dict[str, str]:
    for k in (cli.HUGEPAGE_ENV, cli.BLAS_THREADS_ENV):
        monkeypatch.delenv(k, raising=False)
    for k, v in preset.items():
        monkeypatch.setenv(k, v)
    seen: dict[str, str] = {}

    def fake_app() -> None:
        import os

        seen.update({k: os.environ[k] for k in (cli.HUGEPAGE_ENV, cli.BLAS_THREADS_ENV)})

    monkeypatch.setattr(cli, "app", fake_app)
    cli.main()
    return seen


def test_defaults_one_blas_thread_and_no_huge_page_advice(monkeypatch):
    seen = _run_main(monkeypatch, {})
    assert seen == {cli.HUGEPAGE_ENV: "0", cli.BLAS_THREADS_ENV: "1"}


def test_a_users_settings_win(monkeypatch):
    seen = _run_main(monkeypatch, {cli.HUGEPAGE_ENV: "1", cli.BLAS_THREADS_ENV: "8"})
    assert seen == {cli.HUGEPAGE_ENV: "1", cli.BLAS_THREADS_ENV: "8"}


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
