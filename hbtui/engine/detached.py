"""A run driven in a process of its own, apart from the app that started it.

hbtui is used over SSH on remote boxes: a run started from the app must not end with the app, its
terminal or the SSH session. So the app does not drive it; it starts `hbtui _drive`, in a session
of its own (no controlling terminal: a hangup never reaches it, and it ignores SIGHUP besides),
with stdin from /dev/null and its output in a log file beside the run folders. The app then
watches it as `hbtui monitor` watches any run, through the database.

The settings are a snapshot of what the app had when the run started: a private (0600) file the
driver reads once and removes. API keys are not in it, nor on the command line, where `ps` would
show them to every user of the machine: they reach the driver through its environment, which
only its own user can read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from hbtui.core.invocation import INVOKED_AS_VARIABLE, invoked_as
from hbtui.core.settings.config import SETTINGS, Settings
from hbtui.store import RunRow, Store

DRIVE_COMMAND = "_drive"  # hidden: only the launcher below runs it
KEYS_VARIABLE = "HBTUI_DRIVER_KEYS"  # the API keys, as JSON, in the driver's environment
SECRETS = tuple(setting.attribute for setting in SETTINGS if setting.secret)


@dataclass(frozen=True)
class DetachedRun:
    """A driver this process started: it may outlive this process, which only watches it."""

    run_id: int
    process: subprocess.Popen
    log: Path
    launched_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.process.pid

    def going(self) -> bool:
        """Whether the driver still runs (and, once it has ended, reaped: no zombie is left)."""
        return self.process.poll() is None

    def stop(self) -> None:
        """Stop it as Ctrl-C stops `hbtui run`: what completed is saved, the run is resumable."""
        if self.going():
            self.process.send_signal(signal.SIGTERM)


def log_path(db_path: str, run: RunRow) -> Path:
    """`run-ID-NAME.log` beside the run folders (they go beside the database). A run driven again
    (continued, retried) appends to the log it has. Absolute: `hbtui runs` may be typed elsewhere."""
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run.name)[:80]
    return Path(db_path).absolute().parent / f"run-{run.id}-{safe_name}.log"


def write_snapshot(run_id: int, settings: Settings, use_cache: bool) -> str:
    without_keys = {name: value for name, value in asdict(settings).items() if name not in SECRETS}
    fd, path = tempfile.mkstemp(prefix="hbtui-run-", suffix=".json")  # 0600, owner-only
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"run_id": run_id, "use_cache": use_cache, "settings": without_keys}, handle)
    return path


async def launch_detached(store: Store, run: RunRow, settings: Settings, *, use_cache: bool = False) -> DetachedRun:
    """Start a process that drives the planned ``run`` with ``settings`` (a snapshot of them)."""
    log = log_path(settings.db_path, run)
    await store.set_driver_log(run.id, str(log))  # first: a database that takes no write starts nothing
    snapshot = write_snapshot(run.id, settings, use_cache)
    environment = dict(os.environ)
    environment[KEYS_VARIABLE] = json.dumps({name: getattr(settings, name) for name in SECRETS})
    environment[INVOKED_AS_VARIABLE] = invoked_as()  # its hints name hbtui as the user runs it
    try:
        log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "hbtui", DRIVE_COMMAND, snapshot],
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,  # no controlling terminal: its hangup, its Ctrl-C, never reach the run
                close_fds=True,
            )
        finally:
            os.close(log_fd)
    except BaseException:
        Path(snapshot).unlink(missing_ok=True)
        raise
    return DetachedRun(run.id, process, log)


def read_snapshot(path: str) -> tuple[int, Settings, bool]:
    """In the driver: (run id, settings, use_cache) from the snapshot, which is removed once
    read, and the keys from the environment, which is cleared of them."""
    snapshot = Path(path)
    try:
        data = json.loads(snapshot.read_text(encoding="utf-8"))
    finally:
        snapshot.unlink(missing_ok=True)
    keys = json.loads(os.environ.pop(KEYS_VARIABLE, "{}"))
    settings = replace(Settings(**data["settings"]), **{name: keys.get(name) for name in SECRETS})
    return int(data["run_id"]), settings, bool(data["use_cache"])
