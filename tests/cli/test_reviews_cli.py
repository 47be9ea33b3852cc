"""A run's review where users read it: `show --reviewed`, `show --json` (its ``review`` key) and
the exports' review columns."""

import asyncio
import csv
import json

import pytest

from hbtui import cli
from hbtui.core import reviews as rv
from hbtui.core.verdicts import kappa_of
from hbtui.render.export import CSV_COLUMNS
from hbtui.render.export_reviews import REVIEW_CSV_COLUMNS
from hbtui.store import Store

NUMBER_COLUMNS = ["conversation_number", "repeat_number", "criterion_number"]
GRADER_COLUMNS = [
    "position",
    "repeat",
    "prompt_id",
    "conversation_score",
    "criterion_index",
    "criterion",
    "points",
    "tags",
    "criteria_met",
    "status",
    "explanation",
    "error_kind",
    "error",
]


def review_run(db, note="the reply does advise rest\x1b[31m"):
    """alice flips the first verdict of the first conversation (met, 7 of its 22 positive points)
    and bob flags the second."""

    async def scenario():
        async with await Store.open(db) as store:
            rows = await store._all("SELECT conversation_id, idx FROM verdicts WHERE run_id = 1 ORDER BY id")
            await store.add_review(*rows[0], "alice", rv.FLIP)
            await store.add_review(*rows[1], "bob", rv.FLAG, note=note)

    asyncio.run(scenario())


def show(db, capsys, *flags):
    assert cli.main(["show", "1", "--db", str(db), *flags]) == 0
    return capsys.readouterr().out


def test_show_reviewed_reports_both_scores_progress_and_each_reviewer(finished_run_db, capsys):
    review_run(finished_run_db)
    text = show(finished_run_db, capsys, "--reviewed")
    # The first conversation scored (7 + 10 - 6) / 22 as graded, (10 - 6) / 22 with rest flipped.
    graded, reviewed = 0.625, (4 / 22 + 1.0 + 0.375) / 3
    assert f"score as graded    {graded:.4f}" in text
    assert f"score as reviewed  {reviewed:.4f}" in text
    assert "2 of 8 verdicts reviewed, 1 flipped, 1 flagged" in text
    assert "accuracy" in text and "reviewer alice: reviewed score" in text and "reviewer bob" in text
    assert "(1 review)" in text and "(1 reviews)" not in text  # each made one
    assert "alice and bob: no verdict reviewed by both" in text


def test_show_json_carries_the_review_under_its_own_key(finished_run_db, capsys):
    before = json.loads(show(finished_run_db, capsys, "--json"))
    assert "review" not in before  # no review, no key: what scripts read is unchanged
    review_run(finished_run_db)
    shown = json.loads(show(finished_run_db, capsys, "--json"))
    assert {k: v for k, v in shown.items() if k != "review"} == before
    review = shown["review"]
    assert review["graded_score"] == pytest.approx(0.625)
    assert review["reviewed_score"] == pytest.approx((4 / 22 + 1.0 + 0.375) / 3)
    assert review["progress"]["reviewed"] == 2 and review["progress"]["flipped"] == 1
    assert review["progress"]["by_axis"]["axis:accuracy"]["flipped"] == 1
    assert set(review["reviewers"]) == {"alice", "bob"}
    assert review["agreement"][0]["reviewers"] == ["alice", "bob"] and review["agreement"][0]["verdicts"] == 0


def test_exports_carry_the_reviews_in_new_columns_after_the_graders(finished_run_db, tmp_path, capsys):
    review_run(finished_run_db)
    out_csv, out_jsonl = tmp_path / "r.csv", tmp_path / "r.jsonl"
    for fmt, out in (("csv", out_csv), ("jsonl", out_jsonl)):
        assert cli.main(["export", "1", "--db", str(finished_run_db), "--format", fmt, "--out", str(out)]) == 0
    # The grader's columns as they were, the browser's 1-based numbers, the reviews', the theme,
    # then a completions run's (which of a record's own completions was graded).
    assert CSV_COLUMNS == GRADER_COLUMNS + NUMBER_COLUMNS + REVIEW_CSV_COLUMNS + [
        "theme",
        "completion_group",
        "completion_label",
    ]
    rows = list(csv.DictReader(out_csv.open(newline="")))
    first, second, third = rows[0], rows[1], rows[2]
    assert first["criteria_met"] == "true" and first["reviewed_criteria_met"] == "false"
    assert first["review"] == "flipped" and first["reviewers"] == "alice" and first["reviewed_at"].endswith("Z")
    assert float(first["reviewed_conversation_score"]) == pytest.approx(4 / 22)
    assert float(first["conversation_score"]) == pytest.approx(11 / 22)
    assert second["review"] == "flagged" and second["reviewed_criteria_met"] == second["criteria_met"]
    assert second["review_note"] == "the reply does advise rest␛[31m"  # a note is data: visible, not obeyed
    assert third["review"] == "" and third["reviewed_criteria_met"] == ""
    assert all(row["reviewed_conversation_score"] == "" for row in rows[4:])  # unreviewed conversations

    lines = [json.loads(line) for line in out_jsonl.read_text().splitlines()]
    assert lines[0]["reviewed_score"] == pytest.approx(4 / 22) and lines[0]["score"] == pytest.approx(11 / 22)
    review = lines[0]["rubrics"][0]["review"]
    assert review["reviewed_criteria_met"] is False and review["flipped"] and review["reviewers"] == ["alice"]
    assert lines[0]["rubrics"][0]["criteria_met"] is True  # the grader's verdict, as graded
    assert lines[0]["rubrics"][1]["review"]["note"] == "the reply does advise rest\x1b[31m"  # JSON keeps it exact
    assert [h["action"] for h in review["history"]] == ["flip"]
    assert "review" not in lines[0]["rubrics"][2] and "reviewed_score" not in lines[1]


def test_show_reviewed_gives_two_reviewers_agreement_on_what_both_reviewed(finished_run_db, capsys):
    async def scenario():
        async with await Store.open(finished_run_db) as store:
            rows = await store._all("SELECT conversation_id, idx FROM verdicts WHERE run_id = 1 ORDER BY id")
            for key in rows[:4]:
                await store.add_review(*key, "alice", rv.FLAG)
            await store.add_review(*rows[0], "alice", rv.FLIP)
            for key in rows[:3]:
                await store.add_review(*key, "bob", rv.FLAG)

    asyncio.run(scenario())
    text = show(finished_run_db, capsys, "--reviewed")
    # Both reviewed three verdicts; alice flipped one of them, bob kept all three as graded.
    expected = kappa_of([(False, True), (False, False), (True, True)])
    assert f"alice and bob agree on 66.7% of 3 verdicts both reviewed, Cohen's kappa {expected.kappa:.3f}" in text
