"""Tests of the fake OpenAI-compatible server itself, over a real socket."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.fake_server import (
    DEFAULT_CONFIG,
    GENERATION_SENTENCE,
    expected_generation_reply,
    expected_verdict,
    grader_reply,
)
from tests.support.server_process import FakeServer, FakeServerError

API_KEY = "fake-fake-test"
MODELS = ["test-model", "grader-model"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    # One process for the module (startup costs ~0.3 s); each test resets it below.
    with FakeServer(api_key=API_KEY, models=MODELS) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _reset_server(request: pytest.FixtureRequest) -> None:
    if "server" in request.fixturenames:
        fake: FakeServer = request.getfixturevalue("server")
        fake.control(**DEFAULT_CONFIG)  # also reseeds and clears script/persistent-429 counters
        fake.reset_stats()


@pytest.fixture
def client(server: FakeServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=10, trust_env=False) as http:
        yield http


def user_messages(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": text}]


def grader_messages(criterion: str) -> list[dict[str, Any]]:
    prompt = f"Conversation...\nRubric item: {criterion}\nReturn JSON with explanation and criteria_met."
    return [{"role": "user", "content": prompt}]


def chat(client: httpx.Client, messages: list[dict[str, Any]], **params: Any) -> httpx.Response:
    return client.post("/chat/completions", json={"model": "test-model", "messages": messages, **params})


def content_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


# -- basics ----------------------------------------------------------------


def test_defaults_without_options_accept_anything() -> None:
    with FakeServer() as fake, httpx.Client(base_url=fake.base_url, trust_env=False) as http:
        assert fake.base_url.startswith("http://127.0.0.1:") and fake.base_url.endswith("/v1")
        models = http.get("/models").json()
        assert models["object"] == "list"
        assert [m["id"] for m in models["data"]] == ["test-model", "grader-model"]
        reply = http.post("/chat/completions", json={"model": "any-model", "messages": user_messages("hi")})
        assert reply.status_code == 200
        assert httpx.get(f"{fake.root_url}/health", trust_env=False).json() == {"status": "ok"}


def test_startup_config_is_applied() -> None:
    with FakeServer(config={"latency_ms": 7, "grader_format": "fenced"}) as fake:
        config = fake.get_config()
        assert config["latency_ms"] == 7 and config["grader_format"] == "fenced"


def test_auth_required_when_api_key_given(server: FakeServer) -> None:
    with httpx.Client(base_url=server.base_url, trust_env=False) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = http.post(
                "/chat/completions", json={"model": "test-model", "messages": user_messages("x")}, headers=headers
            )
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "invalid_api_key"
            assert response.json()["error"]["message"] == "Incorrect API key provided"
        assert http.get("/models").status_code == 401


def test_unknown_model_is_404(client: httpx.Client) -> None:
    response = client.post("/chat/completions", json={"model": "nope", "messages": user_messages("x")})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "model_not_found"
    assert error["message"] == "The model `nope` does not exist"
    assert [m["id"] for m in client.get("/models").json()["data"]] == MODELS


def test_generation_reply_is_deterministic_and_openai_shaped(client: httpx.Client) -> None:
    messages = user_messages("What should I do about a headache?")
    body = chat(client, messages).json()
    content = body["choices"][0]["message"]["content"]
    assert content == expected_generation_reply("What should I do about a headache?")
    assert content.startswith("Reply ") and content.endswith(GENERATION_SENTENCE)
    assert body["object"] == "chat.completion" and body["id"] and body["created"] > 0
    assert body["model"] == "test-model"
    choice = body["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    total_chars = sum(len(m["content"]) for m in messages)
    assert body["usage"] == {
        "prompt_tokens": total_chars // 4 + 1,
        "completion_tokens": len(content) // 4 + 1,
        "total_tokens": total_chars // 4 + 1 + len(content) // 4 + 1,
    }
    assert content_of(chat(client, messages)) == content


def test_expected_verdict_rule() -> None:
    assert expected_verdict("x [[MET]] y") is True
    assert expected_verdict("x [[NOT_MET]] y") is False
    assert expected_verdict("[[MET]] and [[NOT_MET]]") is False  # NOT_MET checked first
    verdicts = [expected_verdict(f"criterion {i}") for i in range(300)]
    assert 150 < sum(verdicts) < 250  # about two thirds met


def test_grader_verdict_plain_json(client: httpx.Client, server: FakeServer) -> None:
    for criterion in ("mentions hydration", "advises seeing a doctor [[MET]]", "is rude [[NOT_MET]]", "c4", "c5"):
        messages = grader_messages(criterion)
        reply = json.loads(content_of(chat(client, messages)))
        assert reply["criteria_met"] is expected_verdict(messages[-1]["content"])
        assert isinstance(reply["explanation"], str) and reply["explanation"]
    stats = server.stats()
    assert stats["grader"] == 5 and stats["generation"] == 0


def test_grader_formats(client: httpx.Client, server: FakeServer) -> None:
    messages = grader_messages("[[MET]] gives dosage")
    prompt = messages[-1]["content"]

    server.control(grader_format="fenced")
    fenced = content_of(chat(client, messages))
    inner = fenced.split("```json\n", 1)[1].split("\n```", 1)
    assert json.loads(inner[0])["criteria_met"] is True and inner[1].strip()  # prose after the fence

    server.control(grader_format="prose_then_json")
    prose = content_of(chat(client, messages))
    before, json_text = prose.split("\n", 1)
    assert "{a}" in before
    explanation = json.loads(json_text)["explanation"]
    assert "}" in explanation and "{" in explanation

    server.control(grader_format="think")
    think = content_of(chat(client, messages))
    fake_part, real_part = think.split("</think>", 1)
    assert fake_part.startswith("<think>") and '"criteria_met": false' in fake_part
    assert json.loads(real_part)["criteria_met"] is True

    server.control(grader_format="broken")
    assert content_of(chat(client, messages)) == "I think yes"
    assert grader_reply(prompt, "broken") == "I think yes"

    server.control(grader_format="json", reasoning_field=True)
    message = chat(client, messages).json()["choices"][0]["message"]
    assert message["reasoning_content"] and json.loads(message["content"])["criteria_met"] is True


def test_content_parts_are_read_as_text(client: httpx.Client) -> None:
    parts = [{"type": "text", "text": "Rubric: [[NOT_MET]] "}, {"type": "text", "text": "answer criteria_met"}]
    reply = json.loads(content_of(chat(client, [{"role": "user", "content": parts}])))
    assert reply["criteria_met"] is False


# -- request validation modes ------------------------------------------------


def test_json_schema_rejection_and_counting(client: httpx.Client, server: FakeServer) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}}
    assert chat(client, grader_messages("a"), response_format=schema).status_code == 200
    server.control(reject_json_schema=True)
    response = chat(client, grader_messages("a"), response_format=schema)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "response_format"
    assert "json_schema" in response.json()["error"]["message"]
    assert chat(client, grader_messages("a"), response_format={"type": "json_object"}).status_code == 200
    assert server.stats()["json_schema_requests"] == 2


def test_reject_params(client: httpx.Client, server: FakeServer) -> None:
    server.control(reject_params=["temperature", "max_tokens"])
    response = chat(client, user_messages("x"), temperature=0.5)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "Unsupported parameter: 'temperature' is not supported with this model.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "unsupported_parameter",
    }
    message = chat(client, user_messages("x"), max_tokens=10).json()["error"]["message"]
    assert message.endswith("Use 'max_completion_tokens' instead.")
    assert chat(client, user_messages("x"), max_completion_tokens=10).status_code == 200
    params_seen = server.stats()["params_seen"]
    assert params_seen["temperature"] == 1 and params_seen["max_tokens"] == 1 and params_seen["messages"] == 3


def test_context_limit(client: httpx.Client, server: FakeServer) -> None:
    server.control(context_chars=100)
    assert chat(client, [{"role": "user", "content": "a" * 100}]).status_code == 200
    response = chat(client, [{"role": "user", "content": "a" * 101}])
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert error["message"] == (
        "This model's maximum context length is 25 tokens. However, your messages resulted in 26 tokens."
    )


def test_truncation(client: httpx.Client, server: FakeServer) -> None:
    server.control(truncate_generation=True, truncate_grader_below=256)
    generation = chat(client, user_messages("hi")).json()["choices"][0]
    assert generation["finish_reason"] == "length"
    assert expected_generation_reply("hi").startswith(generation["message"]["content"])
    assert len(generation["message"]["content"]) < len(expected_generation_reply("hi"))

    cut = chat(client, grader_messages("x"), max_completion_tokens=100).json()["choices"][0]
    assert cut["finish_reason"] == "length"
    assert cut["message"]["content"].startswith('{"explanation": ')
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut["message"]["content"])
    for params in ({"max_tokens": 100}, {"max_completion_tokens": 100}):
        assert chat(client, grader_messages("x"), **params).json()["choices"][0]["finish_reason"] == "length"
    for params in ({"max_completion_tokens": 256}, {}):
        whole = chat(client, grader_messages("x"), **params).json()["choices"][0]
        assert whole["finish_reason"] == "stop" and json.loads(whole["message"]["content"])


# -- latency and faults --------------------------------------------------------


def test_latency(client: httpx.Client, server: FakeServer) -> None:
    server.control(latency_ms=150, latency_jitter_ms=20)
    started = time.perf_counter()
    assert chat(client, user_messages("x")).status_code == 200
    assert 0.15 <= time.perf_counter() - started < 5.0  # the bound only says it is not held much longer


def test_rate_limit_fault(client: httpx.Client, server: FakeServer) -> None:
    server.control(faults={"rate_limit": 1.0}, retry_after=0.25)
    response = chat(client, user_messages("x"))
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "0.25"
    assert response.json()["error"]["type"] == "rate_limit_error"
    assert server.stats()["faults"] == {"rate_limit": 1}


def test_server_errors_alternate_500_503(client: httpx.Client, server: FakeServer) -> None:
    server.control(faults={"server_error": 1.0})
    statuses = [chat(client, user_messages("x")).status_code for _ in range(4)]
    assert sorted(statuses) == [500, 500, 503, 503] and statuses[0] != statuses[1]
    assert chat(client, user_messages("x")).json()["error"]["type"] == "server_error"


def test_drop_closes_connection_without_response(client: httpx.Client, server: FakeServer) -> None:
    server.control(faults={"drop": 1.0})
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, user_messages("x"))
    stats = server.stats()
    assert stats["dropped"] == 1 and stats["faults"] == {"drop": 1} and stats["by_status"] == {}
    server.control(faults={})
    assert chat(client, user_messages("x")).status_code == 200  # the client recovers on a new connection


def test_hang_then_answers_and_client_timeout_cancels(client: httpx.Client, server: FakeServer) -> None:
    server.control(faults={"hang": 1.0}, hang_seconds=0.3)
    started = time.perf_counter()
    assert chat(client, user_messages("x")).status_code == 200
    assert time.perf_counter() - started >= 0.3

    server.control(hang_seconds=30)
    with pytest.raises(httpx.ReadTimeout):
        client.post("/chat/completions", json={"model": "test-model", "messages": user_messages("x")}, timeout=0.2)
    deadline = time.monotonic() + 10
    while server.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = server.stats()
    assert stats["in_flight"] == 0 and stats["cancelled"] == 1  # the abandoned hang freed its handler


def test_bad_json_fault_hits_grader_calls_only(client: httpx.Client, server: FakeServer) -> None:
    server.control(faults={"bad_json": 1.0})
    assert content_of(chat(client, grader_messages("x"))) == "I think yes"
    assert content_of(chat(client, user_messages("x"))) == expected_generation_reply("x")
    assert server.stats()["faults"] == {"bad_json": 1}


def test_random_faults_are_reproducible_by_seed(client: httpx.Client, server: FakeServer) -> None:
    def run() -> list[int]:
        server.control(seed=42, faults={"rate_limit": 0.3, "server_error": 0.2})
        return [chat(client, user_messages("x")).status_code for _ in range(30)]

    first = run()
    assert first == run()
    assert {200, 429} <= set(first) and ({500, 503} & set(first))


def test_script_then_random_faults(client: httpx.Client, server: FakeServer) -> None:
    server.control(script=["rate_limit", "ok", "server_error", "bad_json"])
    assert server.stats()["script_remaining"] == 4
    statuses = [chat(client, user_messages("x")).status_code for _ in range(3)]
    assert statuses == [429, 200, 500]
    assert content_of(chat(client, grader_messages("x"))) == "I think yes"
    assert chat(client, grader_messages("x")).status_code == 200  # script used up, no random faults
    assert server.stats()["script_remaining"] == 0


def test_persistent_429(client: httpx.Client, server: FakeServer) -> None:
    server.control(persistent_429_until=3, script=["server_error"])
    statuses = [chat(client, user_messages("x")).status_code for _ in range(5)]
    assert statuses == [429, 429, 429, 500, 200]  # the script is not consumed by the 429s
    assert server.stats()["faults"]["persistent_429"] == 3


# -- stats and control -----------------------------------------------------------


def test_stats_track_concurrency_status_and_models(server: FakeServer) -> None:
    server.control(latency_ms=800)  # long enough for 20 connections to open on a busy machine

    async def burst() -> list[int]:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        async with httpx.AsyncClient(base_url=server.base_url, headers=headers, trust_env=False) as http:

            async def one(i: int) -> int:
                model = MODELS[i % 2]
                response = await http.post(
                    "/chat/completions", json={"model": model, "messages": user_messages(str(i))}
                )
                return response.status_code

            return await asyncio.gather(*(one(i) for i in range(20)))

    assert asyncio.run(burst()) == [200] * 20
    stats = server.stats()
    assert stats["requests"] == 20 and stats["generation"] == 20 and stats["grader"] == 0
    assert stats["by_status"] == {"200": 20}
    assert stats["by_model"] == {"test-model": 10, "grader-model": 10}
    assert stats["max_in_flight"] == 20 and stats["in_flight"] == 0

    reset = server.reset_stats()
    assert reset["requests"] == 0 and reset["by_status"] == {} and reset["max_in_flight"] == 0


def test_control_round_trip_and_validation(server: FakeServer) -> None:
    config = server.control(latency_ms=5, faults={"drop": 0.1})
    assert config["latency_ms"] == 5 and config["faults"] == {"drop": 0.1}
    assert server.get_config() == config
    assert set(config) == set(DEFAULT_CONFIG)
    for bad in (
        {"latency": 5},
        {"latency_ms": "slow"},
        {"context_chars": -1},
        {"faults": {"explode": 1}},
        {"script": ["nope"]},
        {"grader_format": "xml"},
    ):
        with pytest.raises(FakeServerError):
            server.control(**bad)
    assert server.get_config() == config  # rejected updates change nothing
