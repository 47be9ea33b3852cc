"""A run whose disk fills while its calls go on, for tests/engine/test_hardening.py.

Run inside a mount namespace of its own with a small tmpfs at ``FOLDER`` (``unshare``: see
``in_small_disk``), since only a real full disk refuses SQLite's WAL the room to grow::

    python tests/support/full_disk.py FOLDER DATA

It starts ``hbtui run`` on a database in ``FOLDER`` (``.env`` in the working folder), waits until
the run has stored a few replies, fills the disk to its last byte, waits for the run's end, and
prints one JSON object: the run's exit code and output, and ``hbtui runs`` afterwards.
"""

from __future__ import annotations

import errno
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path


def stored_replies(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1) as conn:
            return conn.execute("SELECT count(*) FROM conversations WHERE status = 'generated'").fetchone()[0]
    except sqlite3.Error:
        return 0  # not made yet, or busy


def fill(path: Path) -> None:
    """Every free byte of the disk taken: big chunks first, then pages."""
    with open(path, "wb", buffering=0) as handle:
        for size in (1 << 20, 4096, 1):
            chunk = bytes(size)
            try:
                while True:
                    handle.write(chunk)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise


def in_small_disk(folder: Path, size: str, argv: list[str]) -> list[str]:
    """``argv`` in a mount namespace where ``folder`` is a tmpfs of ``size``; [] where there is
    no ``unshare`` (the system may refuse the namespace too: the command then fails)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    script = f'mount -t tmpfs -o size={size} tmpfs "$0" && exec "$@"'
    return [unshare, "--mount", "--map-root-user", "sh", "-c", script, str(folder), *argv]


def main() -> None:
    folder, data = Path(sys.argv[1]), sys.argv[2]
    db = folder / "hbtui.sqlite"
    hbtui = [sys.executable, "-m", "hbtui"]
    run = subprocess.Popen(
        [*hbtui, "run", "--data", data, "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 60
    while stored_replies(db) < 5 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    filled = run.poll() is None
    if filled:
        fill(folder / "filler")
    output, _ = run.communicate(timeout=120)
    listed = subprocess.run([*hbtui, "runs", "--db", str(db)], capture_output=True, text=True, timeout=60)
    print(json.dumps({"filled": filled, "code": run.returncode, "output": output, "runs": listed.stdout}))


if __name__ == "__main__":
    main()
