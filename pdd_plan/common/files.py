"""Input files: found, a regular file, noted as an input, read within a size cap.

Every reader of a user file goes through :func:`require_file` so that the error names the real
culprit: a device (``/dev/zero``) or a FIFO is "not a regular file" (reading it would never
end), a folder is a folder, and only a missing path is "not found". The file is noted as an
input of the command (``atomic.note_input``) so that no output is written over it.

JSON inputs (iperf3 runs, engine result files, HF configs) are kilobytes to a few megabytes;
:func:`read_text` refuses one over ``PDD_PLAN_MAX_JSON_MB`` before reading it, so a stray
multi-gigabyte file does not exhaust memory in ``json.loads``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from pdd_plan.common.atomic import file_kind, note_input
from pdd_plan.common.errors import InputError

MAX_JSON_MB_ENV = "PDD_PLAN_MAX_JSON_MB"
DEFAULT_MAX_JSON_MB = 256.0


def max_bytes(env: str, default_mb: float, example: str) -> int:
    """A size cap in bytes from the environment variable ``env`` (megabytes) or the default."""
    raw = os.environ.get(env, "").strip()
    try:
        mb = float(raw) if raw else default_mb
    except ValueError:
        mb = math.nan
    if not (mb > 0 and math.isfinite(mb)):
        raise InputError(None, env, f"must be a positive number of MB (got {raw!r})", example)
    return int(mb * 1e6)


def max_json_bytes() -> int:
    """The cap on a JSON input, from ``PDD_PLAN_MAX_JSON_MB`` (megabytes) or the default."""
    return max_bytes(MAX_JSON_MB_ENV, DEFAULT_MAX_JSON_MB, "e.g. 1024")


def require_file(
    path: str | os.PathLike, fix: str, field: str | None = None, what: str = "file"
) -> Path:
    """``path`` as a Path when it is an existing regular file (noted as an input), else a
    one-line InputError: not found, a folder, or not a regular file (a device, a FIFO)."""
    p = Path(path)
    given = str(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(given, field, f"{what} not found", fix) from None
    except OSError as e:  # a name too long, a path through a file, no permission
        raise InputError(given, field, f"cannot read: {e.strerror or e}", fix) from None
    kind = file_kind(st.st_mode)
    if kind == "a folder":
        raise InputError(given, field, "is a folder, not a file", fix)
    if kind is not None:
        raise InputError(given, field, f"is not a regular file ({kind})", fix)
    note_input(p)  # no output of this command may overwrite it
    return p


def check_size(p: Path, cap: int, kind: str, env: str, field: str | None = None) -> None:
    """Refuse a file over ``cap`` bytes before it is read (``env`` raises the cap)."""
    size = p.stat().st_size
    if size > cap:
        raise InputError(
            str(p),
            field,
            f"is {size / 1e6:,.1f} MB, above the {cap / 1e6:g} MB limit for {kind} inputs",
            f"set {env} to more MB to read it anyway",
        )


def read_text(path: str | os.PathLike, fix: str, field: str | None = None) -> str:
    """The UTF-8 text of a JSON input (see :func:`require_file`), refused over the size cap."""
    p = require_file(path, fix, field)
    check_size(p, max_json_bytes(), "JSON", MAX_JSON_MB_ENV, field)
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise InputError(str(path), field, f"cannot read it as UTF-8 text ({why})", fix) from None
