"""OpenAI's Responses API (POST /responses), for the model under test and the grader each on its
own (API_TEST, API_GRADER), against the project's test server, which answers it as it answers
chat completions (faults, limits, refusals) in the Responses shape."""

from __future__ import annotations

import asyncio
import json

import pytest

from hbtui import cli
from hbtui.client.chat import ChatClient
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import ChatError, Endpoint
from hbtui.core.calls import RESPONSES_API
from hbtui.core.settings.config import Settings
from hbtui.core.verdict_cache import RequestKeys
from tests.conftest import run_engine, settings_for, small_records, user_folder, write_jsonl


def responses_bodies(server) -> list[dict]:
    return [body for body in server.captured_requests() if "input" in body]


def test_a_run_asked_through_the_responses_api_sends_its_shape_and_reads_its_answers(server, tmp_path):
    server.control(capture_requests=True)
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    settings = settings_for(
        server,
        tmp_path / "runs.sqlite",
        api_test=RESPONSES_API,
        api_grader=RESPONSES_API,
        system_message_test="You are a careful clinician.",
        reasoning_grader="low",
        temperature_grader=None,
    )
    run_id, status = asyncio.run(run_engine(settings, data))
    assert status == "finished"
    bodies = server.captured_requests()
    assert bodies and all("input" in body and "messages" not in body for body in bodies)  # every call: /responses
    replies = [b for b in bodies if "text" not in b]
    graders = [b for b in bodies if "text" in b]
    assert replies and graders
    # Our system message goes in as the developer role, as the reference's ResponsesSampler sends it.
    assert all(b["input"][0] == {"role": "developer", "content": "You are a careful clinician."} for b in replies)
    assert all(b["max_output_tokens"] == 2048 and b["temperature"] == 0.3 for b in replies)
    for body in graders:
        assert body["reasoning"] == {"effort": "low"} and "temperature" not in body
        assert body["max_output_tokens"] == 1024 and "max_tokens" not in body
        assert body["text"]["format"]["type"] == "json_schema" and body["text"]["format"]["schema"]["properties"]
    # The verdicts are what the server's grader said, read from the answers' output_text.
    import sqlite3

    with sqlite3.connect(settings.db_path) as conn:
        stored = conn.execute("SELECT v.status, v.criterion FROM verdicts v WHERE v.run_id = ?", (run_id,)).fetchall()
        replies_stored = conn.execute("SELECT reply, reasoning FROM conversations").fetchall()
    assert stored and all(status in ("met", "not_met") for status, _ in stored)
    assert all(reply for reply, _ in replies_stored)


def test_the_answers_text_usage_reasoning_and_a_cut_are_read_as_the_reference_reads_them(server):
    async def go():
        client = ChatClient(Endpoint(server.base_url, "fake-key"), limiter=AdaptiveLimiter(2), backoff_base=0.01)
        try:
            whole = await client.complete("test-model", [{"role": "user", "content": "Hello?"}], api=RESPONSES_API)
            server.control(truncate_generation=True)
            cut = await client.complete(
                "test-model", [{"role": "user", "content": "Hello?"}], max_tokens=4, api=RESPONSES_API
            )
            return whole, cut
        finally:
            await client.aclose()

    server.control(reasoning_field=True)
    whole, cut = asyncio.run(go())
    assert whole.content and whole.finish_reason == "stop" and whole.reasoning.startswith("Thinking it over")
    assert whole.prompt_tokens > 0 and whole.completion_tokens > 0
    assert cut.finish_reason == "length"  # status incomplete, reason max_output_tokens


def test_a_verdict_cut_off_by_max_output_tokens_is_asked_again_with_twice_the_budget(server, tmp_path):
    server.control(capture_requests=True, truncate_grader_below=1500)
    data = write_jsonl(tmp_path / "data.jsonl", small_records()[:1])
    settings = settings_for(server, tmp_path / "runs.sqlite", api_grader=RESPONSES_API, max_tokens_grader=1024)
    _, status = asyncio.run(run_engine(settings, data))
    assert status == "finished"
    budgets = [b["max_output_tokens"] for b in responses_bodies(server) if "text" in b]
    assert sorted(set(budgets)) == [1024, 2048]


def test_a_parameter_the_endpoint_refuses_is_learned_and_left_out(server, tmp_path):
    server.control(capture_requests=True, reject_params=["temperature"])
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    settings = settings_for(server, tmp_path / "runs.sqlite", api_test=RESPONSES_API, api_grader=RESPONSES_API)
    _, status = asyncio.run(run_engine(settings, data))
    assert status == "finished"
    bodies = responses_bodies(server)
    refused = [b for b in bodies if "temperature" in b]
    assert len(refused) <= 2  # the first of each shape, then learned
    assert sum(1 for b in bodies if "temperature" not in b) > len(small_records())


def test_an_endpoint_without_the_responses_api_stops_the_run_in_one_line_saying_how_to_switch(
    tmp_path, monkeypatch, server, capsys
):
    server.control(no_responses_api=True)
    user_folder(tmp_path, monkeypatch, server, "API_GRADER=responses\n")
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    assert cli.main(["run", "--data", str(data), "--name", "no-responses"]) != cli.EXIT_OK
    err = capsys.readouterr().err
    assert "the endpoint has no Responses API (404 for POST" in err and "API_GRADER=chat" in err
    assert "Traceback" not in err
    assert cli.main(["check"]) != cli.EXIT_OK
    assert "has no Responses API" in capsys.readouterr().out


def test_a_model_unknown_to_the_responses_api_is_said_as_a_model_not_found(server):
    async def go():
        client = ChatClient(
            Endpoint(server.base_url, "fake-key"), limiter=AdaptiveLimiter(1), backoff_base=0.01, max_attempts=1
        )
        try:
            await client.complete("no-such-model", [{"role": "user", "content": "Hi"}], api=RESPONSES_API)
        finally:
            await client.aclose()

    from tests.support.server_process import FakeServer

    with FakeServer(models=["test-model"]) as restricted:
        server = restricted
        with pytest.raises(ChatError) as caught:
            asyncio.run(go())
    assert "no-such-model" in caught.value.message and "Responses API" not in caught.value.message


def test_the_api_is_part_of_a_verdicts_cache_key_and_of_the_requests_record(tmp_path, monkeypatch, server, capsys):
    class Template:
        sha256 = "0" * 64

    def key(settings: Settings) -> str:
        return RequestKeys(settings, Template()).keys("digest", 0, [(0, "a criterion", 5.0)])[0]

    assert key(Settings(model_grader="g", api_grader=RESPONSES_API)) != key(Settings(model_grader="g"))

    user_folder(tmp_path, monkeypatch, server, "API_GRADER=responses\n")
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    assert cli.main(["run", "--data", str(data), "--name", "responses"]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["show", "responses", "--json"]) == cli.EXIT_OK
    requests = json.loads(capsys.readouterr().out)["requests"]
    assert (requests["api_test"], requests["api_grader"]) == ("chat", "responses")
    assert "the responses API for the grader" in requests["differences"]
    assert requests["reference_commit"] is None  # ee3b031 asks through chat completions
