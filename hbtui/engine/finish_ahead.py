"""A run's report and results.jsonl, worked out while its calls go on.

A run's finish used to read the whole run back from the database after its last verdict: the
scoring inputs for the report, then every conversation again for results.jsonl. For the main
subset's 738 conversations that was 0.3 s, all of it after the last answer, when nothing else is
left to wait for. Yet most conversations are complete long before the end, and the event loop
spends most of a run waiting for answers. So, while the calls go on, FinishAhead reads each
stretch of complete conversations once the writer has committed it, in plan order (the order
both are made in), adds it to the report's tally and writes its lines to an unnamed temporary
file. At the end only the last stretch is left to read, then the bootstraps.

It reads what the database holds, through the same functions as a finish from scratch
(``scoring_inputs`` and ``ReportTally``, ``export_rows`` and ``jsonl_line``), so the report and the
file are the same to the last bit and byte. Where it cannot vouch for that, the finish is made
from scratch as before: a review was made meanwhile (results.jsonl carries reviews), a read
failed, or a conversation never completed.

Only a run driven from its start by one process uses it: its conversations complete only here,
and once each. A resumed run, a regrade and a run of the records' own completions (each group
has a report of its own) are finished from scratch.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hbtui.core.json_reading import read_json
from hbtui.core.scoring import ReportTally
from hbtui.engine.result_writer import ResultWriter
from hbtui.render.export import jsonl_line, run_models
from hbtui.render.export_reviews import ExportReviews
from hbtui.store import Store

STEP_SECONDS = 0.25  # how often the committed conversations are read
STEP_CONVERSATIONS = 64  # at most this many per read: the writer shares the connection


@dataclass(frozen=True)
class Prepared:
    """What the finish needs, made during the calls."""

    tally: ReportTally  # every conversation, added in plan order
    results: TextIO | None  # results.jsonl whole; None where a review means it must be made again


class FinishAhead:
    """Reads each committed stretch of a run's complete conversations into the report's tally and
    results.jsonl, while the run's calls go on (see the module)."""

    def __init__(self, store: Store, run_id: int, conversations: int, writer: ResultWriter, folder: Path) -> None:
        """``conversations``: the run's, at positions 0 to n - 1; ``folder``: where the run's folders
        go (the temporary file stays on that disk, owner-only, and vanishes with this process)."""
        self.store = store
        self.run_id = run_id
        self.conversations = conversations
        self.writer = writer
        self.folder = folder
        self.tally = ReportTally()
        self.read_to = 0  # every conversation before this position is in the tally and the file
        self.failed: BaseException | None = None
        self._done: deque[tuple[int, int]] = deque()  # (the writer's count at hand-over, position)
        self._committed: set[int] = set()  # positions complete and committed, not yet read
        self._results: TextIO | None = None
        self._no_reviews = ExportReviews([])
        self._models: dict[str, str] | None = None  # the run's names, read with the first stretch
        self._closing = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._read_as_committed(), name="hbtui-finish-ahead")

    def done(self, position: int) -> None:
        """The conversation at ``position`` is complete: its last record was just handed to the writer."""
        self._done.append((self.writer.queued, position))

    async def _read_as_committed(self) -> None:
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), STEP_SECONDS)
                closing = self._closing.is_set()  # set before this read: it is the last one
                await self._read_committed()
                if closing:
                    return
        except Exception as exc:  # noqa: BLE001 - the finish is then made from the database, as before
            self.failed = exc

    async def _read_committed(self) -> None:
        done, committed = self._done, self.writer.committed
        while done and done[0][0] <= committed:
            self._committed.add(done.popleft()[1])
        end = self.read_to
        while end in self._committed:
            self._committed.discard(end)
            end += 1
        for start in range(self.read_to, end, STEP_CONVERSATIONS):
            await self._read(range(start, min(end, start + STEP_CONVERSATIONS)))

    async def _read(self, positions: range) -> None:
        # What the writer said is committed must be there, whole; a conversation is not written
        # again once it is (this process alone drives the run), so it is read once, now.
        if unsettled := await self.store.conversations_unsettled(self.run_id, positions):
            raise RuntimeError(f"{unsettled} of the conversations at {positions} are not complete in the database")
        inputs = await self.store.scoring_inputs(self.run_id, positions)
        if self._models is None:
            self._models = run_models(await self.store.get_run(self.run_id))
        models = self._models
        lines = [
            jsonl_line(conv, verdicts, read_json(conv.record_body)["prompt"], self._no_reviews, models)
            async for conv, verdicts in self.store.export_rows(self.run_id, positions)
        ]
        if len(inputs) != len(positions) or len(lines) != len(positions):
            raise RuntimeError(f"conversations {positions} read as {len(inputs)} and {len(lines)}")
        if self._results is None:
            # The same encoding and newlines as hbtui.core.files.private_file, which writes the file itself.
            self._results = tempfile.TemporaryFile("w+", encoding="utf-8", dir=self.folder)
        self._results.write("".join(lines))
        for conversation in inputs:
            self.tally.add(conversation)
        self.read_to = positions.stop

    async def finish(self) -> Prepared | None:
        """After the writer's last commit: the rest read, and what the finish needs; None where
        the finish must be made from the database."""
        if self._task is None:
            return None
        self._closing.set()
        await asyncio.shield(self._task)
        if self.failed is not None or self.read_to != self.conversations:
            return None
        if await self.store.run_reviews(self.run_id):
            return Prepared(self.tally, None)  # a review made during the run: results.jsonl carries it
        if self._results is None:
            return None
        return Prepared(self.tally, self._results)

    async def close(self) -> None:
        """Stops reading and lets the temporary file go."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._results is not None:
            self._results.close()
            self._results = None
