"""Pause, unpause and cancel a run from another process, through the database.

A real `hbtui run` drives the run against the test server (a real process, slowed so that the
run lasts); `hbtui pause|unpause|cancel` come from other processes, as from a second SSH login.
The driver applies them within a second; calls in flight finish and are stored (they are paid
for), and no new call starts.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hbtui.store import Store
from hbtui.store.owners import this_owner
from tests.cli.test_cli import clean_env, hbtui
from tests.conftest import small_records, write_jsonl

LATENCY_MS = 400


@pytest.fixture
def workdir(tmp_path, server):
    server.control(latency_ms=LATENCY_MS)
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\nCONCURRENCY=1\n"
        "GRADER_TEMPLATE=builtin\n"
    )
    # Enough work at one call at a time to outlast the test's requests: each record 3 times.
    write_jsonl(tmp_path / "data.jsonl", small_records())
    return tmp_path


@contextmanager
def driven_run(workdir: Path, server, env_extra: dict | None = None) -> Iterator[subprocess.Popen]:
    """`hbtui run` driving run 1 ("long"), once its calls are going; killed if a test leaves it."""
    driver = subprocess.Popen(
        [sys.executable, "-m", "hbtui", "run", "--data", "data.jsonl", "--repeats", "3", "--name", "long"],
        cwd=workdir,
        env=clean_env(env_extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: run_row(workdir)[0] == "running" and server.stats()["requests"] >= 2, "the run going")
        yield driver
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


def run_row(workdir: Path) -> tuple[str, str | None, str | None]:
    """(status, control, live_json) of the run, read as any other process would."""
    db = workdir / "runs" / "hbtui.sqlite"
    if not db.exists():
        return ("", None, None)
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT status, control, live_json FROM runs").fetchone()
    except sqlite3.OperationalError:  # the file made, its tables not yet
        return ("", None, None)
    return row or ("", None, None)


def wait_until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.1)


def answers_stored(workdir: Path) -> int:
    with sqlite3.connect(workdir / "runs" / "hbtui.sqlite") as conn:
        replies = conn.execute("SELECT coalesce(sum(attempts), 0) FROM conversations").fetchone()[0]
        verdicts = conn.execute("SELECT coalesce(sum(attempts), 0) FROM verdicts").fetchone()[0]
    return replies + verdicts


def last_pause(workdir: Path) -> list:
    """The latest [start, end] pause of the run's heartbeat; [] before the first."""
    pauses = json.loads(run_row(workdir)[2] or "{}").get("pauses") or [[]]
    return pauses[-1]


def test_a_run_paused_from_another_process_starts_no_call_until_unpaused_then_finishes(workdir, server):
    with driven_run(workdir, server) as driver:
        paused = hbtui("pause", "long", cwd=workdir, timeout=60)
        assert paused.returncode == 0, paused.stderr
        assert "run 1: pause asked of its driver" in paused.stdout
        assert "run 1 is paused: its calls in flight finish, no new one starts" in paused.stdout
        assert run_row(workdir)[1] == "paused"
        # The call that was in flight is answered; after it, none goes out while paused.
        wait_until(lambda: server.stats()["in_flight"] == 0, "the call in flight answered")
        calls = server.stats()["requests"]
        time.sleep(1.5)  # three times what the driver takes to see a control, and a call to leave
        assert server.stats()["requests"] == calls
        listed = hbtui("runs", cwd=workdir)
        assert "paused" in listed.stdout
        # The heartbeat says since when: monitors leave the paused seconds out of the rate.
        wait_until(lambda: last_pause(workdir)[1:] == [None], "the pause in the driver's heartbeat")
        going = hbtui("unpause", "long", cwd=workdir, timeout=60)
        assert going.returncode == 0, going.stderr
        wait_until(lambda: last_pause(workdir)[1:] != [None], "the pause's end in the heartbeat")
        assert "run 1 is going on" in going.stdout
        assert driver.wait(timeout=120) == 0, driver.stderr.read() if driver.stderr else ""
    assert run_row(workdir)[0] == "finished"


def test_a_pause_and_an_unpause_show_at_once_not_with_the_next_heartbeat(workdir, server):
    """Issue 25, item 8: a monitor elsewhere said "paused" for two seconds after an unpause. With
    heartbeats a minute apart, each change must still reach the database within `hbtui pause`'s
    few seconds of patience: the driver writes its figures the moment it applies one."""
    slow_beats = {"HBTUI_HEARTBEAT_SECONDS": "60", "HBTUI_HEARTBEAT_PATIENCE": "600"}
    with driven_run(workdir, server, slow_beats) as driver:
        paused = hbtui("pause", "long", cwd=workdir, env_extra=slow_beats, timeout=60)
        assert "run 1 is paused" in paused.stdout, paused.stdout + paused.stderr
        going = hbtui("unpause", "long", cwd=workdir, env_extra=slow_beats, timeout=60)
        assert "run 1 is going on" in going.stdout, going.stdout + going.stderr
        assert json.loads(run_row(workdir)[2])["paused"] is False
        driver.kill()
        driver.wait()


def test_a_run_cancelled_from_another_process_ends_cancelled_keeping_every_answer_it_paid_for(workdir, server):
    with driven_run(workdir, server) as driver:
        cancelled = hbtui("cancel", "long", cwd=workdir, timeout=60)
        assert cancelled.returncode == 0, cancelled.stderr
        assert "run 1: cancel asked of its driver" in cancelled.stdout
        driver.wait(timeout=60)
    assert run_row(workdir)[0] == "cancelled"
    # Every call the server answered is stored: the one in flight at the cancel finished.
    assert answers_stored(workdir) == server.stats()["requests"]
    again = hbtui("pause", "long", cwd=workdir)
    assert (again.returncode, again.stderr) == (2, "hbtui: error: run 1 is cancelled: there is nothing to pause\n")


