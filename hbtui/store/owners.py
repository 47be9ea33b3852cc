"""Who drives a run, and whether that process is still there.

An owner is ``host:pid:start``, where ``start`` is when the process started (in clock ticks
since boot, from /proc): a pid reused by an unrelated process after a reboot or a long time is
then not mistaken for the driver. Owners written by older versions (``host:pid``) still parse.

On this host the process table is the truth: a driver that exists is alive, whatever its
heartbeat says. It may be stopped (Ctrl-Z, SIGSTOP), or blocked on a database lock so that it
cannot write its heartbeat; either way it holds answers it has paid for, and taking the run over
behind its back would have two processes drive one run. On another host the heartbeat is all we
can go by; the lease (see ``writes.claim_run``) fences the old driver if it comes back.
"""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

GONE, STOPPED, RUNNING, REMOTE = "gone", "stopped", "running", "remote"


@dataclass(frozen=True, slots=True)
class Owner:
    host: str
    pid: int
    start: int | None  # None: written by an older hbtui, or /proc is absent

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}" if self.start is None else f"{self.host}:{self.pid}:{self.start}"

    @property
    def label(self) -> str:
        """As shown to a user: the host and process id they can act on."""
        return f"{self.host}:{self.pid}"


def parse_owner(text: str | None) -> Owner | None:
    if not text or ":" not in text:
        return None
    parts = text.split(":")
    if len(parts) >= 3 and parts[-1].isdigit() and parts[-2].isdigit():
        return Owner(":".join(parts[:-2]), int(parts[-2]), int(parts[-1]))
    if parts[-1].isdigit():
        return Owner(":".join(parts[:-1]), int(parts[-1]), None)
    return None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) of a process from /proc, or None where /proc has no entry."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[19])


def this_owner() -> str:
    pid = os.getpid()
    stat = _proc_stat(pid)
    return str(Owner(socket.gethostname(), pid, stat[1] if stat else None))


def owner_state(text: str | None) -> str:
    """GONE, STOPPED, RUNNING (this host), or REMOTE (another host: only its heartbeat tells)."""
    owner = parse_owner(text)
    if owner is None:
        return GONE
    if owner.host != socket.gethostname():
        return REMOTE
    if Path("/proc/self/stat").exists():
        stat = _proc_stat(owner.pid)
        if stat is None:
            return GONE
        state, start = stat
        if owner.start is not None and start != owner.start:
            return GONE  # the pid was reused by another process
        if state == "Z":
            return GONE
        return STOPPED if state in ("T", "t") else RUNNING
    try:  # no /proc (macOS): the process table through kill(0) and ps
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return GONE
    except PermissionError:
        pass
    try:
        state = subprocess.run(
            ["ps", "-o", "stat=", "-p", str(owner.pid)], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return RUNNING
    return STOPPED if state.startswith("T") else RUNNING


def owner_alive(text: str | None) -> bool:
    """False when the owner ran on this machine and its process is gone (killed, crashed)."""
    return owner_state(text) != GONE
