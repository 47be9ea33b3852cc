"""The statistics beside the score in the app: a run's screen (worst-at-k, the length-adjusted
score, tokens and cost), the monitor's running token total and cost, and a broken price table
that is a notice, never a crash."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from hbtui.core.settings.config import Settings
from hbtui.core.settings.prices import PriceError, load_prices
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.monitor_data import RunCounters, view_from_store
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.run import RunScreen
from tests.conftest import make_record, run_engine, settings_for, write_jsonl
from tests.support.screen_text import screen_text
from tests.support.tui import wait_for

SIZE = (100, 40)


@pytest.fixture
def config_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "hbtui").mkdir(parents=True)
    return tmp_path / "config" / "hbtui"


@pytest.fixture
async def repeated(server, tmp_path, config_home):
    """Three prompts run 3 times with replies that differ between repeats; the engine's own
    observer of the app (RunCounters) watched it."""
    server.control(numbered_replies=True)
    records = [
        make_record(
            f"p{i}",
            [(f"Criterion {i}.{j}", points, ["axis:accuracy"]) for j, points in enumerate((5, 3, 4, 2, -1))],
            user=f"Question {i}?",
        )
        for i in range(3)
    ]
    data = write_jsonl(tmp_path / "three.jsonl", records)
    db = tmp_path / "runs" / "hbtui.sqlite"
    counters = RunCounters()
    run_id, status = await run_engine(settings_for(server, db), data, repeats=3, name="rep", observers=[counters])
    assert status == "finished"
    return db, run_id, counters


def sums(db: Path, run_id: int) -> tuple[int, int, int, int]:
    with sqlite3.connect(db) as conn:
        test = conn.execute(
            "SELECT sum(prompt_tokens), sum(completion_tokens) FROM conversations WHERE run_id = ?", (run_id,)
        ).fetchone()
        grader = conn.execute(
            "SELECT sum(prompt_tokens), sum(completion_tokens) FROM verdicts WHERE run_id = ?", (run_id,)
        ).fetchone()
    return (*test, *grader)


async def open_run(app, pilot, run_id: int) -> RunScreen:
    await wait_for(pilot, lambda: app.store is not None and len(app.screen_stack) >= 1, what="the app")
    screen = RunScreen(run_id)
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.report is not None and screen.stats is not None, what="the statistics")
    await pilot.pause(0.1)
    return screen


async def test_the_run_screen_shows_worst_at_k_length_adjusted_tokens_and_cost(repeated, config_home):
    db, run_id, _ = repeated
    (config_home / "prices.json").write_text(
        json.dumps({"test-model": {"input": 1.0, "output": 2.0}, "grader-model": {"input": 3.0, "output": 4.0}})
    )
    pt, ct, pg, cg = sums(db, run_id)
    app = HBTuiApp(Settings(db_path=str(db), length_penalty=0.0392), env_file=None)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_run(app, pilot, run_id)
        text = screen_text(app)
        worst = screen.stats.worst_at_k
        assert worst.n_prompts == 3
        assert "Worst-at-k over 3 repeats  (3 prompts with every repeat scored)" in text
        one, two, three = worst.scores
        assert f"score  {one:.3f}  {two:.3f}  {three:.3f}" in text
        adjusted = screen.stats.length_adjusted
        assert f"Length-adjusted {adjusted.value:.3f}  95% CI {adjusted.ci95[0]:.3f}" in text
        assert "penalty 0.0392 (hard) from 2000" in text
        assert f"Tokens of the model under test {pt} in / {ct} out, cost {(pt + 2 * ct) / 1e6:.6f}" in text
        total = (pt + 2 * ct + 3 * pg + 4 * cg) / 1e6
        assert f"Cost {total:.4f} in all" in text


async def test_the_monitor_counts_every_token_the_database_holds_and_prices_them(repeated, config_home):
    db, run_id, counters = repeated
    expected = sums(db, run_id)
    assert tuple(counters.tokens) == expected  # the running total of a run of this process
    async with await Store.open(db) as store:
        assert (await view_from_store(store, run_id)).tokens == expected  # of a run of another process
    (config_home / "prices.json").write_text(json.dumps({"grader-model": {"input": 3.0, "output": 4.0}}))
    _pt, _ct, pg, cg = expected
    app = HBTuiApp(Settings(db_path=str(db)), env_file=None, monitor_run="rep")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert f"cost      test no price, grader {(3 * pg + 4 * cg) / 1e6:.4f}" in text, text


async def test_a_broken_price_table_is_a_notice_and_tokens_still_show(repeated, config_home):
    db, run_id, _ = repeated
    (config_home / "prices.json").write_text('{"test-model": {"input": 1.0, "output": -2}}')
    with pytest.raises(PriceError):
        load_prices()
    app = HBTuiApp(Settings(db_path=str(db)), env_file=None)
    async with app.run_test(size=SIZE) as pilot:
        await open_run(app, pilot, run_id)
        assert "Tokens of the model under test" in screen_text(app) and "(no price)" in screen_text(app)
        notices = [n.message for n in app._notifications]
        assert sum("prices.json: 'test-model'.output: -2 is not a price" in m for m in notices) == 1, notices
        await app.push_screen(MonitorScreen(run_id))  # another screen reading it: said once, not again
        await pilot.pause(0.2)
        assert sum("is not a price" in n.message for n in app._notifications) == 1
