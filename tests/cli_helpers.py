"""Running a command in-process and reading its one-line error, for the CLI test modules."""

from __future__ import annotations

from typer.testing import CliRunner

from pdd_plan.cli.main import app


def runner() -> CliRunner:
    try:  # click < 8.2 mixes stderr into stdout unless told not to
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def invoke(*args):
    return runner().invoke(app, [str(a) for a in args])


def refused(*args, needle: str | tuple[str, ...], code: int = 2) -> str:
    """Run the command: it must exit `code` with one `error:` line holding every `needle`."""
    r = invoke(*args)
    text = f"exit {r.exit_code}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == code, text
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    for n in (needle,) if isinstance(needle, str) else needle:
        assert n in lines[0], text
    return lines[0]


def err_line(r) -> str:
    """The one `error: ` line a refused command printed (no traceback), for tests that check
    its exit code themselves."""
    text = (r.stderr if hasattr(r, "stderr") else r.output).strip()
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    return lines[0]