def test_a_driver_gone_silent_is_said_not_pretended(tmp_path, small_dataset):
    import asyncio

    async def make() -> None:
        async with await Store.open(tmp_path / "runs" / "hbtui.sqlite") as store:
            from hbtui.core.dataset import load_jsonl
            from hbtui.core.settings.config import Settings
            from hbtui.services import plan_run

            settings = Settings(base_url="http://127.0.0.1:9/v1", model_test="m", model_grader="g")
            run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="gone")
            await store.claim_run(run_id, "otherhost:123:1")  # another host, whose heartbeat then stops
            await store.db.execute("UPDATE runs SET heartbeat_at = 1 WHERE id = ?", (run_id,))
            await store.db.commit()

    asyncio.run(make())
    result = hbtui("pause", "gone", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "hbtui: error: run 1's driver (otherhost:123) is gone, or silent past its heartbeat: nothing runs to"
        " pause (hbtui resume 1 continues the run)\n"
    )


async def test_the_monitor_asks_the_driver_of_another_process_through_the_database(tmp_path, small_dataset):
    from hbtui.core.dataset import load_jsonl
    from hbtui.core.settings.config import Settings
    from hbtui.services import plan_run
    from hbtui.tui.screens.monitor import MonitorScreen
    from tests.support.browser_harness import browser_app
    from tests.support.tui import wait_for

    db = tmp_path / "runs" / "hbtui.sqlite"
    async with await Store.open(db) as store:
        settings = Settings(base_url="http://127.0.0.1:9/v1", model_test="m", model_grader="g")
        run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="elsewhere")
        # Driven by a live process that is not the app's (this test's, for the app a stranger).
        await store.claim_run(run_id, this_owner())
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.store is not None, what="the app's database")
        screen = MonitorScreen(run_id)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.view is not None and screen.controllable, what="a running view")
        await pilot.press("p")
        await wait_for(pilot, lambda: run_control(db) == "paused", what="the pause asked")
        await pilot.press("x")
        await pilot.press("y")  # the confirmation
        await wait_for(pilot, lambda: run_control(db) == "cancelled", what="the cancel asked")


def run_control(db: Path) -> str | None:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT control FROM runs").fetchone()[0]


async def test_the_printed_rate_after_a_pause_from_another_process_leaves_the_paused_seconds_out(tmp_path, server):
    """`hbtui pause` from another process, a pause of 90 s (the printer's clock moved on while
    it lasted), then `hbtui unpause`: the headless line's calls/s is over the last 10 s of
    running time, the 6 s before the pause and the 3 since (it was over every second since the
    start, the 90 paused ones included)."""
    import asyncio
    import io
    import re

    from hbtui.core.dataset import load_jsonl
    from hbtui.core.events import CriterionGraded, ReplyGenerated
    from hbtui.render.printer import ProgressPrinter
    from hbtui.services import Engine, plan_run
    from tests.conftest import settings_for

    server.control(latency_ms=300)
    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db, concurrency=1, grader_template="builtin")
    now = [1000.0]  # the printer's wall clock, moved by hand
    answered: list[float] = []  # when each call was answered, by that clock

    class Answers:
        def on_event(self, event) -> None:
            if isinstance(event, ReplyGenerated | CriterionGraded):
                answered.append(now[0])

    async def until(condition, what: str) -> None:
        for _ in range(600):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"never: {what}")

    out = io.StringIO()
    printer = ProgressPrinter(out, every=1e9, clock=lambda: now[0])  # started at 1000
    async with await Store.open(db) as store:
        data = write_jsonl(tmp_path / "data.jsonl", small_records())
        run_id = await plan_run(store, settings, load_jsonl(data), repeats=3, name="paused")
        engine = Engine(store, await store.get_run(run_id), settings, [printer, Answers()])
        now[0] = 1005.0  # the calls before the pause: in the run's sixth second
        running = asyncio.ensure_future(engine.execute())
        try:
            await until(lambda: len(answered) >= 3, "calls answered")
            now[0] = 1006.0  # answered from here on: in flight at the pause, in a second it began
            pause = asyncio.ensure_future(asyncio.to_thread(hbtui, "pause", str(run_id), "--db", str(db), cwd=tmp_path))
            await until(lambda: printer.pauses and printer.pauses[-1][1] is None, "the pause applied")
            await until(lambda: engine.pool.in_flight() == 0, "the calls in flight answered")
            assert (await pause).returncode == 0
            now[0] = 1096.0  # 90 s later
            args = ("unpause", str(run_id), "--db", str(db))
            unpause = asyncio.ensure_future(asyncio.to_thread(hbtui, *args, cwd=tmp_path))
            await until(lambda: printer.pauses[-1][1] is not None, "the run going on")
            await until(lambda: answered.count(1096.0) >= 3, "calls answered since")
            now[0] = 1099.0
            printed_before = len(out.getvalue())
            printer.progress_line()
            line = out.getvalue()[printed_before:]
            assert printer.pauses == [(1006.0, 1096.0)]
            assert (await unpause).returncode == 0
        finally:
            engine.cancel()
            await running
    before, since = answered.count(1005.0), answered.count(1096.0)
    shown = float(re.search(r"([\d.]+) calls/s", line).group(1))
    assert shown == round((before + since) / 9, 1), (line, before, since)
