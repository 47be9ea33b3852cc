"""The files a run submits to a provider's batch API, recorded so that nothing is lost and nothing
is paid twice (hbtui.engine.batch_api).

A submission is recorded with what its file holds before the file is uploaded (``written``), then
its file id (``uploaded``) and its batch id (``submitted``) in their own commits the moment each is
known, and ``imported`` once the batch's answers are stored. A request that an open submission
holds is never written into another file. Every write is fenced by the run's lease, as a call's
answer is: a process that was taken over writes nothing more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final, Literal

from hbtui.store.writes import StoreWrites

SubmissionState = Literal["written", "uploaded", "submitted", "imported"]
WRITTEN: Final = "written"
UPLOADED: Final = "uploaded"
SUBMITTED: Final = "submitted"
IMPORTED: Final = "imported"
OPEN_STATES: Final = (WRITTEN, UPLOADED, SUBMITTED)
REPLY_IDX: Final = -1  # a batch line that asks for a conversation's reply, not a verdict

SUBMISSION_COLUMNS = (
    "id, run_id, number, stage, model, endpoint, path, lines, sha256, state, file_id, batch_id, batch_status,"
    " total, completed, failed, written_at, submitted_at, expires_at, ended_at, error"
)


@dataclass(frozen=True, slots=True)
class Submission:
    id: int
    run_id: int
    number: int  # 1, 2, ... within the run: the batch's metadata names it
    stage: str  # generation or grading
    model: str
    endpoint: str  # the base URL the batch went to (never its key)
    path: str  # the request file on disk
    lines: int
    sha256: str
    state: SubmissionState
    file_id: str | None
    batch_id: str | None
    batch_status: str | None  # as the provider last said: validating, in_progress, ... completed
    total: int
    completed: int
    failed: int
    written_at: float
    submitted_at: float | None
    expires_at: float | None  # the end of the batch's completion window
    ended_at: float | None
    error: str | None  # a batch failed at validation: what the provider said

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES


class StoreBatchSubmissions(StoreWrites):
    async def submissions(self, run_id: int) -> list[Submission]:
        rows = await self._all(
            f"SELECT {SUBMISSION_COLUMNS} FROM batch_submissions WHERE run_id = ? ORDER BY number", (run_id,)
        )
        return [Submission(*row) for row in rows]

    async def held_requests(self, run_id: int) -> set[tuple[int, int]]:
        """(conversation id, idx) of every request an open submission holds (a reply: idx -1)."""
        rows = await self._all(
            "SELECT l.conversation_id, l.idx FROM batch_lines l JOIN batch_submissions s ON s.id = l.submission_id"
            f" WHERE l.run_id = ? AND s.state IN ({','.join('?' * len(OPEN_STATES))})",
            (run_id, *OPEN_STATES),
        )
        return {(conversation_id, idx) for conversation_id, idx in rows}

    async def unanswered_requests(self, submission_id: int) -> list[tuple[int, int, int, int]]:
        """(conversation id, idx, position, repeat) of a submission's requests still unanswered."""
        return await self._all(
            "SELECT l.conversation_id, l.idx, c.position, c.repeat FROM batch_lines l"
            " JOIN conversations c ON c.id = l.conversation_id WHERE l.submission_id = ?"
            " AND ((l.idx = -1 AND c.status = 'pending') OR (l.idx >= 0 AND EXISTS (SELECT 1 FROM verdicts v"
            " WHERE v.conversation_id = l.conversation_id AND v.idx = l.idx AND v.status = 'pending')))"
            " ORDER BY c.position, c.repeat, l.idx",
            (submission_id,),
        )

    async def add_submission(
        self,
        run_id: int,
        lease: str,
        *,
        stage: str,
        model: str,
        endpoint: str,
        path: str,
        sha256: str,
        requests: list[tuple[int, int]],
    ) -> Submission:
        """A request file written whole, recorded with what it holds before it is uploaded."""
        async with self._transaction():
            await self._fence(run_id, lease)
            row = await self._one(
                "SELECT coalesce(max(number), 0) + 1 FROM batch_submissions WHERE run_id = ?", (run_id,)
            )
            number = row[0]
            cursor = await self.db.execute(
                "INSERT INTO batch_submissions (run_id, number, stage, model, endpoint, path, lines, sha256, state,"
                " written_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, number, stage, model, endpoint, path, len(requests), sha256, WRITTEN, time.time()),
            )
            submission_id = cursor.lastrowid
            await self.db.executemany(
                "INSERT OR IGNORE INTO batch_lines (run_id, submission_id, conversation_id, idx) VALUES (?, ?, ?, ?)",
                [(run_id, submission_id, conversation_id, idx) for conversation_id, idx in requests],
            )
        row = await self._one(f"SELECT {SUBMISSION_COLUMNS} FROM batch_submissions WHERE id = ?", (submission_id,))
        return Submission(*row)

    async def _set(self, submission: Submission, lease: str | None, **values: object) -> None:
        columns = ", ".join(f"{name} = ?" for name in values)
        async with self._transaction():
            if lease is not None:
                await self._fence(submission.run_id, lease)
            await self.db.execute(
                f"UPDATE batch_submissions SET {columns} WHERE id = ?", (*values.values(), submission.id)
            )

    async def record_upload(self, submission: Submission, lease: str, file_id: str) -> None:
        await self._set(submission, lease, state=UPLOADED, file_id=file_id)

    async def record_batch(
        self,
        submission: Submission,
        lease: str | None,
        *,
        batch_id: str,
        status: str,
        total: int,
        completed: int,
        failed: int,
        created_at: float | None,
        expires_at: float | None,
        errors: tuple[str, ...] = (),
    ) -> None:
        """The batch's id (the first time), and what the provider says of it now."""
        await self._set(
            submission,
            lease,
            state=SUBMITTED if submission.state != IMPORTED else IMPORTED,
            batch_id=batch_id,
            batch_status=status,
            total=total,
            completed=completed,
            failed=failed,
            submitted_at=submission.submitted_at or created_at or time.time(),
            expires_at=expires_at,
            error="; ".join(errors) or None,
        )

    async def record_imported(self, submission: Submission, lease: str) -> None:
        """The batch's answers stored: what it held may go into another file now, if still asked."""
        await self._set(submission, lease, state=IMPORTED, ended_at=time.time())

    async def leave_batch_api(self, run_id: int) -> None:
        """The run goes on by calls: its submissions never sent are closed (their requests free)
        and its plan no longer names the batch API."""
        async with self._transaction():
            await self.db.execute(
                "UPDATE batch_submissions SET state = ?, ended_at = ?, error = ? WHERE run_id = ? AND state IN (?, ?, ?)",
                (IMPORTED, time.time(), "left when the run went on by calls", run_id, WRITTEN, UPLOADED, SUBMITTED),
            )
            # Its requests are recorded again by the calls that answer it (not "through the batch API").
            await self.db.execute(
                "UPDATE runs SET plan_json = json_remove(plan_json, '$.batch_api'), requests_json = NULL WHERE id = ?",
                (run_id,),
            )

    async def forget_unsent(self, submission: Submission, lease: str) -> None:
        """A submission whose file is gone before it was uploaded: its requests are free again."""
        await self._set(
            submission, lease, state=IMPORTED, ended_at=time.time(), error="its file was gone before its upload"
        )
