"""Write files so that no reader ever sees one half-written.

The text goes to a temporary file in the destination's own folder (same file system, so
the final ``os.replace`` is an atomic rename), which then replaces the destination in one
step. An interrupted or failed write leaves the old file as it was and no temporary file
behind. There is no fsync: this protects readers from partial files, not the data from a
power cut. The result has ordinary permissions (0666, or 0777 when ``executable``, less
the umask), not the 0600 of a temporary file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import InputError


def _umask() -> int:
    mask = os.umask(0)  # the only way to read the umask is to set it
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike, binary: bool = False, *, executable: bool = False
) -> Iterator[IO]:
    """A file to write ``path`` through, for output too large to build in memory first.

    Text is UTF-8 with ``\\n`` line ends. The destination appears when the block ends
    without an exception; its folder must exist (else a one-line InputError).
    """
    p = Path(path)
    folder = p.parent
    if not folder.is_dir():
        raise InputError(
            str(p), None, "folder does not exist", "create the folder or change the path"
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(folder))
    try:
        if binary:
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with f:
            yield f
        os.chmod(tmp, (0o777 if executable else 0o666) & ~_umask())
        os.replace(tmp, p)
    except BaseException:  # interrupted too: never leave the temporary file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes, *, executable: bool = False) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically; see the module doc."""
    with atomic_open(path, binary=isinstance(data, bytes), executable=executable) as f:
        f.write(data)
