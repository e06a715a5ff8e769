"""Write files so that no reader ever sees one half-written, and never over an input.

The text goes to a temporary file in the destination's own folder (same file system, so
the final ``os.replace`` is an atomic rename), which then replaces the destination in one
step. An interrupted or failed write leaves the old file as it was and no temporary file
behind. There is no fsync: this protects readers from partial files, not the data from a
power cut. The result has ordinary permissions (0666, or 0777 when ``executable``, less
the umask), not the 0600 of a temporary file.

What is never written (a one-line InputError instead, before any byte is written):

* a file this process has read as input (:func:`note_input`, called by every reader of user
  files): ``optimize X --out X`` would otherwise replace the scenario with its plan;
* anything but a regular file: a folder, a FIFO, a socket, a device (``/dev/null``,
  ``/dev/full``); ``os.replace`` would swap the device node itself for a plain file as root.

A symlink is written *through*: its target is replaced and the link stays a link.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from pdd_plan.common.errors import InputError

# realpath and (device, inode) of every input read since the last reset: the inode catches a
# hard link to an input, the path one that does not exist yet (a trace noted before reading)
_INPUT_PATHS: set[str] = set()
_INPUT_IDS: set[tuple[int, int]] = set()


def note_input(path: str | os.PathLike | None) -> None:
    """Remember ``path`` as an input of this command: no output may be written over it."""
    if path is None:
        return
    with contextlib.suppress(OSError, ValueError):
        _INPUT_PATHS.add(os.path.realpath(path))
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):  # /dev/stdin and the like are not files to protect
            _INPUT_IDS.add((st.st_dev, st.st_ino))


def forget_inputs() -> None:
    """Start a new command: nothing has been read yet (the CLI calls this per command)."""
    _INPUT_PATHS.clear()
    _INPUT_IDS.clear()


def inputs() -> list[str]:
    """The inputs noted so far (resolved paths), sorted: for tests and messages."""
    return sorted(_INPUT_PATHS)


def file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def check_output(path: str | os.PathLike, field: str | None = None) -> Path:
    """The real file ``path`` would write (through symlinks), or a one-line InputError naming
    ``path`` (and ``field``, e.g. a flag) when it must not or cannot be written there."""
    given = str(path)
    real = Path(os.path.realpath(path))
    try:
        st: os.stat_result | None = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):  # the folder check below says which
        st = _magic_link(given)
    except OSError as e:
        raise InputError(given, field, f"cannot use as output ({e.strerror})", "") from None
    if str(real) in _INPUT_PATHS or (st is not None and (st.st_dev, st.st_ino) in _INPUT_IDS):
        raise InputError(
            given,
            field,
            "is an input of this command; writing it would destroy that input",
            "write the output to another path",
        )
    if st is not None and (kind := file_kind(st.st_mode)) is not None:
        raise InputError(given, field, f"is {kind}, not a file to write", "give a file path")
    folder = real.parent
    if not folder.exists():
        raise InputError(
            given, field, "folder does not exist", "create the folder or change the path"
        )
    if not folder.is_dir():
        raise InputError(given, field, f"'{folder}' is not a folder", "change the path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(given, field, "folder is not writable", "choose a writable path")
    return real


def _magic_link(given: str) -> os.stat_result | None:
    """What a path names when its resolved form does not exist but the path does: /dev/stdout
    on a pipe resolves to `/proc/<pid>/fd/pipe:[N]`, which only the kernel's own link reaches
    (it was then found unwritable after the planning, as "free disk space")."""
    try:
        return os.stat(given)
    except OSError:
        return None


def check_outputs(paths: Iterable[str | os.PathLike], field: str | None = None) -> list[Path]:
    """:func:`check_output` of every path, before any is written (all or nothing)."""
    return [check_output(p, field) for p in paths]


def _umask() -> int:
    mask = os.umask(0)  # the only way to read the umask is to set it
    os.umask(mask)
    return mask


def _write_error(given: str, e: OSError) -> InputError:
    return InputError(
        given,
        None,
        f"cannot write ({e.strerror or e})",
        "free disk space, or choose a writable path on another disk",
    )


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike, binary: bool = False, *, executable: bool = False
) -> Iterator[IO]:
    """A file to write ``path`` through, for output too large to build in memory first.

    Text is UTF-8 with ``\\n`` line ends. The destination appears when the block ends
    without an exception. Refused with a one-line InputError (see the module doc): inputs,
    special files, a missing or unwritable folder; a failed write (disk full) is one too.
    """
    given = str(path)
    p = check_output(path)
    remove_stale(p)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{os.getpid()}.", dir=str(p.parent))
    except OSError as e:
        raise _write_error(given, e) from None
    try:
        f: IO[Any]
        if binary:
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with f:
            yield f
        os.chmod(tmp, (0o777 if executable else 0o666) & ~_umask())
        os.replace(tmp, p)
    except BaseException as e:  # interrupted too: never leave the temporary file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):  # ENOSPC, EIO, EDQUOT while writing: the user's disk
            raise _write_error(given, e) from None
        raise


def remove_stale(p: Path) -> None:
    """Remove the temporaries an earlier write of `p` left behind when it was killed outright
    (SIGKILL, a power cut: no handler runs), whose process is gone: `.NAME.PID.xxxx`, named so
    by `atomic_open`. A live PID's file is kept (maybe its write is under way)."""
    try:
        found = list(p.parent.glob(f".{glob.escape(p.name)}.*.*"))
    except OSError:
        return
    for t in found:
        pid = t.name[len(p.name) + 2 :].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if t.is_file() and not t.is_symlink():
                t.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process: not ours to judge
    return True


def write_atomic(path: str | os.PathLike, data: str | bytes, *, executable: bool = False) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically; see the module doc."""
    with atomic_open(path, binary=isinstance(data, bytes), executable=executable) as f:
        f.write(data)
