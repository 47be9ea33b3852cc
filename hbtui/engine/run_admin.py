"""Renaming, deleting and exporting a run: one path for the app's runs list and the command line
(`hbtui rename`, `hbtui delete`, `hbtui export`), reached through hbtui.services."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from hbtui.core.text import one_line
from hbtui.engine.run_plan import run_name_problem
from hbtui.render.export import write_csv, write_jsonl
from hbtui.store import Deleted, RunRow, Store, StoreError
from hbtui.store.answer_journal import remove_journal
from hbtui.store.disk_reserve import remove_reserve

RUN_FOLDER_FILES = ("results.jsonl", "description.md")  # what hbtui writes in a run's folder
EXPORT_FORMATS = {".jsonl": "jsonl", ".csv": "csv"}


class RunActionError(StoreError):
    """An action refused or impossible; the message is one line for the user."""


async def rename_run(store: Store, run: RunRow, new_name: str) -> str:
    new_name = new_name.strip()
    problem = run_name_problem(new_name)
    if problem:
        raise RunActionError(f"the name {one_line(new_name, 60)!r} {problem}; choose another name")
    await store.rename_run(run, new_name)
    return f"run {run.id} renamed from {one_line(run.name, 60)!r} to {one_line(new_name, 60)!r}"


def remove_run_folder(folder: str | None) -> str:
    """Remove the files hbtui wrote in a run's folder, then the folder if nothing else is in it:
    a file the user put there is never removed. Says what was done."""
    if not folder:
        return "it had no run folder"
    path = Path(folder)
    if not path.is_dir():
        return f"its folder {one_line(folder, 200)} was already gone"
    for name in RUN_FOLDER_FILES:
        (path / name).unlink(missing_ok=True)
    try:
        path.rmdir()
    except OSError:
        return f"its folder {one_line(folder, 200)} kept: it holds files hbtui did not write"
    return f"its folder {one_line(folder, 200)} removed"


@dataclass(frozen=True, slots=True)
class Removal:
    deleted: Deleted
    folder_note: str  # what became of its run folder
    space: tuple[int, int] | None  # the database's bytes before and after VACUUM; None: not run

    def message(self) -> str:
        d = self.deleted
        space = (
            f"; the database went from {mebibytes(self.space[0])} to {mebibytes(self.space[1])}"
            if self.space
            else "; its space is reclaimed once no run is being driven (the next delete then)"
        )
        return (
            f"run {d.run_id} ({one_line(d.name, 60)}) deleted: {d.conversations} conversations,"
            f" {d.verdicts} verdicts; {self.folder_note}{space}"
        )


def mebibytes(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


async def delete_run(store: Store, run: RunRow, *, remove_folder: bool) -> Removal:
    """Delete the run's rows (refused while driven or reused: RunInUse says which) and its
    answer journal, its folder if asked, then VACUUM (in the store's own thread: the caller's
    loop stays free). The journal goes in any case: it holds answers of rows that are gone, beside
    the database rather than in the run's folder."""
    deleted = await store.delete_run(run)
    await asyncio.to_thread(remove_journal, store.path, run.id)
    remove_reserve(store.path, run.id)  # one a killed driver left (hbtui.store.disk_reserve)
    if remove_folder:
        note = await asyncio.to_thread(remove_run_folder, deleted.folder)
    else:
        note = f"its folder {one_line(deleted.folder, 200)} kept" if deleted.folder else "it had no run folder"
    return Removal(deleted, note, await store.reclaim_space())


def export_format(out: Path) -> str:
    """The format a path's suffix names (.jsonl or .csv)."""
    fmt = EXPORT_FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise RunActionError(f"{one_line(str(out), 200)}: end the file name with .jsonl or .csv to choose the format")
    return fmt


async def export_run(store: Store, run: RunRow, out: Path, fmt: str) -> str:
    """Write ``run`` as JSONL (one line per conversation and repeat) or CSV (one row per verdict)."""
    if not out.parent.is_dir():
        raise RunActionError(f"{one_line(str(out), 200)}: the folder {one_line(str(out.parent), 200)} does not exist")
    if out.is_dir():
        raise RunActionError(f"{one_line(str(out), 200)}: is a folder; give a file name")
    writer = write_jsonl if fmt == "jsonl" else write_csv
    count = await writer(store, run.id, out)
    unit = "verdicts" if fmt == "csv" else "conversations"
    return f"wrote {count} {unit} of run {run.id} to {one_line(str(out), 200)}"
