"""A run's answer journal: each paid answer on disk from the moment it is received until the
group commit that stores it.

The engine's writer commits every 150 ms (hbtui.engine.result_writer): a SIGKILL took the
answers received since the last commit with it, and the resume paid for them again. Each answer is
appended here first, as the writer will store it (its text already redacted), with one
``os.write`` on a file opened ``O_APPEND``: once that returns, the bytes are in the kernel's
page cache, which a killed process does not take with it. No fsync: only a crash of the machine
loses the page cache, and the database's own commits (WAL, ``synchronous=NORMAL``) are not
flushed to the disk either; a flush per answer would cost a disk write per call.

A run's journal is two files beside its database, ``<database>.answers-run<id>.0`` and ``.1``
(owner-only, 0600; named so as never to be taken for SQLite's ``-journal``, ``-wal`` or
``-shm``). Answers go to one while the writer commits what the other holds, which is emptied once
that commit is done: neither holds more than a commit group or two. A line is a record:
the CRC-32 of its JSON text, a space, the JSON text (no newline inside: JSON escapes them), a
newline; a line cut short by a kill, or damaged, is ignored. An append is one ``write`` of a few
kilobytes to the page cache: some 25 microseconds, against the millisecond of CPU a call costs.

Only the process that holds the run's lease reads a journal (hbtui.engine.result_writer): the
answers of it that the database does not have are stored, under the lease, then the files are
made anew. A record names its run by id and creation time (ids are reused after a delete) and
the lease it was received under; see ``StoreWrites.recover_answers`` for why a record of any
earlier lease is safe to store, once.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, fields
from operator import attrgetter
from pathlib import Path

import orjson

from hbtui.store.work import ReplyResult, VerdictResult

SLOTS = (0, 1)
# A record holds an answer's fields as a list, in its class's order (a dict of them took twice as
# long to encode), under the CRC-32 of their names: a record written by a version whose fields
# differ is not read as this one's (it is ignored, and its call asked again).
_FIELDS = {"reply": fields(ReplyResult), "verdict": fields(VerdictResult)}
_LAYOUT = {kind: zlib.crc32(",".join(f.name for f in found).encode()) for kind, found in _FIELDS.items()}
_VALUES = {kind: attrgetter(*(f.name for f in found)) for kind, found in _FIELDS.items()}
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def journal_paths(db_path: str | Path, run_id: int) -> tuple[Path, ...]:
    return tuple(Path(f"{db_path}.answers-run{run_id}.{slot}") for slot in SLOTS)


def remove_journal(db_path: str | Path, run_id: int) -> None:
    for path in journal_paths(db_path, run_id):
        path.unlink(missing_ok=True)


def encode(run_id: int, created_at: float, lease: str | None, answer: ReplyResult | VerdictResult) -> bytes:
    """One record, its line ending included: [run, created, lease, kind, layout, [fields...]]."""
    kind = "reply" if type(answer) is ReplyResult else "verdict"
    # orjson: a fifth of json.dumps's CPU, once per answer (its floats read back the same; a
    # value it cannot write, a lone surrogate, raises TypeError: that answer is not journaled).
    text = orjson.dumps([run_id, created_at, lease, kind, _LAYOUT[kind], _VALUES[kind](answer)])
    return b"%08x %s\n" % (zlib.crc32(text), text)


@dataclass(frozen=True, slots=True)
class Record:
    run_id: int
    created_at: float
    lease: str | None
    answer: ReplyResult | VerdictResult


def decode(line: bytes) -> Record | None:
    """The record of a whole line, or None: cut short, damaged, or not one of this version's."""
    crc, _, text = line.partition(b" ")
    try:
        if len(crc) != 8 or int(crc, 16) != zlib.crc32(text):
            return None
        run_id, created_at, lease, kind, layout, values = json.loads(text)
        if layout != _LAYOUT.get(kind):
            return None
        answer = ReplyResult(*values) if kind == "reply" else VerdictResult(*values)
    except (ValueError, TypeError, RecursionError):  # not a record's JSON, or not its shape
        return None
    return Record(run_id, created_at, lease, answer)


