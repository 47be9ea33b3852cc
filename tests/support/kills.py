"""What a SIGKILL of a run cost, from the test server's side (its ``written_log``: when it wrote
each answer's last byte): which calls were truly in flight, which answers the killed process
had been sent whole, and which of those were still unread in its sockets."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


def written_answers(log: Path) -> list[tuple[tuple[str, str], float]]:
    """((kind, sha256 of the request body), when its last byte was written) of every answer."""
    if not log.exists():
        return []
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [((entry["kind"], entry["sha256"]), entry["written_at"]) for entry in entries]


def unread_connections(port: int) -> int | None:
    """Connections to the server's ``port`` on this machine whose client has bytes it has not
    read (Linux's /proc/net/tcp): one answer each at most, as HTTP/1.1 sends one at a time.
    None where that table cannot be read."""
    try:
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    unread = 0
    for row in table:
        fields = row.split()
        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
        rx_queue = int(fields[4].split(":")[1], 16)
        unread += remote_port == port and rx_queue > 0
    return unread


def stop_then_kill(process: subprocess.Popen, port: int) -> tuple[float, int | None]:
    """SIGKILL, once SIGSTOP has frozen the process and what it had not read of its sockets has
    been counted: (the moment it stopped reading, answers unread in its sockets then)."""
    process.send_signal(signal.SIGSTOP)
    time.sleep(0.005)  # the signal delivered: it reads nothing more
    stopped_at, unread = time.time(), unread_connections(port)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return stopped_at, unread


@dataclass(frozen=True)
class Killed:
    """A killed process of a run: from its start to its death, the calls it sent (as the server
    counted them) and how many of the answers it received were in the database when it died."""

    started_at: float
    died_at: float  # stopped (SIGSTOP) for good: it read nothing more
    sent: int
    committed: int
    unread: int | None  # its connections holding answer bytes it had not read; None: not known


@dataclass(frozen=True)
class KillGap:
    sent: int
    committed: int
    not_stored: int  # answers written whole by the server before the kill, not in the database then
    in_flight: int  # calls sent whose answer the server had not yet written whole at the kill
    answered_asked_again: int  # requests answered before a kill and asked again after it
    unread: int | None  # answers in a socket buffer at the kills (a connection holding unread bytes)


def kill_gap(killed: list[Killed], written: list[tuple[tuple[str, str], float]], baseline: Counter) -> KillGap:
    """What the kills cost, from the server's side: a call is in flight while its answer has not
    been written whole; one answered and not stored is the gap a journal closes. A request the
    uninterrupted run asked more than once (the same body twice) is left out of the asked-again
    count, which cannot tell its answers apart."""
    sent = committed = not_stored = in_flight = asked_again = 0
    for process in killed:
        answered = [request for request, at in written if process.started_at <= at <= process.died_at]
        later = {request for request, at in written if at > process.died_at}
        sent += process.sent
        committed += process.committed
        not_stored += len(answered) - process.committed
        in_flight += process.sent - len(answered)
        asked_again += sum(request in later and baseline[request] <= 1 for request in set(answered))
    unread = None if any(process.unread is None for process in killed) else sum(p.unread or 0 for p in killed)
    return KillGap(sent, committed, not_stored, in_flight, asked_again, unread)
