"""Shared CLI plumbing: one-line errors and exit codes, output formats, atomic writes."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import typer
import yaml

from ..atomic import write_atomic  # noqa: F401  (the commands write their files with it)
from ..errors import InputError, PddPlanError

DEBUG = {"on": False}
FORMATS = ("table", "json", "yaml")


def guarded(fn: Callable) -> Callable:
    """Run a command body; known errors become one line on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except PddPlanError as e:
            if DEBUG["on"]:
                raise
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("error: interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as e:  # an unexpected failure still gets one line, not a traceback
            if DEBUG["on"]:
                raise
            typer.echo(f"error: internal: {type(e).__name__}: {e} (rerun with --debug)", err=True)
            raise typer.Exit(3) from None

    return wrapper


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
        return yaml.safe_dump(data, sort_keys=False)
    raise ValueError(fmt)


def echo(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
