"""Room kept on the database's disk for the end of a run that a full disk stops.

When the disk fills, the writer's commit fails and the driver stops the run as ``failed``. That
end is a write too: SQLite appends it to the WAL, which cannot grow either, so it failed and
the run stayed ``running`` under an owner soon gone, which every list then showed as
``interrupted`` while its driver had said ``failed``.

So the process that drives a run keeps a small file beside its database,
``<database>.reserve-run<id>`` (owner-only, 0600), from before its first call. When its writes
fail, the driver removes it just before it records the end: the room it frees is the end's
(measured: the end of a run stopped so takes one or two WAL frames, 2 KiB). It is removed at
every end of the driver; one left by a killed driver is kept by the next (a resume) and removed
by ``delete``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

RESERVE_BYTES = 256 * 1024  # a hundred times what the end takes: its requests' record may be larger
_FLAGS = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def reserve_path(db_path: str | Path, run_id: int) -> Path:
    return Path(f"{db_path}.reserve-run{run_id}")


def keep_reserve(db_path: str | Path, run_id: int) -> None:
    """The reserve made, or kept as it is. A disk too full for it has no room to keep: the run
    goes on without one (its first commit will say why), as does a folder that takes no file."""
    path = reserve_path(db_path, run_id)
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except OSError:
        return
    try:
        # Written, not only sized: a file made long by truncate holds no room on the disk.
        zeros, written = memoryview(bytes(RESERVE_BYTES)), os.fstat(fd).st_size
        if written < RESERVE_BYTES:
            written = 0
            while written < RESERVE_BYTES:
                written += os.write(fd, zeros[written:])
    except OSError:
        os.close(fd)
        remove_reserve(db_path, run_id)  # a part of one would only take room and keep none
        return
    os.close(fd)


def remove_reserve(db_path: str | Path, run_id: int) -> None:
    with contextlib.suppress(OSError):
        reserve_path(db_path, run_id).unlink(missing_ok=True)
