"""The monitor attached to a run that another process drives (`hbtui run`, as under nohup):
it reads the database only, sees the counts grow and the end, and never stops that process."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

from hbtui.analysis.progress import running_spans
from hbtui.core.settings.config import Settings
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.monitor_data import RunCounters, view_from_counters, view_from_store
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.screens.runs import RunsScreen
from hbtui.tui.widgets.histogram import ScoreHistogram
from tests.conftest import make_record, write_jsonl
from tests.support.synth import synthesize_run
from tests.support.tui import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def twelve_records(tmp_path) -> Path:
    """12 conversations x 5 criteria: 72 calls, a few seconds at 2 in flight and 80 ms each."""
    records = [
        make_record(
            f"m{i}",
            [
                (f"[[MET]] point {j}", 2, ["axis:accuracy"])
                if j % 2
                else (f"[[NOT_MET]] point {j}", 3, ["axis:completeness"])
                for j in range(5)
            ],
            user=f"question number {i}",
        )
        for i in range(12)
    ]
    return write_jsonl(tmp_path / "twelve.jsonl", records)


@contextmanager
def headless_run(server, db: Path, data: Path, name: str, cwd: Path):
    """`hbtui run` in its own process, as under nohup, once its run is in the database."""
    env = dict(
        os.environ,
        BASE_URL=server.base_url,
        MODEL_TEST="test-model",
        MODEL_GRADER="grader-model",
        HBTUI_DB=str(db),
        CONCURRENCY="2",
        PYTHONPATH=str(ROOT),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "hbtui", "run", "--data", str(data), "--name", name],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_run_row(db, name, process)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def wait_for_run_row(db: Path, name: str, process: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                with sqlite3.connect(db) as connection:
                    if connection.execute(
                        "SELECT 1 FROM runs WHERE name = ? AND status = 'running'", (name,)
                    ).fetchone():
                        return
            except sqlite3.OperationalError:
                pass  # the schema is being created
        if process.poll() is not None:
            raise AssertionError(f"hbtui run ended early: {process.stderr.read()}")
        time.sleep(0.05)
    raise AssertionError("the run never started")


@asynccontextmanager
async def app_on_a_headless_run(server, records: Path, tmp_path: Path, name: str, *, on: str):
    """`hbtui run` going in its own process (as under nohup), and the app attached to it, either
    ``on="monitor"`` (`hbtui monitor NAME`) or ``on="results"`` (enter on the runs list): yields
    (app, pilot, process); the process must then end by itself with exit code 0."""
    db = tmp_path / "runs" / "hbtui.sqlite"
    with headless_run(server, db, records, name, tmp_path) as process:
        app = HBTuiApp(settings=Settings(db_path=str(db)), env_file=None, monitor_run=name if on == "monitor" else None)
        async with app.run_test(size=(80, 24)) as pilot:
            if on == "monitor":
                await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
            else:
                await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
                await pilot.press("enter")
                await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run's results")
            yield app, pilot, process
        assert process.wait(timeout=30) == 0


async def test_the_monitor_follows_a_run_of_another_process_to_its_end(server, twelve_records, tmp_path):
    server.control(latency_ms=80)
    async with app_on_a_headless_run(server, twelve_records, tmp_path, "outside", on="monitor") as (app, pilot, _):
        monitor = app.screen
        assert not monitor.view.in_process
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while monitor.view.status != "finished" and time.monotonic() < deadline:
            if not seen or seen[-1] != monitor.view.criteria_graded:
                seen.append(monitor.view.criteria_graded)
            await pilot.pause(0.1)
        assert monitor.view.status == "finished"
        assert len(seen) >= 3 and seen == sorted(seen), seen  # it grew, step by step, never back
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "finished" in text and "60/60" in text and "12/12" in text
        assert f"final score {monitor.view.final_score:.3f}" in text


async def test_closing_the_monitor_never_stops_the_other_process(server, twelve_records, tmp_path):
    server.control(latency_ms=150)
    async with app_on_a_headless_run(server, twelve_records, tmp_path, "keeps-going", on="monitor") as (
        app,
        pilot,
        process,
    ):
        # Pause and cancel now reach another process's run through the database
        # (tests/engine/test_run_control.py); leaving its monitor and the app must not.
        await pilot.pause(0.2)
        assert app.screen.view.status == "running" and not app.live_runs
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("q")  # nothing of this process runs, so it quits without asking
        await wait_for(pilot, lambda: not app.is_running)
        assert process.poll() is None, "closing the monitor stopped the run"
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as connection:  # and it went on to its end
        assert connection.execute("SELECT status FROM runs WHERE name = 'keeps-going'").fetchone() == ("finished",)


async def test_the_results_of_a_running_run_follow_it_to_its_end(server, twelve_records, tmp_path):
    server.control(latency_ms=80)
    async with app_on_a_headless_run(server, twelve_records, tmp_path, "followed", on="results") as (app, pilot, _):
        screen = app.screen
        listed: list[int] = []
        histogram: list[int] = []
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            run = screen.run
            listed.append(
                sum(
                    1
                    for i in range(screen.conversation_list.total)
                    if (row := screen.conversation_list.row(i)) is not None and row.score is not None
                )
            )
            histogram.append(len(screen.query_one(ScoreHistogram).scores))
            if run.status == "finished" and screen.report and screen.report.score is not None:
                break
            await pilot.pause(0.2)
        assert screen.run.status == "finished", "the screen never saw the run end"
        # Seen while it ran: the scores grew step by step on the same screen, never going back.
        assert len(set(histogram)) >= 3 and histogram == sorted(histogram), histogram
        assert listed == sorted(listed) and listed[-1] == 12, listed
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "finished" in text and "Conversations 12: 12 scored" in text, text
        assert f"score {screen.run.score:.3f}" in text


def test_the_rate_of_a_run_just_started_counts_only_the_seconds_it_has_run():
    """Divided by the full 10 s window, two seconds of 5 calls each read as 1 call/s, and the
    first ETA of a continued run came out several times too long."""
    counters = RunCounters()
    counters._started = 100.2
    counters._completions.extend([[100, 5], [101, 5]])
    assert counters.calls_per_second(now=102.5) == 5.0
    counters._completions.extend([[second, 5] for second in range(102, 120)])
    assert counters.calls_per_second(now=120.5) == 5.0  # past the first 10 s: the 10 s window


async def test_a_conversation_opened_before_its_reply_fills_in_as_the_run_answers(server, twelve_records, tmp_path):
    server.control(latency_ms=120)
    async with app_on_a_headless_run(server, twelve_records, tmp_path, "early", on="results") as (app, pilot, _):
        await pilot.press("2", "G", "enter")  # the last conversation: the run is far from it
        await wait_for(pilot, lambda: isinstance(app.screen, ConversationScreen) and app.screen.loaded)
        conversation = app.screen
        assert conversation.detail.summary.status == "pending"
        assert "not generated yet" in screen_text(app) and "no reply" not in screen_text(app)
        await wait_for(
            pilot,
            lambda: (
                conversation.detail.reply is not None
                and all(v.status != "pending" for v in conversation.detail.verdicts)
            ),
            timeout=40,
            what="the reply and its verdicts, on the screen left open",
        )
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "Reply " in text and "not generated yet" not in text and "pending" not in text


async def test_the_rate_of_a_run_resumed_by_another_process_counts_from_its_resume(tmp_path, monkeypatch):
    db = tmp_path / "hbtui.sqlite"
    owner = f"{socket.gethostname()}:{os.getpid()}"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=20, criteria_per=5)
        now = time.time()
        lease = await store.claim_run(run_id, owner)
        await store.heartbeat(run_id, lease, {"paused": False, "started_at": now - 2.0})
        # 20 verdicts in the 2 s since the resume; nothing in the 8 s before (the run was stopped).
        await store.db.execute("UPDATE verdicts SET graded_at = ? WHERE run_id = ? AND idx < 1", (now - 1.0, run_id))
        await store.db.commit()
        monkeypatch.setattr(time, "time", lambda: now)  # read at once, however slow the writes were
        view = await view_from_store(store, run_id)
        monkeypatch.undo()
    assert view.status == "running"
    assert 9.0 <= view.calls_per_second <= 10.0  # 20 calls in about 2 s, not 20 in 10 s


def test_a_score_that_arrives_between_two_ticks_makes_the_views_differ():
    # The screen repaints only when the new view differs from the last; two views sharing the
    # counters' list of scores would always compare equal on it.
    from tests.analysis.test_compare import run_row

    counters = RunCounters()
    counters.scores.append(0.5)
    before = view_from_counters(run_row(1), counters, {})
    counters.scores.append(0.75)
    after = view_from_counters(run_row(1), counters, {})
    assert before != after and before.scores == [0.5]


def test_a_rate_just_after_a_pause_counts_the_running_seconds_only():
    """Paused 90 s, then 3 s at 10 calls/s: over the last 10 s of wall time it read 3 calls/s
    (and an ETA three times too long); over the last 10 s of running time it is 10."""
    counters = RunCounters()
    counters._started = 100.0
    counters._completions.extend([[second, 10] for second in range(100, 110)])
    counters._completions.append([110, 3])  # the calls in flight when it paused, answered
    counters._completions.extend([[second, 10] for second in range(200, 203)])
    pauses = [(110.0, 200.0)]
    assert counters.calls_per_second(now=203.5, pauses=pauses) == 10.0
    # Still paused: no running second since, the rate is that of before the pause.
    assert counters.calls_per_second(now=150.5, pauses=[(110.0, None)]) == 10.0


def test_the_running_window_leaves_out_every_pause_and_the_time_before_the_start():
    assert running_spans(203.0, 100.0, [(110.0, 200.0)]) == [(200.0, 203.0), (103.0, 110.0)]
    assert running_spans(203.0, 100.0, [(110.0, 200.0), (201.0, 202.0)]) == [
        (202.0, 203.0),
        (200.0, 201.0),
        (102.0, 110.0),
    ]
    assert running_spans(105.0, 100.0, []) == [(100.0, 105.0)]  # a run of 5 s: a 5 s window


def test_a_monitor_of_another_process_leaves_the_paused_seconds_out_of_the_rate(finished_run_db):
    """The driver's heartbeat carries its pauses: the rate read from the database is over the
    running seconds, 4 calls before a 92 s pause and 4 in the 3 s since, over 10 s (it read 0.4
    calls/s, counting the paused seconds, instead of 0.8)."""
    import asyncio
    import json

    from hbtui.store.owners import this_owner

    now = time.time()
    live = {"paused": False, "started_at": now - 200, "pauses": [[now - 95, now - 3]], "endpoints": {}}
    with sqlite3.connect(finished_run_db) as conn:
        conn.execute(
            "UPDATE runs SET status = 'running', owner = ?, heartbeat_at = ?, live_json = ?",
            (this_owner(), now, json.dumps(live)),
        )
        conn.execute("UPDATE conversations SET generated_at = ?", (now - 300,))
        ids = [row[0] for row in conn.execute("SELECT id FROM verdicts ORDER BY id")]
        assert len(ids) == 8
        for index, verdict_id in enumerate(ids):
            at = now - 98 if index < 4 else now - 1.5
            conn.execute("UPDATE verdicts SET graded_at = ? WHERE id = ?", (at, verdict_id))

    async def view():
        async with await Store.open(finished_run_db) as store:
            return await view_from_store(store, 1)

    shown = asyncio.run(view())
    assert shown.status == "running"
    assert shown.calls_per_second == pytest.approx(0.8, abs=0.01)


async def test_each_bar_says_what_it_counts_and_the_score_names_its_n(finished_run_db):
    """Replies all in, verdicts at 84%: the full bar says replies, not conversations, and the
    score says over how many scored conversations."""
    from hbtui.analysis.progress import Tally
    from hbtui.tui.monitor_data import MonitorView

    app = HBTuiApp(settings=Settings(db_path=str(finished_run_db)), env_file=None, monitor_run="small-run")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        screen = app.screen
        screen._polling = True  # no database read replaces the view below
        await pilot.pause(0.3)
        tally = Tally(conversations_total=50, replies=50, criteria_total=100, graded=84)
        screen.apply(MonitorView(1, "small-run", "running", tally=tally, scores=[0.5] * 37))
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "replies" in text and "verdicts" in text and "conversations━" not in text
        assert "100%50/50" in text.replace(" ", "") and "84%84/100" in text.replace(" ", "")
        assert "over 37 scored conversations" in text and "n=37" not in text.split("conversation scores")[0]
