"""A user's actions on a whole run: rename it, delete it, and give the space back.

A delete is refused while a process drives the run (its answers would be written into rows that
are gone), and while another run reuses it: a regrade's conversations are the source run's
replies graded again, so deleting the source would orphan what the regrade points at. Cached
verdicts belong to no run (schema.py), so a delete never takes one another run still uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from hbtui.core.invocation import invoked_as
from hbtui.core.verdicts import RUNNING
from hbtui.store.connection import Connection
from hbtui.store.rows import RUN_COLUMNS, RunRow, StoreError, run_from_row

# Every table holding a run's rows, children first (another owner's table joins this list).
RUN_TABLES = (
    "batch_lines",
    "batch_submissions",
    "reviews",
    "review_positions",
    "verdict_text_runs",
    "meta_eval_rows",
    "verdicts",
    "conversations",
    "run_log",
)


class RunInUse(StoreError):
    """The run may not be deleted now; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Deleted:
    run_id: int
    name: str
    conversations: int
    verdicts: int
    folder: str | None  # the run folder the run had, which the store does not touch


class StoreRunActions(Connection):
    async def rename_run(self, run: RunRow, new_name: str) -> None:
        """``new_name`` must be checked by the caller (hbtui.engine.run_plan.run_name_problem)."""
        if await self._one("SELECT 1 FROM runs WHERE name = ? AND id != ?", (new_name, run.id)):
            raise StoreError(f"a run named {new_name!r} exists already; choose another name")
        await self.db.execute("UPDATE runs SET name = ? WHERE id = ?", (new_name, run.id))
        await self.db.commit()

    async def runs_reusing(self, run_id: int) -> list[tuple[int, str]]:
        """(id, name) of the regrades that grade this run's replies again."""
        return list(await self._all("SELECT id, name FROM runs WHERE source_run_id = ? ORDER BY id", (run_id,)))

    async def delete_run(self, run: RunRow) -> Deleted:
        """Remove the run and every row of it, in one transaction; refused (RunInUse) while
        it is driven or reused, checked again inside the transaction."""
        async with self._transaction():
            row = await self._one_named(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run.id,))
            if row is None:
                raise StoreError(f"run {run.id} is not in the database any more")
            run = run_from_row(row)
            if run.shown_status() == RUNNING:
                raise RunInUse(
                    f"run {run.id} is being driven by {run.owner_shown or 'another process'}: cancel it first"
                    f" (x in its monitor, or hbtui cancel {run.id}), then delete it"
                )
            if await self._one(
                # A batch live at the provider, or one that may be (uploaded, its creation unheard of,
                # unless the run was cancelled since, which looked for it): billed, and its answers
                # would have nowhere to go.
                "SELECT 1 FROM batch_submissions WHERE run_id = ? AND ((state = 'submitted'"
                " AND coalesce(batch_status, 'validating') IN ('validating', 'in_progress', 'finalizing'))"
                " OR (state = 'uploaded' AND ? != 'cancelled'))",
                (run.id, run.status),
            ):
                raise RunInUse(
                    f"run {run.id} has batches at the provider: cancel them first ({invoked_as()} cancel {run.id}),"
                    " then delete it"
                )
            reusing = await self.runs_reusing(run.id)
            if reusing:
                names = ", ".join(f"run {rid} ({name})" for rid, name in reusing)
                raise RunInUse(
                    f"run {run.id}'s replies are graded again by {names}: delete {'it' if len(reusing) == 1 else 'them'}"
                    " first, or keep this run"
                )
            conversations = (await self._one("SELECT count(*) FROM conversations WHERE run_id = ?", (run.id,)))[0]
            verdicts = (await self._one("SELECT count(*) FROM verdicts WHERE run_id = ?", (run.id,)))[0]
            # The search index's rows carry no run: they are the run's verdicts' by rowid.
            await self.db.execute(
                "DELETE FROM verdict_text WHERE rowid IN (SELECT id FROM verdicts WHERE run_id = ?)", (run.id,)
            )
            for table in RUN_TABLES:
                await self.db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run.id,))
            await self.db.execute("DELETE FROM runs WHERE id = ?", (run.id,))
            # A record (a prompt and its rubric) is shared by every run of it: gone with the last.
            await self.db.execute(
                "DELETE FROM records WHERE NOT EXISTS (SELECT 1 FROM conversations c WHERE c.record_id = records.id)"
            )
            await self.db.execute(  # so is a meta-eval's conversation and completion, by its rows
                "DELETE FROM meta_eval_texts WHERE NOT EXISTS"
                " (SELECT 1 FROM meta_eval_rows r WHERE r.text_id = meta_eval_texts.id)"
            )
        return Deleted(run.id, run.name, conversations, verdicts, run.folder)

    async def reclaim_space(self) -> tuple[int, int] | None:
        """VACUUM: SQLite keeps a deleted run's pages until then. (bytes before, after), or
        None when a run is being driven: its writes would wait for the whole rewrite."""
        running = await self._all_named(f"SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running'")
        if any(run_from_row(row).shown_status() == RUNNING for row in running):
            return None
        before = await self._file_size()
        await self.db.execute("VACUUM")
        return before, await self._file_size()

    async def _file_size(self) -> int:
        pages = (await self._one("PRAGMA page_count"))[0]
        size = (await self._one("PRAGMA page_size"))[0]
        return pages * size
