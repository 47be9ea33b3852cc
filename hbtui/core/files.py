"""Files that hold a run's data or a user's settings: owner-only, and written whole."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


@contextmanager
def private_file(path: str | Path, newline: str | None = None) -> Iterator[TextIO]:
    """A text file to write at ``path``, owner-only (0600) even where it replaces a file that was
    not: the mode ``open`` gives applies only to a file it creates, so an export written over an
    old 0644 one stayed 0644. The text goes to a temporary file beside it, renamed over it at the
    end, so that a failed write leaves the old file as it was and no reader sees half of one."""
    path = Path(path)
    if path.exists() and not path.is_file():
        # A pipe or a terminal (--out /dev/stdout): there is no file to replace or to protect.
        with open(path, "w", encoding="utf-8", newline=newline) as handle:
            yield handle
        return
    target = path.resolve()  # through a symbolic link: the file it names is replaced, not the link
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as handle:
            yield handle
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def open_to_others(path: str | Path) -> int | None:
    """The permission bits of the file ``path`` if users other than its owner may read or write it."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    mode = stat.S_IMODE(status.st_mode)
    return mode if stat.S_ISREG(status.st_mode) and mode & 0o066 else None


def stdout_to_devnull() -> None:
    """After a reader of our output went away: what is still printed goes nowhere, quietly,
    instead of failing again (Python's own flush at exit would print a traceback)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def read_user_file(
    path: Path, problem: type[Exception], *, label: str | None = None, kind: str = "", missing: str = ""
) -> bytes:
    """A file the user named (a dataset, an import, a grader template), or one line saying why it
    cannot be read, as ``problem``: its ``label`` (the path by default), then no such file (and
    ``missing``), a directory (not a ``kind``), permission denied, or the system's reason."""
    name = label or str(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise problem(f"{name}: no such file{missing}") from None
    except IsADirectoryError:
        raise problem(f"{name}: is a directory{f', not a {kind}' if kind else ''}") from None
    except PermissionError:
        raise problem(f"{name}: permission denied") from None
    except OSError as exc:
        raise problem(f"{name}: {exc.strerror or exc}") from None
