"""Shared CLI plumbing: one-line errors and exit codes, output formats, atomic writes."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import typer

from pdd_plan.common.atomic import forget_inputs, write_atomic  # noqa: F401  (the commands write their files with it)
from pdd_plan.common.collector import frozen_after
from pdd_plan.common.errors import InputError, PddPlanError

if TYPE_CHECKING:
    from rich.console import Console

DEBUG = {"on": False}
FORMATS = ("table", "json", "yaml")
# Help pages in click's plain layout, not typer's rich panels: rich's panels show a boolean flag
# as `<bool>` (it takes no value: `--no-verify true` fails), read `[parquet]` in a help text as
# markup and drop it, and keep a docstring's hard line breaks; click's formatter rewraps each
# paragraph to the terminal and shows a flag bare.
PLAIN_HELP = None


def console(stderr: bool = False) -> Console:
    """A rich console; rich loads here, when a command prints a table or a bar (~0.04 s of
    imports a `--format json` run does without)."""
    from rich.console import Console

    return Console(stderr=stderr)


def loading() -> contextlib.AbstractContextManager[None]:
    """A command's imports without the cyclic garbage collector, whose objects (classes,
    functions, pydantic's schemas: some 10^5) are then frozen out of its later passes: they live
    until the process ends, and each full pass over them cost ~40 ms (a plan's run made ~0.2 s
    of passes, about a third of them during the imports)."""
    return frozen_after()


def guarded(fn: Callable) -> Callable:
    """Run a command body; known errors become one line on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            forget_inputs()  # inputs are per command (tests run many in one process)
            out = fn(*args, **kwargs)
            _flush_stdout()  # a full disk shows here, not as a warning at interpreter exit
            return out
        except typer.Exit:
            raise
        except PddPlanError as e:
            _fail(e, e.exit_code)
        except KeyboardInterrupt:
            typer.echo("error: interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as e:  # an unexpected failure still gets one line, not a traceback
            if isinstance(e, OSError) and _stdout_failed(e):  # e.g. rich printing to /dev/full
                _fail(stdout_error(e), 2)
            if DEBUG["on"]:
                raise
            msg = printable(f"{type(e).__name__}: {e}")
            typer.echo(f"error: internal: {msg} (rerun with --debug)", err=True)
            raise typer.Exit(3) from None

    return wrapper


def printable(text: str) -> str:
    """`text` with every control character escaped (``\\n``, ``\\x1b``): a name or value
    echoed from a file must not break the one-line error or drive the terminal."""
    return "".join(c if not (ord(c) < 32 or 127 <= ord(c) < 160) else repr(c)[1:-1] for c in text)


def _fail(e: Exception, code: int) -> None:
    if DEBUG["on"]:
        raise e
    with contextlib.suppress(OSError):  # stderr may be gone too: the exit code still says it
        typer.echo(f"error: {printable(str(e))}", err=True)
    raise typer.Exit(code) from None


def stdout_error(e: OSError) -> InputError:
    """A failed write to standard output (disk full, closed pipe) as a one-line error. What is
    still buffered is sent to /dev/null, else the interpreter fails again flushing it at exit."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    return InputError(
        "standard output",
        None,
        f"cannot write ({e.strerror or e})",
        "free disk space, or send the output somewhere that takes it",
    )


# errors only a write gives; files are written through pdd_plan.common.atomic, which names them, so
# one of these reaching `guarded` came from printing (rich's console writes sys.stdout itself)
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EPIPE, errno.EFBIG}


def _stdout_failed(e: OSError) -> bool:
    """Whether an OSError is standard output failing (disk full, closed pipe), as opposed to
    some file: a write-only errno, or stdout still unable to take what is buffered for it."""
    if e.errno in _WRITE_ERRNOS:
        return True
    try:
        sys.stdout.flush()
    except OSError:
        return True
    except ValueError:  # closed
        return False
    return False


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except OSError as e:
        raise stdout_error(e) from None
    except ValueError:  # already closed: nothing buffered to lose
        pass


@contextlib.contextmanager
def flag_names(**flag_of_field: str) -> Iterator[None]:
    """Report an InputError about a field (``kv_dtype``) as one about the flag that set it
    (``--kv-dtype``): domain code names its fields, only the command line knows its flags."""
    try:
        yield
    except InputError as e:
        flag = flag_of_field.get(e.field or "")
        if flag is None:
            raise
        raise InputError(e.file, flag, e.problem, e.fix) from None


def check_format(fmt: str, allowed: tuple[str, ...] = FORMATS) -> str:
    if fmt not in allowed:
        raise InputError(
            None, "--format", f"unknown format '{fmt}'", f"use one of {', '.join(allowed)}"
        )
    return fmt


def dumps(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(data, sort_keys=False)
    raise ValueError(fmt)


def echo(text: str) -> None:
    """Write to standard output now; a full disk or closed pipe is a one-line error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        raise stdout_error(e) from None


def _one_line_usage(e: Exception) -> str:
    """A click usage error (a non-numeric flag value, an unknown option, a missing argument)
    as the one-line format: `error: field '--flag': problem (fix: ...)`."""
    ctx = getattr(e, "ctx", None)
    where = f"`{ctx.command_path} --help`" if ctx is not None else "`pdd-plan --help`"
    param = getattr(e, "param", None)
    field = None
    if param is not None:
        opts = getattr(param, "opts", None) or []
        field = max(opts, key=len) if opts else (param.human_readable_name or param.name)
    msg = getattr(e, "message", None) or str(e)
    if field is None or param is None:
        msg = e.format_message() if hasattr(e, "format_message") else msg
    problem = " ".join(str(msg).split()).rstrip(".")
    return str(InputError(None, field, problem, f"see {where}"))


def _typer_group() -> type:
    """The root command's class: typer's, with click's usage errors (which typer prints as a
    six-line usage box) in the one-line format every other error has, exit 2."""
    from typer.core import TyperGroup

    class OneLineErrors(TyperGroup):
        def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
            if not standalone_mode:
                return super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[misc]
            try:
                rv = super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[misc]
            except Exception as e:
                if type(e).__name__ == "NoArgsIsHelpError":  # a bare group: help, as typer has it
                    return super().main(*args, standalone_mode=True, **kwargs)  # type: ignore[misc]
                if not hasattr(e, "format_message") or DEBUG["on"]:
                    raise
                with contextlib.suppress(OSError):
                    typer.echo(f"error: {printable(_one_line_usage(e))}", err=True)
                sys.exit(e.exit_code)  # type: ignore[attr-defined]
            sys.exit(rv if isinstance(rv, int) else 0)

    return OneLineErrors
