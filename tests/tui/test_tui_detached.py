"""Runs started from the app go on without it (issue 12 section 1).

The app starts a process of its own for each run (hbtui.engine.detached) and watches it as
`hbtui monitor` does; quitting asks whether to leave those runs going (the default) or to stop
them resumably. Real processes: the app under Textual's pilot, the drivers, and a test server
that requires the API key and answers slowly enough for a run to last a few seconds.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hbtui.core.dataset import load_jsonl
from hbtui.core.text import middle_cut
from hbtui.services import plan_run
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.quit import QuitModal
from hbtui.tui.screens.runs import RunsScreen
from tests.cli.test_cli import clean_env
from tests.conftest import offline_settings, settings_for, small_records, write_jsonl
from tests.engine.test_detached import SECRET, wait_until
from tests.support.tui import screen_text, wait_for
from tests.tui.test_tui_config_form import open_form, type_into


def app_settings(server, db: Path):
    return settings_for(server, db, api_key=SECRET, concurrency=1, grader_template="builtin")


def status_of(db: Path, run_id: int) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]


@pytest.mark.slow
async def test_a_run_started_from_the_form_outlives_the_app_and_a_later_monitor_sees_it_live_then_finished(
    tmp_path, slow_keyed_server
):
    db = tmp_path / "runs" / "hbtui.sqlite"
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    app = HBTuiApp(settings=app_settings(slow_keyed_server, db), env_file=None)
    async with app.run_test(size=(160, 48)) as pilot:
        form = await open_form(pilot, app)
        type_into(form, "data_path", str(data))
        type_into(form, "repeats", "3")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), timeout=30, what="the monitor")
        (driver,) = app.detached_runs.values()
        monitor = app.screen
        await wait_for(
            pilot,
            lambda: monitor.view is not None and monitor.view.status == "running" and monitor.view.driver is not None,
            timeout=30,
            what="the run going in its own process",
        )
        shown = screen_text(app)
        assert f"driven by {monitor.view.driver}" in shown and f"log {driver.log}" in shown
        assert monitor.view.driver.endswith(f":{driver.pid}")
        assert SECRET.encode() not in Path(f"/proc/{driver.pid}/cmdline").read_bytes()
    # The app has ended (no question: the pilot ends it as a closed terminal would); its run goes on.
    assert driver.going()
    later = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None, monitor_run="latest")
    async with later.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(later.screen, MonitorScreen) and later.screen.view is not None)
        watched = later.screen
        await wait_for(pilot, lambda: watched.view.status == "running", timeout=30, what="the run seen live")
        assert "running (another process)" in screen_text(later)
        await wait_for(pilot, lambda: watched.view.status == "finished", timeout=120, what="the run finished")
        await wait_for(pilot, lambda: f"log {driver.log}" in screen_text(later), what="the driver's log named")
        assert not later.detached_runs  # a monitor starts nothing: quitting it asks nothing
        await pilot.press("q")
        await wait_for(pilot, lambda: not later.is_running, what="the monitor to quit")
    assert driver.process.wait(timeout=60) == 0
    assert status_of(db, driver.run_id) == "finished"
    assert "run 1: driven by process" in driver.log.read_text()


async def planned(db: Path, settings, name: str) -> int:
    async with await Store.open(db) as store:
        return await plan_run(
            store, settings, load_jsonl(write_jsonl(db.parent / f"{name}.jsonl", small_records())), repeats=3, name=name
        )


@pytest.mark.slow
async def test_quitting_asks_to_leave_the_runs_going_by_default_or_to_stop_them_resumably(tmp_path, slow_keyed_server):
    db = tmp_path / "runs" / "hbtui.sqlite"
    db.parent.mkdir()
    settings = app_settings(slow_keyed_server, db)
    left_id = await planned(db, settings, "left")
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        left = await app.start_detached(left_id, settings)
        runs = app.screen
        driver = f"{socket.gethostname()}:{left.pid}"  # the runs list names the process driving the run
        await wait_for(pilot, lambda: dict(runs._shown)[left_id][-2:] == (driver, middle_cut(str(left.log), 60)), 30)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitModal), what="the question")
        question = app.screen.question
        assert question.startswith(
            f"Run {left_id} (process {left.pid}, log {left.log}) goes on in a process of its own."
        )
        assert "Leave going (l)" in screen_text(app) and "Stop it (s)" in screen_text(app)  # one run: "it"
        # Plain words, no Markdown: the dialog shows text as it is, a backtick as a backtick.
        assert "`" not in question and "(hbtui monitor finds it later)" in question
        await pilot.press("escape")  # stay
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="back in the app")
        assert app.is_running
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitModal), what="the question again")
        await pilot.press("enter")  # the default: leave it going
        await wait_for(pilot, lambda: not app.is_running, what="the app to quit")
    try:
        assert left.going()
        assert app.farewell == (  # the one line `hbtui` prints once the terminal is the shell's again
            f"hbtui: run {left_id} goes on (log {left.log}); watch it with: hbtui monitor {left_id}"
        )

        stopped_id = await planned(db, settings, "stopped")
        again = HBTuiApp(settings=settings, env_file=None)
        async with again.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(again.screen, RunsScreen), what="the runs list")
            stopped = await again.start_detached(stopped_id, settings)
            await wait_for(pilot, lambda: status_of(db, stopped_id) == "running", timeout=30, what="its run going")
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(again.screen, QuitModal), what="the question")
            await pilot.press("s")
            await wait_for(pilot, lambda: not again.is_running, timeout=30, what="the app to quit")
        assert not stopped.going()
        assert status_of(db, stopped_id) == "interrupted"
        assert again.farewell == (
            f"hbtui: stopped run {stopped_id} (what completed is saved); continue with: hbtui resume {stopped_id}"
        )
        assert left.going()  # a run of another app is never stopped by this one
    finally:
        left.stop()
        left.process.wait(timeout=60)
    assert status_of(db, left_id) == "interrupted"


# ---- the app in a real terminal (tmux, on a socket of this test's own) -------------------------


class Terminal:
    """A tmux server of our own, the app (or a shell) in its one pane."""

    def __init__(self, workdir: Path, command: str) -> None:
        self.socket = f"detached-{os.getpid()}"
        self.env = clean_env({"TERM": "xterm-256color"})
        self.tmux("new-session", "-d", "-s", "app", "-x", "140", "-y", "35", "-c", str(workdir), command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True, check=True
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "app", "-J")

    def wait_for(self, text: str, timeout: float = 30.0) -> None:
        wait_until(lambda: text in self.screen(), f"{text!r} on the terminal", timeout)

    def wait_for_line(self, line: str, timeout: float = 30.0) -> None:
        """``line`` as a line of its own: what a command printed, not the command typed that prints it."""
        wait_until(lambda: line in self.screen().splitlines(), f"the line {line!r} on the terminal", timeout)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "app", *keys)

    def pane_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", "app", "#{pane_pid}").strip())

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], env=self.env, capture_output=True)


async def user_folder_with_a_pending_run(tmp_path: Path, server, name: str, kind: str = "model") -> Path:
    """A user's folder (.env for the keyed server, its key in it) whose database holds run 1,
    planned and not started (a model run, or a meta-eval of 30 rows): the app's `c` continues
    it. Returns the database."""
    from hbtui.meta_eval.plan import plan_meta_eval
    from tests.support.meta_rows import meta_rows, write_rows

    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nAPI_KEY={SECRET}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n"
        "CONCURRENCY=1\nGRADER_TEMPLATE=builtin\n"
    )
    db = tmp_path / "runs" / "hbtui.sqlite"
    db.parent.mkdir()
    if kind == "model":
        await planned(db, app_settings(server, db), name)
        return db
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(30, seed=7))
    async with await Store.open(db) as store:
        await plan_meta_eval(store, app_settings(server, db), data, official=False, limit=None, seed=0, name=name)
    return db


def continue_in(terminal: Terminal, db: Path, name: str) -> None:
    """In the app on the terminal: `c` on the runs list, yes, and the run going."""
    terminal.wait_for(name)
    terminal.keys("c")
    terminal.wait_for("Continue this ")  # pending run? / meta-eval?
    terminal.keys("y")
    wait_until(lambda: driver_of(db)[0] == "running", "the run going")


def driver_of(db: Path) -> tuple[str, int, str]:
    """(status, pid of the driving process, log) of run 1, read as any other process would."""
    with sqlite3.connect(db) as conn:
        status, owner, log = conn.execute("SELECT status, owner, driver_log FROM runs WHERE id = 1").fetchone()
    return status, int(owner.split(":")[1]) if owner else 0, log


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_a_run_continued_in_the_app_goes_on_when_the_app_and_its_terminal_are_killed(tmp_path, slow_keyed_server):
    db = await user_folder_with_a_pending_run(tmp_path, slow_keyed_server, "kept")
    terminal = Terminal(tmp_path, f"{sys.executable} -m hbtui")
    try:
        continue_in(terminal, db, "kept")
        terminal.wait_for("driven by")
        app_pid, (_, driver_pid, log) = terminal.pane_pid(), driver_of(db)
        assert app_pid != driver_pid and alive(app_pid) and alive(driver_pid)
        assert SECRET.encode() not in Path(f"/proc/{driver_pid}/cmdline").read_bytes()
        terminal.wait_for(f"log {log}")
        os.kill(app_pid, signal.SIGKILL)  # the app dies at once...
        terminal.close()  # ...and its terminal goes: what an SSH session dropping does to both
        wait_until(lambda: not alive(app_pid), "the app gone")
    finally:
        terminal.close()
    assert alive(driver_pid)
    later = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None, monitor_run="latest")
    async with later.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(later.screen, MonitorScreen) and later.screen.view is not None)
        watched = later.screen
        await wait_for(pilot, lambda: watched.view.status == "running", timeout=30, what="the run seen live")
        await wait_for(pilot, lambda: watched.view.status == "finished", timeout=120, what="the run finished")
    wait_until(lambda: not alive(driver_pid), "its driver to end")
    assert Path(log).name == "run-1-kept.log" and "results:" in Path(log).read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_a_meta_eval_continued_in_the_app_goes_on_when_the_app_and_its_terminal_are_killed(
    tmp_path, slow_keyed_server
):
    from hbtui.tui.screens.meta_eval import MetaEvalScreen

    db = await user_folder_with_a_pending_run(tmp_path, slow_keyed_server, "judged", "meta-eval")
    terminal = Terminal(tmp_path, f"{sys.executable} -m hbtui")
    try:
        continue_in(terminal, db, "judged")
        terminal.wait_for("driven by")  # its screen names the process grading it
        app_pid, (_, driver_pid, log) = terminal.pane_pid(), driver_of(db)
        assert app_pid != driver_pid and alive(driver_pid)
        assert SECRET.encode() not in Path(f"/proc/{driver_pid}/cmdline").read_bytes()
        terminal.wait_for("run-1-judged.log")
        os.kill(app_pid, signal.SIGKILL)
        terminal.close()
        wait_until(lambda: not alive(app_pid), "the app gone")
    finally:
        terminal.close()
    assert alive(driver_pid)
    later = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None, monitor_run="latest")
    async with later.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(later.screen, MetaEvalScreen), timeout=30, what="its screen")
        watched = later.screen
        await wait_for(pilot, lambda: watched.run.status == "finished", timeout=120, what="the meta-eval finished")
    wait_until(lambda: not alive(driver_pid), "its driver to end")
    assert Path(log) == db.parent / "run-1-judged.log" and "grader F1" in Path(log).read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_stopping_the_runs_on_quit_leaves_the_resume_command_in_the_shell(tmp_path, slow_keyed_server):
    db = await user_folder_with_a_pending_run(tmp_path, slow_keyed_server, "stopped")
    terminal = Terminal(tmp_path, "bash --norc --noprofile")
    try:
        terminal.keys(f"{sys.executable} -m hbtui; echo app-ended", "Enter")
        continue_in(terminal, db, "stopped")
        terminal.keys("q")
        terminal.wait_for("Leave going (l)")
        terminal.keys("s")
        # The line echo prints once the app has ended, not the command line that holds it, which
        # is on the screen again as soon as the app leaves its alternate screen, before its last words.
        terminal.wait_for_line("app-ended")
        shell = terminal.screen()
    finally:
        terminal.close()
    line = "hbtui: stopped run 1 (what completed is saved); continue with: hbtui resume 1"
    assert line in shell.splitlines()
    assert driver_of(db)[0] == "interrupted"


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["model", "meta-eval"])
async def test_a_run_started_from_a_browser_tab_goes_on_when_the_tab_is_closed(tmp_path, slow_keyed_server, kind):
    import aiohttp

    from tests.support.served import ServedApp
    from tests.web.test_serve import cookie

    db = await user_folder_with_a_pending_run(tmp_path, slow_keyed_server, "from-a-tab", kind)
    received = bytearray()
    with ServedApp(db, cwd=tmp_path, env=clean_env()) as served:
        url = f"ws://127.0.0.1:{served.port}/ws?width=120&height=30"
        headers = {**cookie(served), "Origin": f"http://127.0.0.1:{served.port}"}
        async with aiohttp.ClientSession() as session, session.ws_connect(url, headers=headers) as websocket:

            async def read_until(text: bytes) -> None:
                while text not in received:
                    message = await websocket.receive()
                    if message.type == aiohttp.WSMsgType.BINARY:
                        received.extend(message.data)
                    elif message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                        raise AssertionError(f"the tab closed before {text!r}")

            await asyncio.wait_for(read_until(b"from-a-tab"), timeout=60)
            (tab_app,) = children_of(served.process.pid)
            await websocket.send_json(["stdin", "c"])
            await asyncio.wait_for(read_until(b"Continue this "), timeout=30)  # pending run? / meta-eval?
            await websocket.send_json(["stdin", "y"])
            await asyncio.to_thread(wait_until, lambda: driver_of(db)[0] == "running", "the run going")
        # The tab is closed: its app ends; the run it started does not.
        await asyncio.to_thread(wait_until, lambda: not alive(tab_app), "the tab's app to end")
        _, driver_pid, _ = driver_of(db)
        assert driver_pid != tab_app and alive(driver_pid)
        await asyncio.to_thread(wait_until, lambda: driver_of(db)[0] != "running", "the run's end", 120)
    assert driver_of(db)[0] == "finished"


async def test_a_driver_that_cannot_take_its_run_says_why_in_the_app_and_its_log(tmp_path, small_dataset):
    from hbtui.store.owners import this_owner

    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = offline_settings(
        base_url="http://127.0.0.1:9/v1", model_test="m", model_grader="g", db_path=str(db), grader_template="builtin"
    )
    async with await Store.open(db) as store:
        run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="taken")
        await store.claim_run(run_id, this_owner())  # a live process of this host drives it: this test's
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        driver = await app.start_detached(run_id, settings)
        await wait_for(
            pilot,
            lambda: any("run 1's process ended: hbtui: error: run 1 is" in n.message for n in app._notifications),
            timeout=30,
            what="the driver's reason",
        )
        assert f"(log {driver.log})" in next(n.message for n in app._notifications if "process ended" in n.message)
        assert driver.process.returncode == 2 and not app.detached_runs


def pick(form, name: str, value: str) -> None:
    from textual.widgets import Select

    form.query_one(f"#field-{name}", Select).value = value


@pytest.mark.slow
async def test_a_meta_eval_started_from_the_form_outlives_the_app_and_a_later_monitor_sees_it_finish(
    tmp_path, slow_keyed_server
):
    from hbtui.tui.screens.meta_eval import MetaEvalScreen
    from tests.support.meta_rows import meta_rows, write_rows

    db = tmp_path / "runs" / "hbtui.sqlite"
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(30, seed=3))
    app = HBTuiApp(settings=app_settings(slow_keyed_server, db), env_file=None)
    async with app.run_test(size=(120, 30)) as pilot:
        form = await open_form(pilot, app)
        pick(form, "run_kind", "meta-eval")
        pick(form, "subset", "file")
        type_into(form, "data_path", str(data))
        type_into(form, "run_name", "audit")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen), timeout=30, what="its screen")
        (driver,) = app.detached_runs.values()
        meta = app.screen
        await wait_for(pilot, lambda: meta.run.status == "running", timeout=30, what="its driver grading")
        named = f"driven by {socket.gethostname()}:{driver.pid}  log {driver.log}"  # who grades it, where it writes
        await wait_for(pilot, lambda: named in screen_text(app), what="its driver and log named")
        assert SECRET.encode() not in Path(f"/proc/{driver.pid}/cmdline").read_bytes()
        assert os.getsid(driver.pid) == driver.pid != os.getsid(0)
    # The app has ended as a closed terminal ends it, asking nothing: the meta-eval goes on.
    assert driver.going() and status_of(db, driver.run_id) == "running"
    later = HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None, monitor_run="latest")
    async with later.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(later.screen, MetaEvalScreen), timeout=30, what="its screen")
        watched = later.screen
        await wait_for(pilot, lambda: watched.run.status == "finished", timeout=120, what="the meta-eval finished")
        await wait_for(
            pilot,
            lambda: "30/30 rows graded" in screen_text(later) and f"log {driver.log}" in screen_text(later),
            what="the summary redrawn with the driver's log",
        )
    assert driver.process.wait(timeout=60) == 0
    assert driver.log == db.parent / "run-1-audit.log"
    log = driver.log.read_text()
    assert "run 1: driven by process" in log and "grader F1" in log and SECRET not in log


async def test_a_meta_eval_continued_with_c_is_graded_by_a_process_of_its_own(tmp_path, slow_keyed_server):
    from hbtui.meta_eval.plan import plan_meta_eval
    from hbtui.tui.screens.meta_eval import MetaEvalScreen
    from tests.support.meta_rows import meta_rows, write_rows

    db = tmp_path / "runs" / "hbtui.sqlite"
    db.parent.mkdir()
    settings = app_settings(slow_keyed_server, db)
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(30, seed=5))  # some 5 s: still going at the second `c`
    async with await Store.open(db) as store:
        await plan_meta_eval(store, settings, data, official=False, limit=None, seed=0, name="later")
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        await pilot.press("c")
        await wait_for(pilot, lambda: "Continue this meta-eval?" in screen_text(app), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen), timeout=30, what="its screen")
        (driver,) = app.detached_runs.values()
        assert SECRET.encode() not in Path(f"/proc/{driver.pid}/cmdline").read_bytes()
        await pilot.press("escape", "c")  # going: `c` watches it, never starts a second driver
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen), what="its screen again")
        assert list(app.detached_runs.values()) == [driver]
    assert driver.process.wait(timeout=60) == 0
    assert status_of(db, 1) == "finished" and driver.log == db.parent / "run-1-later.log"
