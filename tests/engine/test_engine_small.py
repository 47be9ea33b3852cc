"""The engine against the test server on a socket, into a real SQLite file: hand-computed scores."""

import asyncio
import json
import sqlite3

import pytest

from hbtui.store import Store


def test_small_run_scores_match_hand_computation(finished_run_db):
    async def check():
        async with await Store.open(finished_run_db) as store:
            run = await store.resolve_run("small-run")
            return run, await store.conversation_scores(run.id)

    run, scores = asyncio.run(check())
    assert run.status == "finished"
    # p1: (7 + 10 - 6) / 22 (the reference's worked example); p2: 4 / 4; p3: 3 / 8
    assert scores == [0.5, 1.0, 0.375]
    assert run.report.score == pytest.approx((0.5 + 1.0 + 0.375) / 3)
    metrics = run.report.metrics
    assert metrics["theme:hedging"].value == 0.5 and metrics["theme:hedging"].n == 1
    # axis:accuracy only in p1: (7 + 10 - 6) / 17
    assert metrics["axis:accuracy"].value == pytest.approx(11 / 17)
    # axis:context_awareness in p2: 4 / 4 (the -3 criterion was not met)
    assert metrics["axis:context_awareness"].value == 1.0
    assert run.report.criteria.negative_triggered == 1


def test_every_reply_and_verdict_is_stored(finished_run_db):
    with sqlite3.connect(finished_run_db) as db:
        statuses = dict(db.execute("SELECT status, count(*) FROM verdicts GROUP BY status"))
        replies = db.execute("SELECT reply, prompt_tokens, completion_tokens FROM conversations").fetchall()
        explanations = db.execute("SELECT explanation, raw_output FROM verdicts").fetchall()
    assert statuses == {"met": 5, "not_met": 3}
    assert all(r[0].startswith("Reply ") and r[1] > 0 and r[2] > 0 for r in replies)
    assert all(e and json.loads(raw)["explanation"] == e for e, raw in explanations)