@dataclass(frozen=True, slots=True)
class Journaled:
    """What a run's journal holds: its whole records' answers, and the lines it ignored."""

    replies: list[ReplyResult]
    verdicts: list[VerdictResult]
    ignored: int  # lines cut short by a kill, or damaged


def read_journal(db_path: str | Path, run_id: int, created_at: float) -> Journaled:
    """The answers of this run (its id and creation time) in its journal files, in the order
    received."""
    replies: list[ReplyResult] = []
    verdicts: list[VerdictResult] = []
    ignored = 0
    for path in journal_paths(db_path, run_id):
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            continue
        lines = content.split(b"\n")
        ignored += lines[-1] != b""  # the last line without its newline: its write was cut short
        for line in lines[:-1]:
            record = decode(line)
            if record is None:
                ignored += 1
            elif record.run_id != run_id or record.created_at != created_at:
                continue  # another run's: one of the same id, deleted since
            elif isinstance(record.answer, ReplyResult):
                replies.append(record.answer)
            else:
                verdicts.append(record.answer)
    replies.sort(key=lambda reply: reply.generated_at)
    verdicts.sort(key=lambda verdict: verdict.graded_at)
    return Journaled(replies, verdicts, ignored)


class AnswerJournal:
    """The journal files of the run this process drives, open for appending (see the module)."""

    def __init__(self, db_path: str | Path, run_id: int, created_at: float, lease: str | None) -> None:
        """A fresh journal: whatever files the run had are replaced by empty ones (read them,
        and store what they hold, first)."""
        self.run_id, self.created_at, self.lease = run_id, created_at, lease
        self.paths = journal_paths(db_path, run_id)
        self._fds: list[int] = []
        try:
            for path in self.paths:
                # A new file each time: a process that held the run before and still writes to
                # its old ones (a takeover it has not noticed yet) writes into files nobody reads.
                path.unlink(missing_ok=True)
                fd = os.open(path, _FLAGS | os.O_EXCL, 0o600)
                self._fds.append(fd)
                os.fchmod(fd, 0o600)  # whatever the umask
        except BaseException:
            self._close_files()
            raise
        self._current = 0  # the file answers go to
        self._sealed: int | None = None  # the file whose records the commit under way stores
        self._held = [0, 0]  # records in each file

    def append(self, answer: ReplyResult | VerdictResult) -> None:
        """One write, before the answer waits for its commit. A verdict served from the cache
        cost nothing and is served again on a resume: not journaled."""
        if type(answer) is VerdictResult and answer.from_cache:
            return
        current = self._current
        try:
            record = memoryview(encode(self.run_id, self.created_at, self.lease, answer))
        except (TypeError, ValueError):  # a field JSON cannot hold: committed all the same, only not kept here
            return
        while record:  # one write, but for a disk that takes part of it (full): then the rest
            record = record[os.write(self._fds[current], record) :]
        self._held[current] += 1

    def seal(self) -> None:
        """A commit takes everything handed over so far: what comes next goes to the other file
        (empty: emptied after the previous commit). A commit tried again keeps its file sealed."""
        if self._sealed is None and self._held[self._current]:
            self._sealed = self._current
            self._current ^= 1

    def committed(self) -> None:
        """The commit of the sealed file's records is done: they are in the database."""
        sealed = self._sealed
        if sealed is not None:
            os.ftruncate(self._fds[sealed], 0)
            self._held[sealed] = 0
            self._sealed = None

    def close(self, *, remove: bool) -> None:
        """``remove``: everything the journal held is committed (the run's last commit)."""
        self._close_files()
        if remove:
            for path in self.paths:
                path.unlink(missing_ok=True)

    def _close_files(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []
