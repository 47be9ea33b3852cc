"""A provider's text holding lone surrogates (the JSON escape \\ud800, valid JSON, not text):
stored with U+FFFD and noted, graded as stored, and never a run stopped for good."""

import asyncio
import json
import re
import sqlite3

import pytest

from hbtui.client.chat import CONTEXT_LENGTH, ChatClient
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import ChatError, Endpoint
from tests.conftest import run_engine, settings_for

SURROGATE = re.compile("[\ud800-\udfff]")


def test_a_run_whose_provider_sends_lone_surrogates_finishes_with_them_replaced(server, small_dataset, tmp_path):
    server.control(lone_surrogate=True)
    db = tmp_path / "runs" / "hbtui.sqlite"
    run_id, status = asyncio.run(run_engine(settings_for(server, db), small_dataset, name="surrogates"))
    assert status == "finished"
    with sqlite3.connect(db) as conn:
        score, error = conn.execute("SELECT score, error FROM runs WHERE id = ?", (run_id,)).fetchone()
        replies = conn.execute("SELECT reply, reasoning FROM conversations").fetchall()
        verdicts = conn.execute("SELECT status, explanation, raw_output, reasoning FROM verdicts").fetchall()
        notes = [m for (m,) in conn.execute("SELECT message FROM run_log WHERE run_id = ?", (run_id,))]
    # Graded as stored: a surrogate sent on to the grader would not have been what it graded.
    assert error is None and score == pytest.approx(0.625)
    assert len(replies) == 3 and len(verdicts) == 8
    for text in [*(t for row in replies for t in row), *(t for row in verdicts for t in row[1:])]:
        assert "\ufffd" in text and not SURROGATE.search(text)
    assert {status for status, *_ in verdicts} <= {"met", "not_met"}
    assert "reply of conversation #1 held invalid characters (lone surrogates), stored with U+FFFD" in notes
    assert any(n.startswith("grader's answer on criterion 1 of conversation #1 held invalid characters") for n in notes)


def test_a_provider_error_holding_a_lone_surrogate_is_kept_readable(server):
    server.control(lone_surrogate=True, context_chars=5)

    async def ask():
        client = ChatClient(Endpoint(server.base_url), limiter=AdaptiveLimiter(1), max_attempts=1)
        try:
            await client.complete("test-model", [{"role": "user", "content": "a question long enough"}])
        finally:
            await client.aclose()

    with pytest.raises(ChatError) as error:
        asyncio.run(ask())
    assert error.value.kind == CONTEXT_LENGTH
    assert error.value.message.endswith("\ufffd") and not SURROGATE.search(str(error.value))


def test_the_fake_server_sends_the_escape_itself(server):
    import httpx

    server.control(lone_surrogate=True)
    response = httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": "test-model", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert b'\\ud800"' in response.content  # the escape, as a provider would send it
    assert SURROGATE.search(json.loads(response.content)["choices"][0]["message"]["content"])
