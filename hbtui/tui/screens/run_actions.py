"""What the runs list does to a whole run: export it, rename it, delete it. The work is
hbtui.services' (the command line's `export`, `rename`, `delete` take the same path); here are
the questions asked first and the answers said after."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from hbtui.core.text import one_line, visible_line
from hbtui.services import RunActionError, delete_run, export_format, export_run, rename_run
from hbtui.store import RunRow, Store, StoreError
from hbtui.tui.handle import AppModal, AppScreen
from hbtui.tui.screens.confirm import ConfirmModal
from hbtui.tui.widgets.ordered_input import OrderedInput


class AskTextModal(AppModal[str | None]):
    """One line of text asked for (a path, a name); None when cancelled or left empty."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="ask_text.cancel")]

    def __init__(self, question: str, value: str, placeholder: str) -> None:
        super().__init__()
        self.question, self.value, self.placeholder = question, value, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question))
            yield OrderedInput(self.value, placeholder=self.placeholder, id="ask-text")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


def safe_file_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80] or "run"


class RunActions(AppScreen):
    """The runs list's actions on the selected run (``selected_run()`` is the list's)."""

    async def selected_run(self) -> RunRow | None:
        raise NotImplementedError

    async def after_change(self) -> None:
        """The list read again once a run is renamed or deleted."""

    def _failed(self, what: str, exc: Exception) -> None:
        self.notify(one_line(f"{what}: {exc}", 300), severity="error", markup=False)

    # ---- export ------------------------------------------------------------------------------
    async def action_export_run(self) -> None:
        run = await self.selected_run()
        if run is None:
            return
        folder = Path(self.app.settings.db_path).parent
        suggested = str(folder / f"{safe_file_name(run.name)}.jsonl")

        def answered(path: str | None) -> None:
            if not path:
                return
            out = Path(path).expanduser()
            if not os.path.isfile(out):  # never raises: a path that cannot be read is the writer's to report
                self._export(run, out)
                return

            def replace(yes: bool | None) -> None:
                if yes:
                    self._export(run, out)
                else:
                    self.say(f"not exported: {one_line(out.name, 40)} kept as it was")

            ask = f"{one_line(str(out), 200)} exists. Replace it with run {run.id}'s export?"
            self.app.push_screen(ConfirmModal(ask, yes="Replace it", no="Keep it"), replace)

        question = f"Export run {run.id} to (.jsonl: a line per conversation; .csv: a row per verdict):"
        self.app.push_screen(AskTextModal(question, suggested, "a .jsonl or .csv file"), answered)

    @work(group="run-action", exclusive=False)
    async def _export(self, run: RunRow, out: Path) -> None:
        try:
            said = await export_run(self.app.db, run, out, export_format(out))
        except (StoreError, OSError, sqlite3.Error) as exc:
            self._failed(f"export of run {run.id}", exc)
            return
        self.say(said)

    # ---- rename ------------------------------------------------------------------------------
    async def action_rename_run(self) -> None:
        run = await self.selected_run()
        if run is None:
            return

        # The field starts from the name as every list shows it: its controls and zero-width
        # characters visible, not acted on by the terminal. Left as it is, it renames nothing.
        shown = visible_line(run.name)

        def answered(name: str | None) -> None:
            if name and name != shown:
                self._rename(run, name)

        self.app.push_screen(AskTextModal(f"New name for run {run.id}:", shown, "a unique name"), answered)

    @work(group="run-action", exclusive=False)
    async def _rename(self, run: RunRow, name: str) -> None:
        try:
            async with await Store.open(self.app.db.path, create=False) as store:
                said = await rename_run(store, run, name)
        except (StoreError, sqlite3.Error) as exc:
            self._failed(f"rename of run {run.id}", exc)
            return
        await self.after_change()
        self.say(said)

    # ---- delete ------------------------------------------------------------------------------
    async def action_delete_run(self) -> None:
        run = await self.selected_run()
        if run is None:
            return
        if run.id in self.app.live_runs:
            self.notify(
                f"run {run.id} is running in this app: cancel it first (x in its monitor), then delete it",
                severity="warning",
                markup=False,
            )
            return
        question = (
            f"Delete run {run.id} ({one_line(run.name, 60)})? Its {run.n_conversations} conversations and"
            " their verdicts go for good."
        )

        def folder_answered(remove_folder: bool | None) -> None:
            self._delete(run, bool(remove_folder))

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if run.folder and Path(run.folder).is_dir():
                ask = f"Also remove its run folder {one_line(run.folder, 120)}?"
                self.app.push_screen(ConfirmModal(ask, yes="Remove folder", no="Keep folder"), folder_answered)
            else:
                self._delete(run, False)

        self.app.push_screen(ConfirmModal(question, yes="Delete run", no="Keep it"), answered)

    @work(group="run-action", exclusive=False)
    async def _delete(self, run: RunRow, remove_folder: bool) -> None:
        self.say(f"deleting run {run.id}…")
        try:
            # A connection of its own: a run this app drives writes through the app's, and one
            # transaction must not begin inside another's. VACUUM runs in that connection's
            # thread: the app stays responsive meanwhile.
            async with await Store.open(self.app.db.path, create=False) as store:
                removal = await delete_run(store, run, remove_folder=remove_folder)
        except RunActionError as exc:
            self._failed("not deleted", exc)
            return
        except (StoreError, OSError, sqlite3.Error) as exc:
            self._failed(f"run {run.id} not deleted", exc)
            return
        await self.after_change()
        self.say(removal.message())
