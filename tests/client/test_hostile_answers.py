"""Answers that would break a run: a reply that is null, JSON nested past Python's stack. Each is
a bad answer of that call (retried, then its error), never a reply graded as empty nor the run's
end. Against the project's test server, which sends them as a misbehaving server would."""

from __future__ import annotations

import asyncio
import time

import pytest

from hbtui.client.chat import BAD_RESPONSE
from hbtui.client.wire import ChatError
from hbtui.core.grading import parse_verdict
from tests.client.test_client import call
from tests.conftest import run_engine, settings_for


def test_a_null_reply_is_a_bad_answer_asked_again_never_an_empty_reply(server):
    server.control(null_content="all")
    with pytest.raises(ChatError) as error:
        call(server, max_attempts=3)
    assert error.value.kind == BAD_RESPONSE and error.value.attempts == 3
    assert "content null" in error.value.message
    assert server.stats()["requests"] == 3


def test_a_null_reply_cut_off_by_its_budget_is_a_cut_off_reply_asked_once(server):
    server.control(null_content="all", null_content_finish="length")
    result = call(server, max_attempts=3)
    assert result.content == "" and result.finish_reason == "length" and result.attempts == 1
    assert server.stats()["requests"] == 1


def test_json_nested_past_the_stack_is_a_bad_answer_of_that_call(server):
    server.control(deep_json="body")
    with pytest.raises(ChatError) as error:
        call(server, max_attempts=2)
    assert error.value.kind == BAD_RESPONSE


def test_a_grader_text_nested_100000_deep_holds_no_verdict_and_is_read_fast():
    started = time.perf_counter()
    assert parse_verdict("[" * 100_000 + "]" * 100_000) is None
    assert parse_verdict('{"a": ' * 100_000 + "1" + "}" * 100_000) is None
    assert time.perf_counter() - started < 5  # not one scan to the end per brace
    assert parse_verdict('prose {"explanation": "x", "criteria_met": true} more').criteria_met is True


@pytest.mark.parametrize("where", ["body", "grader_content"])
def test_a_run_meeting_deep_json_is_incomplete_not_failed(server, small_dataset, tmp_path, where):
    server.control(deep_json=where)
    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db, grader_template="builtin", max_attempts=2, grader_parse_attempts=1)
    _, status = asyncio.run(run_engine(settings, small_dataset))
    assert status == "incomplete"


def test_a_grader_answering_null_leaves_its_criteria_failed_for_regrade(server, small_dataset, tmp_path):
    server.control(null_content="grader")
    db = tmp_path / "runs" / "hbtui.sqlite"
    _, status = asyncio.run(
        run_engine(settings_for(server, db, grader_template="builtin", max_attempts=2), small_dataset)
    )
    assert status == "incomplete"
    import sqlite3

    with sqlite3.connect(db) as connection:
        kinds = connection.execute("SELECT DISTINCT status, error_kind FROM verdicts").fetchall()
    assert kinds == [("error", BAD_RESPONSE)]


@pytest.mark.parametrize("count, stored", [(-5, 0), (1e300, 0), (2**70, 0), (True, 0), ("12", 0), (12, 12)])
def test_a_token_count_that_is_no_count_is_stored_as_0(server, count, stored):
    server.control(usage={"prompt_tokens": count, "completion_tokens": count})
    result = call(server)
    assert (result.prompt_tokens, result.completion_tokens) == (stored, stored)
