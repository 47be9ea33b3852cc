"""The app shell: opens the store, picks the first screen, starts the runs.

A run started here (a model run or a meta-eval, from the configuration screen, continued, retried
or graded again) is driven by a process of its own (hbtui.services.launch_detached), so that it
outlives the app, its terminal and the SSH session; the monitor (a meta-eval's own screen) watches
it through the database, as `hbtui monitor` does. Quitting while such runs go on asks whether to
leave them going (the default) or to stop them as Ctrl-C stops `hbtui run`: what completed is
saved and the run can be resumed.

The local demo's run is the one driven here, by a worker of the App (never of a screen, so
leaving the monitor never stops it): the demo's model server belongs to the app and ends with it.

Longer than most modules (about 600 lines) because the App holds what outlives a screen (the store,
the runs driven here or in processes of their own, quitting, the frame timer's and error handling's
hooks into Textual); each screen is a module of its own.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from rich.text import Text
from textual import events, work
from textual.actions import parse as parse_action
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen
from textual.worker import Worker

from hbtui.core.invocation import invoked_as
from hbtui.core.run_kinds import META_EVAL
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.core.settings.envfile import env_file_values
from hbtui.core.text import one_line
from hbtui.services import DetachedRun, Engine, launch_detached, settings_for_run
from hbtui.store import NoRunsYet, RunRow, Store, StoreError
from hbtui.tui.monitor_data import RunCounters
from hbtui.tui.widgets.app_header import database_label

STOP_TIMEOUT_SECONDS = 20.0
DRIVERS_CHECK_SECONDS = 1.0  # how often the app looks whether the processes it started have ended
# How a driver ends when its run's status says why (finished, failed, incomplete, interrupted);
# any other (a run another process took meanwhile, a database it could not open) is told here.
DRIVER_EXITS_THE_RUN_EXPLAINS = (0, 1, 3, 130)
GC_YOUNG_THRESHOLD = 10_000  # allocations between collections of the youngest generation (default 700)


@dataclass
class LiveRun:
    """A run driven by this process: its engine, the counters the monitor reads, its worker."""

    run_id: int
    engine: Engine
    counters: RunCounters
    worker: Worker | None = None
    when_done: Callable[[], None] | None = None  # what the run owns and ends with it (the demo's server)


class HBTuiApp(App[object]):  # object: as MessagePump.app is typed, so screens see this app (tui/handle.py)
    CSS_PATH = ["app.tcss", "browser.tcss"]
    TITLE = "hbtui"
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("escape", "back", "Back", id="app.back"),
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("ctrl+q", "quit", "Quit", id="app.quit_now", show=False, priority=True),
        # Help where `?` is typed as text (an input has the focus): the key bar offers it there.
        Binding("f1", "help", "Help", id="app.help_f1", show=False, priority=True),
        # Textual's own ctrl+c, described here so that the help and docs/app.md list it (see action_help_quit).
        Binding("ctrl+c", "help_quit", "Quit (copies in an input, or text selected)", id="app.quit_ctrl_c", show=False),
    ]

    def __init__(self, settings: Settings, env_file: str | None = ".env", monitor_run: str | None = None) -> None:
        super().__init__()
        self.last_input_at = 0.0  # monotonic time of the last key or click (input_quiet)
        self.settings = settings
        self.env_file = env_file
        # The file as these settings were read from it: ctrl+g on the form asks before it
        # replaces a value edited there since.
        self.env_as_read = env_file_values(env_file)
        self.monitor_run = monitor_run
        self._store: Store | None = None
        self._name_database()
        self.live_runs: dict[int, LiveRun] = {}  # the demo's: driven in this process
        self.detached_runs: dict[int, DetachedRun] = {}  # started here, driven by processes of their own
        # Problems found while reading .env (bad values left at their defaults), shown once up.
        self.startup_problems: list[str] = []
        self._gc_threshold: tuple[int, int, int] | None = None
        self._checking_drivers = False
        self.farewell: str | None = None  # one line for the shell once the app has ended

    # ---- lifecycle -----------------------------------------------------------------------
    async def on_mount(self) -> None:
        from hbtui.tui.screens.monitor import MonitorScreen
        from hbtui.tui.screens.runs import RunsScreen

        try:
            self.store = await Store.open(self.settings.db_path, create=False, read_only=True)
        except NoRunsYet:
            # A fresh clone: nothing to list, and no file made until the first run starts.
            self.store = None
        except StoreError as exc:
            self.exit(return_code=2, message=Text(f"hbtui: error: {one_line(str(exc), 300)}"))
            return
        # The app's long-lived objects (widgets, styles, the store) out of the cyclic collector's
        # full passes: fewer pauses while screens open (opening a run: 95-105 ms -> 73-77 ms).
        gc.collect()
        gc.freeze()
        # Opening a screen allocates some 25,000 objects, nearly all freed by reference counting
        # within the key press. At the default 700, the collector ran 37 times per run opened and
        # promoted those objects into full passes of 100-140 ms (6 in 20 opens); at 10,000 they
        # are mostly gone before it looks: CPU per open 75 -> 66 ms (median of 20), no full pass.
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *self._gc_threshold[1:])
        for problem in self.startup_problems:
            self.notify(one_line(problem, 300), title="settings", severity="warning", timeout=15, markup=False)
        if self.monitor_run is not None:
            try:
                if self.store is None:
                    raise StoreError(f"{self.settings.db_path}: holds no runs yet")
                run = await self.store.resolve_run(self.monitor_run)
            except StoreError as exc:
                self.exit(return_code=2, message=Text(f"hbtui: error: {one_line(str(exc), 300)}"))
                return
            await self.push_screen(RunsScreen())
            if run.kind == META_EVAL:  # its own screen follows it as it goes
                self.open_run(run.id)
                return
            await self.push_screen(MonitorScreen(run.id, follow_latest=self.monitor_run == "latest"))
            return
        # The runs list is always the root, so Back from the configuration screen lands there.
        await self.push_screen(RunsScreen())
        if self.store is None or not await self.store.list_runs():
            self.open_config()

    @property
    def store(self) -> Store | None:
        """The database whose runs the screens list; the header names it."""
        return self._store

    @store.setter
    def store(self, store: Store | None) -> None:
        self._store = store
        self._name_database()

    def _name_database(self) -> None:
        path = self._store.path if self._store is not None else self.settings.db_path
        self.title = f"{self.TITLE} · {database_label(path)}"

    @property
    def own_database(self) -> bool:
        """The runs listed are the user's own (the settings' database), not the demo's beside it."""
        return self._store is None or Path(self._store.path).resolve() == Path(self.settings.db_path).resolve()

    async def open_database(self, path: str) -> None:
        """List the runs of the database at ``path`` (the user's own, or the demo's), read as the
        app opens its first: nothing is created, and a missing file lists no runs."""
        if self._store is not None:
            store, self.store = self._store, None
            await store.close()
        try:
            self.store = await Store.open(path, create=False, read_only=True)
        except NoRunsYet:
            self.store = None

    @property
    def db(self) -> Store:
        """The open database, for the screens that exist only once it is open: a run, its
        conversations, a comparison (the runs list and the monitor check ``store`` themselves)."""
        if self.store is None:
            raise StoreError(f"{self.settings.db_path}: no database is open")
        return self.store

    async def store_for_a_run(self, db_path: str | None = None) -> Store:
        """The database a run is planned in: ``db_path`` (a new run: the settings', or the demo's
        beside it), else the one open now (a regrade beside its source), created if this is its
        first run; the screens then list that database's runs."""
        path = db_path or (self.store.path if self.store is not None else self.settings.db_path)
        if self.store is not None and Path(self.store.path) != Path(path):
            store, self.store = self.store, None
            await store.close()
        if self.store is None:
            self.store = await Store.open(path)
            if not self.own_database:
                self.notify(
                    f"The demo's runs are kept in {database_label(path)}; b on the runs list goes back to your own.",
                    title="database",
                    timeout=10,
                    markup=False,
                )
        return self.store

    async def on_unmount(self) -> None:
        try:
            await self.stop_runs()
            # Readers still going (a connection check, a run being opened) end before the store
            # closes under them: one caught mid-query failed with "Cannot operate on a closed
            # database" on exit. A cancelled worker's wait raises WorkerCancelled: gathered.
            workers = list(self.workers)
            for worker in workers:
                worker.cancel()
            await asyncio.wait_for(
                asyncio.gather(*(worker.wait() for worker in workers), return_exceptions=True), STOP_TIMEOUT_SECONDS
            )
        except TimeoutError:
            pass
        finally:
            if self._gc_threshold is not None:  # as it was for what runs after the app in this process
                gc.set_threshold(*self._gc_threshold)
            # Whatever happened above: an open aiosqlite thread would keep the process alive.
            if self.store is not None:
                store, self.store = self.store, None
                await store.close()

    def _handle_exception(self, error: Exception) -> None:
        # The configuration screen is built ahead, off screen (prebuild_config). Quit while its
        # widgets still mount (a loaded machine), the teardown takes them away under Textual's
        # Select, whose mount then misses its own overlay: nothing of the user's is at stake, the
        # app is ending, so that is no "internal error". Seen once in the slow tier, not made
        # to happen on purpose.
        from textual.css.query import NoMatches

        # Upstream: Textual issue 6581 (Select's mount queries a child not yet there, NoMatches),
        # pull request 6680 open; tests/tui/test_textual_overrides.py watches Select's lookup.
        if self.ending and isinstance(error, NoMatches):
            return
        super()._handle_exception(error)

    @property
    def ending(self) -> bool:
        """Quit (exit asked) or shutting down without it (a signal, a test's teardown): the
        screens' widgets are being taken away."""
        return self._exit or not self.is_running

    def _fatal_error(self) -> None:
        """An unexpected error: one line on the terminal, the traceback in a file.

        Textual's own handler prints a traceback with local variables, which could show an API
        key; ours keeps the traceback (code lines only, no locals) in an owner-only file beside
        the database, for a bug report. No setting of Textual leaves the locals out (the nearest
        request, Textual issue 3069, asks for a plain crash output); tests/tui/test_textual_overrides.py
        fails when Textual's report changes.
        """
        import os
        import traceback

        error = self._exception
        error = getattr(error, "error", None) or error  # a failed worker wraps what really broke
        log = Path(self.settings.db_path).parent / "hbtui-crash.log"
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as handle:
                handle.write("".join(traceback.format_exception(error)) + "\n")
            where = f"; traceback in {log}"
        except OSError:
            where = ""
        self.bell()
        self._exit_renderables.append(
            Text(f"hbtui: internal error: {one_line(f'{type(error).__name__}: {error}', 300)}{where}")
        )
        self._close_messages_no_wait()

    # ---- runs of this process -------------------------------------------------------------
    def offer_to_drive(
        self, run: RunRow, question: str, yes: str, before: Callable[[], Awaitable[str]] | None = None
    ) -> None:
        """Ask, then drive ``run`` in a process of its own, its monitor open: continue (c) and retry (R).

        The run's own settings are used with this session's keys, and checked before asking.
        ``before`` runs once the user agreed (a retry puts what failed back in the queue) and
        returns what to tell the user.
        """
        from hbtui.tui.screens.confirm import ConfirmModal

        try:
            # In the database it was found in: the demo's runs are listed from a file of their own.
            settings = settings_for_run(run, replace(self.settings, db_path=str(self.db.path)))
            settings.require_models()
        except SettingsError as exc:
            self.notify(one_line(str(exc), 300), severity="error", markup=False)
            return

        async def answered(agreed: bool | None) -> None:
            if not agreed:
                return
            try:
                message = await before() if before else f"continuing run {run.id}"
                await self.start_detached(run.id, settings, use_cache=True)  # a continue: as `hbtui resume`
            except StoreError as exc:  # another process took the run meanwhile, or the file broke
                self.notify(one_line(f"run {run.id}: {exc}", 300), severity="error", markup=False)
                return
            self.notify(message, markup=False)
            self.open_monitor(run.id)

        # Paid calls start at once: the question names the run and its endpoint.
        self.push_screen(
            ConfirmModal(
                f"{question} (run {run.id} {one_line(run.name, 60)} at {run.settings.get('base_url')})",
                yes=yes,
                no="Not now",
            ),
            answered,
        )

    async def start_detached(self, run_id: int, settings: Settings, use_cache: bool = False) -> DetachedRun:
        """Drive a run planned in the open database in a process of its own, which goes on
        whatever becomes of the app; the monitor watches it through the database."""
        store = self.db
        try:
            detached = await launch_detached(
                store, await store.get_run(run_id), replace(settings, db_path=str(store.path)), use_cache=use_cache
            )
        except OSError as exc:
            raise StoreError(f"run {run_id}: its process could not start ({exc.strerror or exc})") from None
        self.detached_runs[run_id] = detached
        if not self._checking_drivers:
            self._checking_drivers = True
            self.set_interval(DRIVERS_CHECK_SECONDS, self._check_drivers)
        return detached

    def drivers_going(self) -> list[DetachedRun]:
        """The processes started here that still drive their runs."""
        return [detached for detached in self.detached_runs.values() if detached.going()]

    def _check_drivers(self) -> None:
        for run_id, detached in list(self.detached_runs.items()):
            if detached.going():
                continue
            del self.detached_runs[run_id]
            if detached.process.returncode not in DRIVER_EXITS_THE_RUN_EXPLAINS:
                self.notify(
                    one_line(f"run {run_id}'s process ended: {last_line(detached.log)} (log {detached.log})", 300),
                    severity="error",
                    markup=False,
                )

    async def start_run(
        self, run_id: int, settings: Settings, use_cache: bool = False, when_done: Callable[[], None] | None = None
    ) -> LiveRun:
        """Drive a planned run in this process (the demo's, whose server the app owns); returns at once,
        the run goes on in a worker."""
        # The engine gets its own connection: its group commits never queue behind the
        # screens' reads on the shared one, and its transactions never meet theirs.
        store = await Store.open(settings.db_path)
        try:
            run = await store.get_run(run_id)
            counters = RunCounters()
            await counters.seed(store, run_id)
            engine = Engine(store, run, settings, [counters], use_cache=use_cache)
        except BaseException:
            await store.close()
            raise
        live = LiveRun(run_id, engine, counters, when_done=when_done)
        self.live_runs[run_id] = live
        live.worker = self.run_worker(
            self._drive(live, store, settings), name=f"run {run_id}", group="runs", exclusive=False, exit_on_error=False
        )
        return live

    async def _drive(self, live: LiveRun, store: Store, settings: Settings) -> str | None:
        status = None
        try:
            status = await live.engine.execute()  # a finished run also gets its folder there
        except Exception as exc:  # noqa: BLE001 - a run that cannot start is a message, not a crash
            live.counters.failed_to_start(str(exc))
            self.notify(one_line(f"run {live.run_id} stopped: {exc}", 300), severity="error", markup=False)
        finally:
            await store.close()
            self.live_runs.pop(live.run_id, None)
            if live.when_done is not None:
                await asyncio.to_thread(live.when_done)
        return status

    def cancel_run(self, run_id: int) -> None:
        """The run ends as cancelled once the calls in flight are answered (they are paid for)."""
        live = self.live_runs.get(run_id)
        if live is None or live.worker is None:
            return
        live.engine.cancel()

    async def stop_runs(self) -> None:
        """Stop every run of this process as Ctrl-C would (interrupted, resumable) and wait."""
        for live in list(self.live_runs.values()):
            if live.worker is not None:
                live.worker.cancel()
        waited = 0.0
        while self.live_runs and waited < STOP_TIMEOUT_SECONDS:
            await asyncio.sleep(0.05)
            waited += 0.05

    # ---- actions ----------------------------------------------------------------------------
    def action_help(self) -> None:
        from hbtui.tui.screens.help import HelpModal

        if isinstance(self.screen, HelpModal):
            self.pop_screen()
            return
        self.push_screen(HelpModal(self.screen))

    def action_back(self) -> None:  # type: ignore[override]  # Textual's is async; this one needs no await
        # [default screen, runs list] is the bottom of the stack: never pop past it.
        if len(self.screen_stack) > 2:
            self.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back" and len(self.screen_stack) <= 2:
            return False  # on the runs list there is nowhere to go back to: not offered
        return True

    async def action_quit(self) -> None:
        if self.drivers_going():
            await self._ask_about_drivers()
            return
        if not self.live_runs:
            self.exit()
            return
        from hbtui.tui.screens.confirm import ConfirmModal

        names = ", ".join(str(run_id) for run_id in self.live_runs)
        resumes = "; ".join(f"{invoked_as()} resume {run_id}" for run_id in self.live_runs)
        # Plain text, as the dialog shows it: no Markdown backticks (issue 25, item 11).
        question = (
            f"Run {names} is still going in this process. Stop it and quit? What completed is saved; "
            f"continue later with {resumes}."
        )

        async def answered(stop: bool | None) -> None:
            if stop:
                self.notify("stopping: saving what completed…", markup=False)
                await self.stop_runs()
                self.exit()

        await self.push_screen(ConfirmModal(question, yes="Stop and quit", no="Keep running"), answered)

    async def _ask_about_drivers(self) -> None:
        """Leave the runs started here going (the default), or stop them resumably; the shell
        gets one line saying what to type next."""
        from hbtui.tui.screens.quit import STOP, QuitModal

        going = self.drivers_going()
        runs = ", ".join(f"{d.run_id} (process {d.pid}, log {d.log})" for d in going)
        several = len(going) > 1
        them = "them" if several else "it"
        question = (
            f"{'Runs' if several else 'Run'} {runs} {'go' if several else 'goes'} on in a process of"
            f" {'their' if several else 'its'} own. Leave {them} going ({invoked_as()} monitor finds {them} later), or"
            f" stop {them}? What completed is saved, and {invoked_as()} resume continues."
        )
        if self.live_runs:
            question += f" Run {', '.join(map(str, self.live_runs))} (the local demo) stops with the app either way."

        async def answered(answer: str | None) -> None:
            if answer is None:
                return
            ids = ", ".join(str(d.run_id) for d in going)
            if answer == STOP:
                self.notify("stopping: saving what completed…", markup=False)
                for detached in going:
                    detached.stop()
                await self.stop_runs()
                waited = 0.0
                while self.drivers_going() and waited < STOP_TIMEOUT_SECONDS:
                    await asyncio.sleep(0.05)
                    waited += 0.05
                resume = "; ".join(f"{invoked_as()} resume {d.run_id}" for d in going)
                line = f"hbtui: stopped run {ids} (what completed is saved); continue with: {resume}"
            else:
                monitor = "; ".join(f"{invoked_as()} monitor {d.run_id}" for d in going)
                line = (
                    f"hbtui: run {ids} goes on (log {', '.join(str(d.log) for d in going)}); watch it with: {monitor}"
                )
            # Printed by the command once the terminal is the shell's again: Textual's exit message
            # is wrapped by Rich at the terminal's width, which would cut the command in two.
            self.farewell = line
            self.exit()

        await self.push_screen(QuitModal(question, runs=len(going)), answered)

    def action_help_quit(self) -> None:
        """Ctrl-C where no input has focus (an input copies with it): quit, as `q` does. Textual
        only says which key quits, and over SSH Ctrl-C is the key people press."""
        self.run_worker(self.action_quit(), group="quit", exclusive=True)

    def open_run(self, run_id: int) -> None:
        """A run's results: read first, then shown in one layout (pressed twice, opened once)."""
        self.last_input_at = time.monotonic()  # asked for, by a key or a command: the user waits
        self._open_run(run_id)

    @work(group="open-run", exclusive=True)
    async def _open_run(self, run_id: int) -> None:
        from hbtui.tui.screens.meta_eval import MetaEvalScreen
        from hbtui.tui.screens.run import RunScreen

        try:
            if (await self.db.get_run(run_id)).kind == META_EVAL:
                screen: Screen = await MetaEvalScreen.read(self.db, run_id)
            else:
                screen = await RunScreen.read(self.db, run_id)
        except StoreError as exc:  # deleted meanwhile, or the file broke
            self.notify(one_line(str(exc), 300), severity="error", markup=False)
            return
        await self.push_screen(screen)

    def _install_config(self) -> None:
        from hbtui.tui.screens.config import ConfigScreen

        if not self.is_screen_installed("config"):
            self.install_screen(ConfigScreen(), "config")

    def open_config(self) -> None:
        """The configuration screen, built once and kept: it has many widgets (slow to build),
        and what was typed into it is still there when the user comes back."""
        self._install_config()
        if self.screen is not self.get_screen("config"):
            self.push_screen("config")

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)):
            self.last_input_at = time.monotonic()
        await super().on_event(event)

    def input_quiet(self) -> float:
        """Seconds since the last key or click; 0 while a run is being opened (its reads and its
        screen are what the user waits for): how long the user has not been waiting on the app."""
        if any(worker.group == "open-run" and not worker.is_finished for worker in self.workers):
            return 0.0
        return time.monotonic() - self.last_input_at

    def prebuild_config(self) -> None:
        """Build the configuration screen off screen while the runs list waits for a key.

        Its 115 widgets take 120-130 ms to compose and style the first time, over twice what a
        key press to the next screen may take; built ahead, `n` shows it in about 25 ms.
        Textual has no public call that mounts a screen without showing it, so this uses the
        one push_screen uses (App._get_screen); if a later Textual drops it, the screen is
        simply built on first use, as before. No upstream request asks for one (Textual issue
        1775 made install_screen stop mounting); tests/tui/test_textual_overrides.py watches it.
        """
        self._install_config()
        screen = self.get_screen("config")
        get_screen = getattr(self, "_get_screen", None)
        if screen.is_running or get_screen is None:
            return
        try:
            get_screen(screen)
        except Exception:  # noqa: BLE001 - an optimisation only: the first `n` builds it instead
            return

    def open_monitor(self, run_id: int) -> None:
        from hbtui.tui.screens.monitor import MonitorScreen

        self.push_screen(MonitorScreen(run_id))

    # ---- command palette ----------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        # Every action a key reaches on this screen is also a command, so nothing needs a key.
        seen = {"quit"}
        for node, _, binding in self.bindings_for(screen):
            if binding.action in seen:
                continue
            seen.add(binding.action)
            _, name, arguments = parse_action(binding.action)
            if isinstance(node, DOMNode) and node.check_action(name, arguments) is False:
                continue  # not possible here now (pause of a run that has ended): not offered
            yield SystemCommand(
                binding.description,
                binding.tooltip or f"key: {self.get_key_display(binding)}",
                partial(self.run_action, binding.action, node if isinstance(node, DOMNode) else None),
            )

    def bindings_for(self, screen: Screen) -> list[tuple[object, str, Binding]]:
        """The keys the screen and the app define, with a description, each once.

        Read from the screen and the app themselves rather than ``active_bindings``: there a
        focused widget's own keys (a table's enter) hide the screen's, and add dozens of
        cursor keys that say nothing about hbtui. ``_bindings`` is private: no public call lists
        a node's own bindings (the nearest request is Textual issue 4740, "Dynamic Bindings").
        """
        found: list[tuple[object, str, Binding]] = []
        for node in (screen, self):
            for key, bindings in node._bindings.key_to_bindings.items():
                for binding in bindings:
                    if binding.description and binding.action != "command_palette":
                        found.append((node, key, binding))
        return found


def last_line(path: Path, tail: int = 4096) -> str:
    """The last line of a driver's log (read from its end: a long run's log is long), the
    one-line reason it gave for stopping."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - tail))
            lines = handle.read().decode("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "its log cannot be read"
    return lines[-1] if lines else "it wrote nothing"
