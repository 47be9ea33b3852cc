"""A meta-eval in the app: started from the configuration screen as a run kind, opened from the
runs list, its rows showing the grader's verdict and explanation beside the physicians' labels."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from textual.widgets import DataTable, Input, Select

from hbtui.core.settings.config import Settings
from hbtui.meta_eval.plan import plan_meta_eval
from hbtui.meta_eval.runner import MetaEvalDriver
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.meta_eval import MetaComparisonScreen, MetaEvalScreen
from hbtui.tui.screens.quit import QuitModal
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings, settings_for
from tests.support.meta_rows import meta_rows, write_rows
from tests.support.tui import screen_text, wait_for
from tests.tui.test_tui_snapshots_app import utc  # noqa: F401 (its autouse fixture: times in UTC)

CREATED = 1767225600.0  # 2026-01-01 00:00 UTC


@pytest.fixture
def meta_eval_db(server, tmp_path):
    """A database holding one finished meta-eval of 60 rows, graded by the test server, with
    its physicians all in the distribution and its clocks fixed."""
    db = tmp_path / "runs" / "hbtui.sqlite"
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(60, seed=4, physicians=5, labels=(2, 4)))
    settings = settings_for(server, db, grader_template="builtin")

    async def make() -> None:
        async with await Store.open(db) as store:
            run_id = await plan_meta_eval(
                store, settings, data, official=False, limit=None, seed=0, name="audit", labels_over=5
            )
            await MetaEvalDriver(store, await store.get_run(run_id), settings, backoff_base=0.01).execute()

    asyncio.run(make())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET created_at = ?, finished_at = ?", (CREATED, CREATED + 30))
    return db


def make_app(db, **values) -> HBTuiApp:
    return HBTuiApp(settings=offline_settings(db_path=str(db), **values), env_file=None)


async def test_a_meta_eval_opens_from_the_runs_list_with_the_graders_f1_beside_the_physicians(meta_eval_db):
    app = make_app(meta_eval_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the runs list")
        await wait_for(pilot, lambda: app.screen.query_one(DataTable).row_count == 1, what="the run")
        listed = screen_text(app)
        assert "meta-eval" in listed and "F1 0." in listed and "60/60" in listed
        await pilot.press("m")  # a meta-eval's own screen is its monitor
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen), what="m opens the meta-eval screen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen), what="the meta-eval screen")
        screen = app.screen
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "grader F1" in text and "physicians (5, more than 5 labels)" in text and "median" in text
        first = screen.rows[0]
        detail = str(screen.query_one("#meta-detail-text").render())
        assert f"rubric: {first.rubric}" in detail and "grader: " in detail
        assert all(who in detail for who in first.physician_ids)
        await pilot.press("j")
        await pilot.pause(0.1)
        assert screen.rows[1].rubric in str(screen.query_one("#meta-detail-text").render())
        await pilot.press("d")  # only where the grader goes against most physicians
        await wait_for(pilot, lambda: screen.disagreements_only, what="the filter")
        await pilot.pause(0.1)
        assert screen.rows and all(row_agreement(row) == "no" for row in screen.rows)
        assert len(screen.rows) < 60


def row_agreement(row) -> str:
    from hbtui.tui.screens.meta_eval import agreement

    return agreement(row)


async def test_a_meta_eval_started_from_the_configuration_screen_runs_to_the_end(server, tmp_path):
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(30, seed=6))
    app = make_app(tmp_path / "runs" / "hbtui.sqlite")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        screen.query_one("#field-base_url", Input).value = server.base_url
        screen.query_one("#field-model_grader", Input).value = "grader-model"  # no model under test needed
        screen.query_one("#field-run_kind", Select).value = "meta-eval"
        screen.query_one("#field-subset", Select).value = "file"
        screen.query_one("#field-data_path", Input).value = str(data)
        screen.query_one("#field-run_name", Input).value = "from-the-form"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen), what="the meta-eval screen")
        meta = app.screen
        (driver,) = app.detached_runs.values()  # graded by a process of its own, as a model run is
        await wait_for(pilot, lambda: meta.run.status == "finished", timeout=30, what="the meta-eval to finish")
        await wait_for(pilot, lambda: "30/30 rows graded" in screen_text(app), what="the summary redrawn")
    assert driver.process.wait(timeout=30) == 0
    async with await Store.open(tmp_path / "runs" / "hbtui.sqlite") as store:
        run = await store.resolve_run("from-the-form")
        counts = await store.meta_eval_counts(run.id)
    assert run.kind == "meta-eval" and run.status == "finished" and counts["met"] + counts["not_met"] == 30


SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_meta_eval_screen(snap_compare, meta_eval_db, size):
    app = HBTuiApp(settings=Settings(db_path=str(meta_eval_db)), env_file=None)

    async def ready(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen))
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=ready)


async def test_two_meta_evals_marked_and_compared_show_side_by_side_and_a_model_run_is_refused(
    meta_eval_db, server, finished_run_db
):
    assert finished_run_db == meta_eval_db  # one database: the meta-eval (run 1) and a model run (run 2)
    settings = settings_for(server, meta_eval_db, grader_template="builtin", model_grader="test-model")
    async with await Store.open(meta_eval_db) as store:
        second = await store.create_meta_eval_regrade(
            1, name="again", name_base="again", model_grader="test-model", settings=settings.public_dict()
        )
        await MetaEvalDriver(store, await store.get_run(second), settings, backoff_base=0.01).execute()
        model_run = await store.get_run(2)
        assert model_run.kind == "model"
        with pytest.raises(ValueError, match="has no HealthBench score to compare with a model run"):
            await MetaComparisonScreen.read(store, await store.get_run(1), model_run)
    app = make_app(meta_eval_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 3)
        await pilot.press("space", "j", "j", "space", "C")  # runs 3 and 1, the model run between them
        await wait_for(pilot, lambda: isinstance(app.screen, MetaComparisonScreen), what="the comparison")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "meta-evals on the 60 rows both graded" in text and "grader F1 (pairwise, balanced)" in text


async def test_quitting_while_a_meta_eval_goes_on_asks_then_keeps_what_was_graded(server, tmp_path):
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(400, seed=8))
    db = tmp_path / "runs" / "hbtui.sqlite"
    server.control(latency_ms=50)
    app = make_app(db, base_url=server.base_url, model_grader="grader-model", grader_concurrency=2)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        screen = app.screen
        screen.query_one("#field-run_kind", Select).value = "meta-eval"
        screen.query_one("#field-subset", Select).value = "file"
        screen.query_one("#field-data_path", Input).value = str(data)
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MetaEvalScreen), what="the meta-eval screen")
        meta = app.screen
        await wait_for(pilot, lambda: meta.counts.get("met", 0) > 0, what="the first verdicts")
        (driver,) = app.detached_runs.values()
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitModal), what="the question")
        assert app.screen.question.startswith(f"Run 1 (process {driver.pid}, log {driver.log}) goes on")
        await pilot.press("s")  # stop it, and quit
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to quit")
    assert driver.process.wait(timeout=30) == 130
    assert app.farewell == "hbtui: stopped run 1 (what completed is saved); continue with: hbtui resume 1"
    with sqlite3.connect(db) as conn:
        status = conn.execute("SELECT status FROM runs").fetchone()[0]
        graded = conn.execute("SELECT count(*) FROM meta_eval_rows WHERE status IN ('met', 'not_met')").fetchone()[0]
    assert status == "interrupted" and 0 < graded < 400


def test_a_meta_eval_rows_text_is_data_never_terminal_control():
    """The file's conversation, completion and rubric, and the grader's explanation, are shown with
    their control characters visible: an escape sequence there must not colour the screen or set
    the terminal's title (a new user's trial found both on this screen)."""
    from hbtui.store.meta_eval import MetaEvalRowView
    from hbtui.tui.screens.meta_eval import row_detail

    hostile = "\x1b[31mRED\x1b[0m \x1b]0;TITLE\x07 [bold]markup[/bold]"
    row = MetaEvalRowView(
        row_id=1,
        position=0,
        line=1,
        prompt=[{"role": "user", "content": "prompt " + hostile}],
        completion="completion " + hostile,
        rubric="rubric " + hostile,
        category="cat",
        labels=(True, False),
        physician_ids=("a", "b"),
        status="met",
        explanation="because " + hostile,
        error=None,
    )
    shown = row_detail(row).plain
    assert "\x1b" not in shown and "\x07" not in shown
    for what in ("prompt", "completion", "rubric", "because"):
        assert f"{what} ␛[31mRED␛[0m ␛]0;TITLE␇ [bold]markup[/bold]" in shown
