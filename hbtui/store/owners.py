"""Who drives a run, and whether that process is still there.

An owner is ``host/pidns/boot:pid:start``:

- ``start`` is when the process started (in clock ticks since boot, from /proc): a pid reused
  by an unrelated process after a long time is then not mistaken for the driver;
- ``pidns`` is the PID namespace's id (the number in ``/proc/self/ns/pid``) and ``boot`` the
  kernel's boot id (``/proc/sys/kernel/random/boot_id``): a pid means something only inside
  its namespace and its boot. Containers or pods that share a host name, or a shell entered
  with ``docker exec``, see other pids; without these a live driver there counted as gone and
  was taken over at once, its calls paid twice.

The namespace and the boot sit inside the host part, so that an older hbtui reads the whole of
it as another host's name and goes by the heartbeat, never taking over a live driver. Owners
written by older versions (``host:pid:start``, ``host:pid``) still parse and behave as before;
where /proc is absent (macOS) an owner is ``host:pid`` as it always was.

On this host the process table is the truth: a driver that exists is alive, whatever its
heartbeat says. It may be stopped (Ctrl-Z, SIGSTOP), or blocked on a database lock so that it
cannot write its heartbeat; either way it holds answers it has paid for, and taking the run over
behind its back would have two processes drive one run. On another host (another name, PID
namespace or boot) the heartbeat is all we can go by; the lease (see ``writes.claim_run``)
fences the old driver if it comes back.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

GONE, STOPPED, RUNNING, REMOTE = "gone", "stopped", "running", "remote"

SPACE_SEPARATOR = "/"  # never in a host name (letters, digits, '-' and '.')
NAMESPACE_ID = re.compile(r"\d*")
BOOT_ID = re.compile(r"[0-9a-fA-F-]*")


@dataclass(frozen=True, slots=True)
class Owner:
    host: str
    pid: int
    start: int | None  # None: written by an older hbtui, or /proc is absent
    pid_namespace: str | None = None  # e.g. "4026531836"; None: an older hbtui, or not readable
    boot: str | None = None  # the kernel's boot id; None likewise

    def __str__(self) -> str:
        where = self.host
        if self.pid_namespace is not None or self.boot is not None:
            where = SPACE_SEPARATOR.join((self.host, self.pid_namespace or "", self.boot or ""))
        return f"{where}:{self.pid}" if self.start is None else f"{where}:{self.pid}:{self.start}"

    @property
    def label(self) -> str:
        """As shown to a user: the host and process id they can act on, and, when the host's name
        is this one's but its pids are not, why that pid is not to be looked for here."""
        shown = f"{self.host}:{self.pid}"
        if self.host != socket.gethostname():
            return shown
        pid_namespace, boot = this_space()
        if self.boot is not None and self.boot != boot:
            return f"{shown}, on another machine of this name or before a reboot"
        if self.pid_namespace is not None and self.pid_namespace != pid_namespace:
            return f"{shown}, in another PID namespace (another container of this name?)"
        return shown

    def on_this_host(self) -> bool:
        """Whether the owner's pid means here what it meant to the owner: the same host name and,
        where the owner said them, the same PID namespace and boot. An owner that said them
        where this process cannot read its own is taken for another host's: only its heartbeat
        tells."""
        if self.host != socket.gethostname():
            return False
        pid_namespace, boot = this_space()
        if self.pid_namespace is not None and self.pid_namespace != pid_namespace:
            return False
        return self.boot is None or self.boot == boot


def _split_space(where: str) -> tuple[str, str | None, str | None]:
    """(host, PID namespace, boot) of an owner's host part; a host alone for older owners."""
    parts = where.rsplit(SPACE_SEPARATOR, 2)
    if len(parts) == 3 and NAMESPACE_ID.fullmatch(parts[1]) and BOOT_ID.fullmatch(parts[2]):
        return parts[0], parts[1] or None, parts[2] or None
    return where, None, None


def parse_owner(text: str | None) -> Owner | None:
    if not text or ":" not in text:
        return None
    parts = text.split(":")
    if len(parts) >= 3 and parts[-1].isdigit() and parts[-2].isdigit():
        where, pid, start = ":".join(parts[:-2]), int(parts[-2]), int(parts[-1])
    elif parts[-1].isdigit():
        where, pid, start = ":".join(parts[:-1]), int(parts[-1]), None
    else:
        return None
    host, pid_namespace, boot = _split_space(where)
    return Owner(host, pid, start, pid_namespace, boot)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) of a process from /proc, or None where /proc has no entry."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[19])


@functools.cache
def this_space() -> tuple[str | None, str | None]:
    """(PID namespace id, boot id) of this process, each None where /proc does not tell it.

    Neither changes while a process lives: a process's PID namespace is the one it was born in.
    """
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        pid_namespace = None
    else:
        digits = link[link.find("[") + 1 : link.rfind("]")]
        pid_namespace = digits if digits.isdigit() else None
    try:
        boot: str | None = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = None
    if boot is not None and not (boot and BOOT_ID.fullmatch(boot)):
        boot = None
    return pid_namespace, boot


def this_owner() -> str:
    pid = os.getpid()
    stat = _proc_stat(pid)
    pid_namespace, boot = this_space()
    return str(Owner(socket.gethostname(), pid, stat[1] if stat else None, pid_namespace, boot))


def owner_state(text: str | None) -> str:
    """GONE, STOPPED, RUNNING (this host), or REMOTE (another host, PID namespace or boot: only
    its heartbeat tells)."""
    owner = parse_owner(text)
    if owner is None:
        return GONE
    if not owner.on_this_host():
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


def owner_label(text: str | None) -> str | None:
    """An owner as a user reads it (host:pid), or the stored text when it is no owner hbtui wrote."""
    owner = parse_owner(text)
    return owner.label if owner else text
