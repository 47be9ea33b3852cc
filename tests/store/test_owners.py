"""An owner names a process where its pid means something: host name, PID namespace and boot.

Owners written by older versions (``host:pid:start``, ``host:pid``) still read and behave as
before; an older version reading a new owner takes it for another host's (it goes by the
heartbeat, never by a pid it cannot see). The takeover itself, in a real database, is in
tests/engine/test_reliability.py.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from hbtui.store import owners
from hbtui.store.owners import GONE, REMOTE, RUNNING, Owner, owner_label, owner_state, parse_owner, this_owner

HAS_PROC = Path("/proc/self/ns/pid").exists() and Path("/proc/sys/kernel/random/boot_id").exists()
BOOT = "94f8d445-ebf3-4dbd-910f-306e57f0ccfb"


def _start_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[19])


def _no_such_pid() -> int:
    """A pid above the kernel's largest: no process has it, here or anywhere."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def _another(namespace_or_boot: str) -> str:
    return str(int(namespace_or_boot) + 1) if namespace_or_boot.isdigit() else namespace_or_boot[::-1]


@pytest.mark.parametrize(
    ("text", "owner"),
    [
        (f"box/4026531836/{BOOT}:123:456", Owner("box", 123, 456, "4026531836", BOOT)),
        ("box/4026531836/:123:456", Owner("box", 123, 456, "4026531836", None)),
        (f"box//{BOOT}:123:456", Owner("box", 123, 456, None, BOOT)),
        (f"box/4026531836/{BOOT}:123", Owner("box", 123, None, "4026531836", BOOT)),
        # A host name with colons is read from the right, with or without the new fields.
        (f"fe80::1/4026531836/{BOOT}:123:456", Owner("fe80::1", 123, 456, "4026531836", BOOT)),
        # Older versions' owners.
        ("box:123:456", Owner("box", 123, 456)),
        ("box:123", Owner("box", 123, None)),
        ("fe80::1:123:456", Owner("fe80::1", 123, 456)),
    ],
)
def test_an_owner_reads_back_as_it_was_written_in_every_format(text, owner):
    assert parse_owner(text) == owner
    assert str(owner) == text


@pytest.mark.parametrize("text", [None, "", "box", "box:abc", "box:123:"])
def test_text_that_names_no_process_is_no_owner(text):
    assert parse_owner(text) is None
    assert owner_state(text) == GONE


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc for the PID namespace and the boot id")
def test_this_process_writes_its_pid_namespace_and_boot_and_reads_itself_back_as_running():
    owner = parse_owner(this_owner())
    assert owner is not None
    namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    assert owner == Owner(
        socket.gethostname(),
        os.getpid(),
        _start_of(os.getpid()),
        namespace[namespace.index("[") + 1 : -1],
        Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
    )
    assert owner_state(this_owner()) == RUNNING
    assert owner.label == f"{socket.gethostname()}:{os.getpid()}"


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc for the PID namespace and the boot id")
def test_an_older_version_reads_a_new_owner_as_another_hosts_so_it_goes_by_the_heartbeat():
    # What every older version does: the last two fields are pid and start, the rest the host.
    host, pid, start = this_owner().rsplit(":", 2)
    assert pid == str(os.getpid()) and start.isdigit()
    assert host != socket.gethostname()


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc for the PID namespace and the boot id")
def test_an_owner_of_an_older_version_on_this_host_behaves_as_before():
    host, pid, start = socket.gethostname(), os.getpid(), _start_of(os.getpid())
    assert owner_state(f"{host}:{pid}:{start}") == RUNNING
    assert owner_state(f"{host}:{pid}") == RUNNING
    assert owner_state(f"{host}:{pid}:{start + 1}") == GONE  # the pid was reused
    assert owner_state(f"{host}:{_no_such_pid()}") == GONE


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc for the PID namespace and the boot id")
def test_a_pid_of_another_pid_namespace_or_boot_is_another_hosts_whether_or_not_it_is_a_process_here():
    own = parse_owner(this_owner())
    assert own is not None and own.pid_namespace is not None and own.boot is not None
    other_namespace = Owner(own.host, own.pid, own.start, _another(own.pid_namespace), own.boot)
    other_boot = Owner(own.host, own.pid, own.start, own.pid_namespace, _another(own.boot))
    for owner in (other_namespace, other_boot):
        assert owner_state(str(owner)) == REMOTE  # this very pid is alive here: it is not that one
        gone_here = Owner(owner.host, _no_such_pid(), None, owner.pid_namespace, owner.boot)
        assert owner_state(str(gone_here)) == REMOTE  # no such pid here says nothing of there
    assert other_namespace.label == f"{own.host}:{own.pid}, in another PID namespace (another container of this name?)"
    assert other_boot.label == f"{own.host}:{own.pid}, on another machine of this name or before a reboot"
    # Shown to a user without the ids.
    assert owner_label(str(other_namespace)) == other_namespace.label
    assert owner_label("not an owner") == "not an owner"


def test_without_proc_an_owner_is_host_and_pid_as_it_always_was(monkeypatch):
    monkeypatch.setattr(owners, "this_space", lambda: (None, None))
    monkeypatch.setattr(owners, "_proc_stat", lambda pid: None)
    assert this_owner() == f"{socket.gethostname()}:{os.getpid()}"
    # An owner that said its namespace is then one this process cannot place: its heartbeat tells.
    assert owner_state(f"{socket.gethostname()}/4026531836/{BOOT}:{os.getpid()}") == REMOTE
