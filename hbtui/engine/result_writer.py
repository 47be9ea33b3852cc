"""The one task that stores a run's results: group commit under the run's lease.

Each completed call is handed over as a typed record (hbtui.store.work); everything queued
since the last commit goes in one transaction, so under light load every result commits at
once and under heavy load many share one. What is committed is never asked again, so resuming
a killed run does only the missing work. A paid answer is also written to the run's answer
journal (hbtui.store.answer_journal) as it is handed over: one killed before its commit is
stored from there by the resume, not asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from hbtui.core.live import LiveSnapshot
from hbtui.store import (
    ConversationScore,
    LogLine,
    ReplyResult,
    ResultBatch,
    Store,
    StoreError,
    VerdictResult,
)
from hbtui.store.answer_journal import AnswerJournal, read_journal

# How often the driver writes its live figures; settable for tests only (HBTUI_HEARTBEAT_SECONDS),
# which show that a pause or resume is written at once rather than with the next beat.
HEARTBEAT_SECONDS = float(os.environ.get("HBTUI_HEARTBEAT_SECONDS") or 2.0)
# No new call goes out unless a write confirmed, this recently, that this process still holds
# the run's lease (three heartbeats). A driver stopped (Ctrl-Z) and taken over meanwhile then sends
# nothing new when it goes on: it learns of the takeover first, and only its calls in flight were
# paid twice.
LEASE_CONFIRM_SECONDS = 6.0


# A commit's SQLite work is mostly per page, not per row: the verdicts' indexes and the verdict
# cache are B-trees keyed by criterion text and by a hash, so the rows of one commit land on pages
# all over them, and a page touched by many rows is written once. The main subset's 9,545 answers
# took 0.41 s of SQLite's CPU in commits of 56 (50 ms apart at 1,100 answers a second) and 0.28 s
# in commits of 150. The answers waiting meanwhile are in the answer journal, and a batch that
# grows to half the writer's limit is committed at once (see ResultWriter.put_answer).
DEFAULT_COMMIT_INTERVAL = 0.15


def _commit_interval() -> tuple[float, bool]:
    """(seconds at least from the end of one commit to the start of the next, whether a batch
    half the writer's limit goes at once). For tests only, HBTUI_COMMIT_INTERVAL sets the interval
    and holds every batch to it: a long interval holds answers received and not committed until
    the gate stops new calls, so that a test can kill a run between the two."""
    given = os.environ.get("HBTUI_COMMIT_INTERVAL")
    if not given:
        return DEFAULT_COMMIT_INTERVAL, True
    try:
        return max(0.0, float(given)), False
    except ValueError:
        return DEFAULT_COMMIT_INTERVAL, True


COMMIT_INTERVAL, COMMIT_EARLY = _commit_interval()

Result = ReplyResult | VerdictResult | ConversationScore | LogLine


@dataclass(slots=True, frozen=True)
class Heartbeat:
    live: LiveSnapshot  # the live figures for monitors in other processes; only the newest counts


def database_locked(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock; trying later may work."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


@dataclass
class PendingBatch:
    """What the writer commits in one transaction; kept whole while the database is locked."""

    results: ResultBatch = field(default_factory=ResultBatch)
    heartbeat: LiveSnapshot | None = None
    done: bool = False  # the run is closing: this is the last batch
    lock_noted: bool = False

    @property
    def empty(self) -> bool:
        return not self.results and self.heartbeat is None

    def add(self, entry: Result | Heartbeat | None) -> None:
        results = self.results
        if entry is None:
            self.done = True
        elif type(entry) is VerdictResult:
            results.verdicts.append(entry)
        elif type(entry) is ReplyResult:
            results.replies.append(entry)
        elif type(entry) is ConversationScore:
            results.scores.append(entry)
        elif type(entry) is LogLine:
            results.log.append(entry)
        elif type(entry) is Heartbeat:
            self.heartbeat = entry.live
        else:
            raise TypeError(f"not a result: {entry!r}")


@dataclass(eq=False)
class ResultWriter:
    """Takes a run's results as they come and commits them in groups.

    While another connection holds the database's write lock past the busy timeout, the batch
    is kept and tried again, growing with what arrives meanwhile; ``behind`` then holds new calls
    back (the driver's gate). Only after ``patience`` seconds of that does the writer stop, saying
    how many answers it could not store.
    """

    store: Store
    run_id: int
    patience: float
    # Past this many paid answers not yet stored, no new call is sent until they are.
    max_unwritten: int
    on_written: Callable[[], None]
    on_warning: Callable[[str], None]
    # Awaited before the first commit: the run's plan, when calls went out while it was stored.
    ready: Awaitable[object] | None = None
    lease: str | None = field(default=None, init=False)  # given by claim_run: every write is fenced by it
    # Entries handed over so far, and how many of them the last commit included: whatever was
    # handed over before ``queued`` read n is committed once ``committed`` reaches n.
    queued: int = field(default=0, init=False)
    committed: int = field(default=0, init=False)
    unwritten: int = field(default=0, init=False)
    confirmed_at: float = field(default_factory=time.monotonic, init=False)  # of the last write under the lease
    _confirming: bool = field(default=False, init=False)
    _queue: asyncio.Queue[Result | Heartbeat | None] = field(default_factory=asyncio.Queue, init=False)
    _committed_at: float = field(default=-math.inf, init=False)  # of the last commit
    _closing: bool = field(default=False, init=False)
    # Set to commit without waiting out the interval: on close, and once half of max_unwritten
    # answers wait (the gate closes at max_unwritten: a fast endpoint at low concurrency would
    # otherwise be held to max_unwritten answers an interval).
    _commit_now: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    # Every paid answer handed over and not yet committed is also in it (None: not kept, as in
    # a writer of the tests, or a journal that could not be written).
    journal: AnswerJournal | None = field(default=None, init=False)

    def start_journal(self, created_at: float) -> None:
        """The run's journal, new and empty, before its first call (``created_at``: the run's)."""
        try:
            self.journal = AnswerJournal(self.store.path, self.run_id, created_at, self.lease)
        except OSError as exc:
            self._journal_failed(f"the answer journal beside {self.store.path} cannot be created ({exc})")

    async def recover_journal(self, created_at: float) -> int:
        """Once this process holds the run's lease (claim_run), and before its first call: the
        answers an earlier process of the run journaled and never committed are stored, under
        the lease, then the journal starts anew. Returns how many were stored."""
        assert self.lease is not None, "only the process that holds the run's lease reads its journal"
        try:
            journaled = await asyncio.to_thread(read_journal, self.store.path, self.run_id, created_at)
        except OSError as exc:
            self._journal_failed(f"the answer journal of run {self.run_id} cannot be read ({exc})")
            return 0
        stored = 0
        if journaled.replies or journaled.verdicts:
            stored = await self.store.recover_answers(
                journaled.replies, journaled.verdicts, run_id=self.run_id, lease=self.lease
            )
        if journaled.ignored:
            self.log(
                "info", f"{journaled.ignored} lines of the answer journal cut short (by a kill) or damaged: ignored"
            )
        self.start_journal(created_at)  # only now: what the old files held is committed
        return stored

    def _journal_failed(self, message: str) -> None:
        """Without its journal the run goes on as before it had one: the answers received and
        not committed when it is killed are asked again."""
        self._drop_journal(remove=False)  # what it holds is not all committed
        message += "; answers not yet committed at a kill will be asked again"
        self.log("warning", message)
        self.on_warning(message)

    def _enqueue(self, entry: Result | Heartbeat) -> None:
        self.queued += 1
        self._queue.put_nowait(entry)

    def put(self, entry: Result) -> None:
        """A record that costs nothing to ask again: a score, a log line, a cache entry."""
        self._enqueue(entry)

    def put_answer(self, entry: ReplyResult | VerdictResult) -> None:
        """A paid answer: counted until it is committed, and journaled meanwhile."""
        self.unwritten += 1
        if self._commit_due():
            self._commit_now.set()
        if self.journal is not None:
            try:
                self.journal.append(entry)
            except OSError as exc:
                self._journal_failed(f"the answer journal of run {self.run_id} cannot be written ({exc})")
        self._enqueue(entry)

    def heartbeat(self, live: LiveSnapshot) -> None:
        self._enqueue(Heartbeat(live))

    def log(self, level: str, message: str) -> None:
        self._enqueue(LogLine(self.run_id, time.time(), level, message))

    async def close(self) -> None:
        self._closing = True
        self._commit_now.set()
        await self._queue.put(None)

    def _commit_due(self) -> bool:
        """Whether the next commit goes without waiting out the interval (see _commit_now)."""
        return self._closing or (COMMIT_EARLY and self.unwritten * 2 >= self.max_unwritten)

    @property
    def behind(self) -> bool:
        return self.unwritten >= self.max_unwritten

    def lease_unconfirmed(self, live: Callable[[], LiveSnapshot]) -> bool:
        """Whether no write confirmed the lease lately; asks the writer to confirm it if so."""
        unconfirmed = time.monotonic() - self.confirmed_at > LEASE_CONFIRM_SECONDS
        if unconfirmed and not self._confirming:
            self._confirming = True
            self.heartbeat(live())
        return unconfirmed

    async def run(self) -> None:
        """Until closed: each transaction is fenced by the run's lease (a takeover stops this
        driver at its next write)."""
        try:
            await self._commit_until_closed()
        finally:
            # Stopped before its last commit (a store error, a takeover): the files stay for the
            # resume, which stores what they hold that the database lacks.
            self._drop_journal(remove=False)

    def _journal_done(self) -> None:
        """Everything handed over is committed and nothing more comes: the journal goes."""
        self._drop_journal(remove=True)  # files left behind would hold only what is committed

    def _drop_journal(self, *, remove: bool) -> None:
        """No more journaling; ``remove``: its files go too (everything they held is committed)."""
        journal, self.journal = self.journal, None
        if journal is not None:
            with contextlib.suppress(OSError):
                journal.close(remove=remove)

    async def _commit_until_closed(self) -> None:
        if self.ready is not None:
            try:
                await asyncio.shield(self.ready)  # a cancelled writer must not cancel what it waited on
            except Exception:
                self._journal_done()  # the run was never stored: nothing to resume
                raise
        queue = self._queue
        batch = PendingBatch()
        locked_since: float | None = None
        while True:
            if batch.empty and not batch.done:
                batch.add(await queue.get())
            since = time.monotonic() - self._committed_at
            if since < COMMIT_INTERVAL and not batch.done and not self._commit_now.is_set():
                # At a thousand answers a second, a commit as soon as the last one ended was
                # hundreds of small transactions, each a few hand-overs to SQLite's thread; what
                # completes meanwhile joins this one instead. The first commit, and one after a
                # quiet spell, go at once; a close, or a batch half the limit, does not wait.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._commit_now.wait(), COMMIT_INTERVAL - since)
            while not queue.empty():
                batch.add(queue.get_nowait())
            if batch.empty:  # closed, with nothing since the last commit
                self._journal_done()
                return
            through = self.queued  # the queue is empty: everything handed over is in this batch or committed
            journal = self.journal
            if journal is not None:
                journal.seal()  # what is journaled from now on is not in this batch
            attempt_started = time.monotonic()
            try:
                await self.store.write_batch(batch.results, run_id=self.run_id, lease=self.lease, live=batch.heartbeat)
            except sqlite3.OperationalError as exc:
                if not database_locked(exc):
                    raise
                locked_since = locked_since or attempt_started
                waited = time.monotonic() - locked_since
                answers = batch.results.results
                if waited >= self.patience:
                    raise StoreError(
                        f"the database {self.store.path} stayed locked by another connection for {waited:.0f} s"
                        f" (DB_WRITE_PATIENCE {self.patience:g} s); {answers} answers received meanwhile could"
                        " not be stored"
                        + (
                            " and will be asked again on resume"
                            if self.journal is None
                            else ": they are kept in the run's answer journal, and the resume stores them"
                        )
                    ) from None
                if not batch.lock_noted:
                    batch.lock_noted = True
                    message = (
                        f"the database is locked by another connection: keeping {answers} answers in"
                        f" memory, no new calls until they are stored (gives up after {self.patience:g} s)"
                    )
                    batch.results.log.append(LogLine(self.run_id, time.time(), "warning", message))
                    self.on_warning(message)
                await asyncio.sleep(0.2)
                continue
            locked_since = None
            # The lease held when this transaction began (its fence is inside it): trusted from
            # then, not from when this loop heard of the commit, which a process stopped between
            # the two hears late, maybe after another took the run over meanwhile.
            self.confirmed_at, self._confirming = attempt_started, False
            self._committed_at = time.monotonic()
            self.committed = through
            self.unwritten -= batch.results.results
            if not self._commit_due():
                self._commit_now.clear()
            if journal is not None and journal is self.journal:
                try:
                    journal.committed()
                except OSError as exc:
                    self._journal_failed(f"the answer journal of run {self.run_id} cannot be emptied ({exc})")
            self.on_written()
            if batch.done:
                self._journal_done()
                return
            batch = PendingBatch()
