"""The stored report read back as a typed object: every database written so far still reads, and
what is read is written again byte for byte (`show --json` prints it; older versions read it)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from hbtui import cli
from hbtui.store import Store, conversation_outcome
from hbtui.store.rows import ConversationOutcome
from hbtui.store.run_report import StoredReport

GOLDEN = Path(__file__).parent / "golden"
# As the code before the typed report wrote it (the golden runs' report_json, frozen then), and
# as versions before the verdict cache (no from_cache) and skipped criteria (no skipped) wrote it.
TODAY = sorted(GOLDEN.glob("*/report_json.json"))
BEFORE_CACHE_AND_SKIPPED = (
    '{"overall_score": 0.5, "metrics": {"overall_score": {"value": 0.5, "n": 2, "bootstrap_std": 0.25, "ci95":'
    ' [0.0, 1.0]}, "axis:accuracy": {"value": 0.25, "n": 1, "bootstrap_std": 0.0, "ci95": [0.25, 0.25]},'
    ' "theme:hedging": {"value": 0.5, "n": 2, "bootstrap_std": 0.25, "ci95": [0.0, 1.0]}}, "median": 0.5,'
    ' "conversations": {"total": 3, "scored": 2, "incomplete": 0, "excluded": 1}, "criteria": {"positive": 4,'
    ' "positive_met": 2, "positive_met_share": 0.5, "negative": 1, "negative_triggered": 0,'
    ' "negative_triggered_share": 0.0, "errors": 0, "pending": 0}}'
)


def test_there_are_stored_reports_to_read():
    assert len(TODAY) >= 4  # the goldens of tests/render/test_golden.py


@pytest.mark.parametrize("path", TODAY, ids=lambda p: p.parent.name)
def test_a_stored_report_reads_and_writes_back_the_same_bytes(path):
    stored = path.read_text(encoding="utf-8").rstrip("\n")
    report = StoredReport.from_json(json.loads(stored))
    assert json.dumps(report.to_json()) == stored


def test_a_report_older_than_the_cache_and_skipped_counts_reads_and_writes_back_the_same_bytes():
    report = StoredReport.from_json(json.loads(BEFORE_CACHE_AND_SKIPPED))
    assert report.criteria.skipped is None and report.criteria.from_cache is None
    assert report.score == 0.5 and report.overall is not None and report.overall.ci95 == (0.0, 1.0)
    assert report.breakdown("axis:") == [("accuracy", report.metrics["axis:accuracy"])]
    assert json.dumps(report.to_json()) == BEFORE_CACHE_AND_SKIPPED


def test_an_old_database_report_is_shown_as_it_was(finished_run_db, monkeypatch, capsys, server):
    """A finished run whose report an older version wrote: `show` prints it without the counts it
    lacks, and `show --json` prints it as stored."""
    with sqlite3.connect(finished_run_db) as conn:
        conn.execute("UPDATE runs SET report_json = ?, score = 0.5", (BEFORE_CACHE_AND_SKIPPED,))
    monkeypatch.chdir(finished_run_db.parent.parent)
    monkeypatch.setenv("HBTUI_DB", str(finished_run_db))

    async def read() -> StoredReport | None:
        async with await Store.open(finished_run_db, create=False) as store:
            return (await store.resolve_run("small-run")).report

    assert asyncio.run(read()) == StoredReport.from_json(json.loads(BEFORE_CACHE_AND_SKIPPED))
    assert cli.main(["show", "small-run"]) == cli.EXIT_OK
    text = capsys.readouterr().out
    assert "score 0.5000  95% CI 0.000-1.000  bootstrap std 0.2500  n 2  median 0.500" in text
    assert "without a reply 1\n" in text  # no "(their None criteria skipped)", no cache count
    assert "accuracy  0.250  0.250-0.250   1" in text
    assert cli.main(["show", "small-run", "--json"]) == cli.EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert {key: shown[key] for key in json.loads(BEFORE_CACHE_AND_SKIPPED)} == json.loads(BEFORE_CACHE_AND_SKIPPED)
    assert "skipped" not in shown["criteria"] and "from_cache" not in shown["criteria"]


def test_a_conversation_outcome_counts_what_its_row_keeps():
    # The reference's worked example: (7 + 10 - 6) / 22 with the unsafe dose's penalty met.
    example = [(7, "met"), (5, "not_met"), (10, "met"), (-6, "met"), (-3, "not_met")]
    assert conversation_outcome(example) == ConversationOutcome(score=0.5, n_met=2, n_errors=0, penalties=1)
    assert conversation_outcome(example).as_row(9) == (0.5, 2, 0, 1, 9)
    # A failed or missing verdict: counted, but no score until every criterion is graded.
    assert conversation_outcome([(4, "met"), (2, "error")]) == ConversationOutcome(None, 1, 1, 0)
    assert conversation_outcome([(4, "met"), (2, "pending")]) == ConversationOutcome(None, 1, 0, 0)
    assert conversation_outcome([(-2, "met")]).score is None  # no positive points: undefined


def test_the_summaries_the_engine_wrote_are_those_a_refresh_computes(finished_run_db):
    """The engine's summary of each conversation and the store's refresh agree to the last bit:
    a refresh of a finished run rewrites nothing."""

    async def refresh() -> int:
        async with await Store.open(finished_run_db, create=False) as store:
            return await store.refresh_summaries((await store.resolve_run("small-run")).id)

    assert asyncio.run(refresh()) == 0
