"""The chat client against the test server over a real socket: retries, backoff, quirks, errors."""

import asyncio
import json
import math
import time

import pytest

from hbtui.client.chat import (
    AUTH,
    CONNECTION,
    CONTEXT_LENGTH,
    NOT_FOUND,
    RATE_LIMITED,
    SERVER_ERROR,
    TIMEOUT,
    ChatClient,
    split_reasoning,
)
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import ChatError, Endpoint, encode_request
from hbtui.core.grading import VERDICT_FORMAT, parse_verdict
from tests.conftest import run_engine, settings_for
from tests.support.server_process import FakeServer

MESSAGES = [{"role": "user", "content": "hello"}]
GRADER_MESSAGES = [{"role": "user", "content": "Judge this. Answer with criteria_met. [[MET]]"}]


def call(server, messages=MESSAGES, *, notes=None, calls=None, timeout=5.0, max_attempts=4, **kwargs):
    async def go():
        client = ChatClient(
            Endpoint(server.base_url, getattr(server, "api_key", None)),
            limiter=AdaptiveLimiter(4),
            timeout=timeout,
            max_attempts=max_attempts,
            backoff_base=0.01,
            on_note=(notes.append if notes is not None else None),
            on_call=(calls.append if calls is not None else None),
        )
        try:
            return await client.complete("test-model", messages, **kwargs)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_plain_call_records_usage_and_latency(server):
    result = call(server, temperature=0.3, max_tokens=100)
    assert result.content.startswith("Reply ")
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.latency_ms > 0 and result.attempts == 1
    assert server.stats()["params_seen"]["temperature"] == 1


@pytest.mark.parametrize(
    "fault, kind",
    [
        ("rate_limit", RATE_LIMITED),
        ("server_error", SERVER_ERROR),
        ("drop", CONNECTION),
    ],
)
def test_transient_faults_are_retried(server, fault, kind):
    server.control(script=[fault, fault])
    calls = []
    result = call(server, calls=calls)
    # A rate-limit 429 is no failed try: the call waits for the endpoint's pace and goes again.
    assert result.attempts == (1 if kind == RATE_LIMITED else 3)
    assert [c.kind for c in calls] == [kind, kind, None]


def test_retry_after_is_honoured(server):
    server.control(script=["rate_limit"], retry_after=0.4)
    started = time.monotonic()
    call(server)
    assert time.monotonic() - started >= 0.4


def test_hang_past_timeout_is_a_timeout_then_retried(server):
    server.control(script=["hang"], hang_seconds=5)
    calls = []
    result = call(server, calls=calls, timeout=0.5)
    assert [c.kind for c in calls] == [TIMEOUT, None] and result.attempts == 2


def test_attempts_are_bounded(server):
    server.control(script=["server_error"] * 10)
    with pytest.raises(ChatError) as error:
        call(server, max_attempts=3)
    assert error.value.kind == SERVER_ERROR and error.value.attempts == 3
    assert server.stats()["requests"] == 3


def test_json_schema_refusal_is_remembered(server):
    server.control(reject_json_schema=True)
    notes = []

    async def go():
        client = ChatClient(
            Endpoint(server.base_url), limiter=AdaptiveLimiter(2), backoff_base=0.01, on_note=notes.append
        )
        try:
            first = await client.complete("grader-model", GRADER_MESSAGES, response_format=VERDICT_FORMAT)
            second = await client.complete("grader-model", GRADER_MESSAGES, response_format=VERDICT_FORMAT)
            return first, second
        finally:
            await client.aclose()

    first, second = asyncio.run(go())
    assert parse_verdict(first.content).criteria_met is True
    assert not first.json_schema_used and not second.json_schema_used
    stats = server.stats()
    assert stats["by_status"] == {"400": 1, "200": 2}  # asked with json_schema once only
    assert len(notes) == 1 and "json_schema" in notes[0]


@pytest.mark.parametrize(
    "param, sent_after",
    [
        ("temperature", None),
        ("reasoning_effort", None),
        ("max_tokens", "max_completion_tokens"),
    ],
)
def test_refused_parameters_are_dropped_or_renamed(server, param, sent_after):
    server.control(reject_params=[param])
    notes = []
    result = call(server, notes=notes, temperature=0.3, max_tokens=50, reasoning_effort="low")
    assert result.content.startswith("Reply ")
    seen = server.stats()["params_seen"]
    assert seen.get(param) == 1  # only the first, refused request carried it
    if sent_after:
        assert seen[sent_after] == 1
    assert len(notes) == 1 and param in notes[0]


def test_context_too_long_is_not_retried(server):
    server.control(context_chars=3)
    with pytest.raises(ChatError) as error:
        call(server)
    assert error.value.kind == CONTEXT_LENGTH and "maximum context length" in error.value.message
    assert server.stats()["requests"] == 1


def test_auth_failure_and_unknown_model_are_fatal():
    with FakeServer(api_key="fake-right", models=["test-model"]) as server:
        server.api_key = "fake-wrong"
        with pytest.raises(ChatError) as error:
            call(server)
        assert error.value.kind == AUTH and error.value.fatal
        server.api_key = "fake-right"

        async def unknown():
            client = ChatClient(Endpoint(server.base_url, "fake-right"), limiter=AdaptiveLimiter(1), backoff_base=0.01)
            try:
                await client.complete("no-such-model", MESSAGES)
            finally:
                await client.aclose()

        with pytest.raises(ChatError) as error:
            asyncio.run(unknown())
        assert error.value.kind == NOT_FOUND and error.value.fatal
        assert server.stats()["requests"] == 2  # no retries of either


@pytest.mark.parametrize("grader_format", ["fenced", "prose_then_json", "think"])
def test_grader_formats_parse_to_the_server_verdict(server, grader_format):
    server.control(grader_format=grader_format)
    result = call(server, GRADER_MESSAGES, response_format=VERDICT_FORMAT)
    assert parse_verdict(result.content).criteria_met is True


def test_reasoning_field_is_kept_apart(server):
    server.control(reasoning_field=True)
    result = call(server)
    assert result.reasoning and result.content.startswith("Reply ")


def test_split_reasoning_handles_think_blocks():
    assert split_reasoning({"content": "<think>hmm {x}</think>\nAnswer"}) == ("Answer", "hmm {x}")
    assert split_reasoning({"content": "<think>still thinking"}) == ("", "still thinking")
    assert split_reasoning({"content": None, "reasoning_content": "r"}) == ("", "r")


def test_limiter_shrinks_on_persistent_429_and_grows_back(server):
    """429s that say no wait teach no rate (hbtui.core.rate_limits): fewer go in flight meanwhile."""
    server.control(persistent_429_until=6, retry_after=0.0)

    async def go():
        limiter = AdaptiveLimiter(8, cooldown=0.0, growth=0.25)
        client = ChatClient(Endpoint(server.base_url), limiter=limiter, backoff_base=0.01, max_attempts=10)
        try:
            await asyncio.gather(*(client.complete("test-model", MESSAGES) for _ in range(4)))
            shrunk = limiter.limit
            await asyncio.gather(*(client.complete("test-model", MESSAGES) for _ in range(40)))
            return shrunk, limiter.limit
        finally:
            await client.aclose()

    shrunk, recovered = asyncio.run(go())
    assert shrunk < 8
    assert recovered > shrunk


def test_occasional_429s_do_not_starve_the_limiter(server):
    """15% of calls refused at random: the cap may dip, but it does not stay at the bottom."""
    server.control(faults={"rate_limit": 0.15}, retry_after=0.0, seed=5, latency_ms=5)

    async def go():
        limiter = AdaptiveLimiter(8, cooldown=0.2)
        client = ChatClient(Endpoint(server.base_url), limiter=limiter, backoff_base=0.01, max_attempts=10)
        try:
            lowest = 8
            for _ in range(10):
                await asyncio.gather(*(client.complete("test-model", MESSAGES) for _ in range(40)))
                lowest = min(lowest, limiter.limit)
            return lowest, limiter.limit
        finally:
            await client.aclose()

    lowest, final = asyncio.run(go())
    assert final >= 4, (lowest, final)


def test_first_call_goes_alone_then_the_rest_together(server):
    """The first request of a model waits for nobody and the others wait for it, but only for it:
    once it has answered, the rest are in flight at once (not one at a time behind a lock)."""
    server.control(latency_ms=600)  # long enough for 8 connections to open on a busy machine

    async def go():
        client = ChatClient(Endpoint(server.base_url), limiter=AdaptiveLimiter(16), backoff_base=0.01)
        try:
            await asyncio.gather(*(client.complete("test-model", MESSAGES) for _ in range(9)))
        finally:
            await client.aclose()

    asyncio.run(go())
    assert server.stats()["max_in_flight"] == 8


def test_retry_after_that_is_not_a_number_falls_back_to_backoff():
    import httpx

    from hbtui.core.rate_limits import retry_after_seconds

    for value in ("nan", "inf", "-inf", "Wed, 21 Oct 2015 07:28:00 GMT"):
        assert retry_after_seconds(httpx.Response(429, headers={"Retry-After": value}).headers) is None
    assert retry_after_seconds(httpx.Response(429, headers={"Retry-After": "2"}).headers) == 2.0


def test_a_cancelled_waiter_raises_cancelled_error():
    async def go():
        limiter = AdaptiveLimiter(1)
        await limiter.acquire()
        waiter = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        limiter.release()  # wakes the queue before the waiter sees its cancellation
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return limiter.in_flight

    assert asyncio.run(go()) == 0


def test_a_call_whose_gate_closes_before_its_bytes_leave_sends_nothing_until_it_opens(server):
    """The last look is taken as the body is written (a loop turn after the slot was given): a
    process stopped in between, its lease lapsed meanwhile, must not send once continued."""
    looks = []

    async def go():
        gate = asyncio.Event()
        gate.set()

        def before_send():
            looks.append(time.monotonic())
            if len(looks) == 2:  # the second look is the body's own: the lease lapsed just now
                gate.clear()

        client = ChatClient(
            Endpoint(server.base_url), limiter=AdaptiveLimiter(1), backoff_base=0.01, gate=gate, before_send=before_send
        )
        try:
            call = asyncio.ensure_future(client.complete("test-model", MESSAGES))
            await asyncio.sleep(0.3)
            withheld = (server.stats()["requests"], call.done(), client.limiter.in_flight)
            gate.set()
            return withheld, await call
        finally:
            await client.aclose()

    (requests, done, in_flight), result = asyncio.run(go())
    assert (requests, done, in_flight) == (0, False, 0)  # not a byte sent; its slot given back
    assert result.content.startswith("Reply ") and result.attempts == 1  # withheld is not a try
    assert server.stats()["requests"] == 1 and len(looks) == 4


# Control characters, DEL, the line separators JavaScript minds, Latin-1, CJK, an astral emoji,
# and the characters JSON escapes: what a reply or a rubric may hold.
TRICKY_TEXT = 'ctrl \x00\x01\x1f\x7f \u2028\u2029 é 中文 😀 " \\ / \b\f\n\r\t'


def httpx_json(body) -> bytes:
    """The bytes httpx sends for ``json=body``: what the reference's requests are."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@pytest.mark.parametrize("temperature", [None, 0.0, 0.3, 1.0, 0.1 + 0.2, 1e-05, 1e-7, 1e16, 123456.789])
def test_a_request_is_the_bytes_httpx_sends_for_it(temperature):
    body = {
        "model": "grader-model",
        "messages": [{"role": "system", "content": TRICKY_TEXT}, {"content": TRICKY_TEXT * 3, "role": "user"}],
        "max_tokens": 2**40,
        "reasoning_effort": "low",
        "response_format": VERDICT_FORMAT,
    }
    if temperature is not None:
        body["temperature"] = temperature
    assert encode_request(body) == httpx_json(body)


def test_a_request_json_cannot_encode_fails_as_it_did():
    with pytest.raises(ValueError, match="Out of range float"):
        encode_request({"model": "m", "temperature": math.nan})
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate: the request is never sent
        encode_request({"model": "m", "messages": [{"role": "user", "content": "\ud800"}]})
    huge = {"model": "m", "seed": 2**70}  # beyond orjson's integers: json.dumps writes it
    assert encode_request(huge) == httpx_json(huge)


def test_the_requests_on_the_wire_are_the_bytes_httpx_would_send(server, small_dataset, tmp_path):
    """Every body the test server received, as received, is json.dumps' encoding of itself: the
    same bytes the reference's client sends. The grader's temperature (1e-05) is one orjson would
    write otherwise."""
    server.control(capture_requests=True, reasoning_field=True)
    settings = settings_for(server, tmp_path / "runs.sqlite", temperature_grader=1e-05, grader_template="builtin")
    _, status = asyncio.run(run_engine(settings, small_dataset))
    assert status == "finished"
    received = server.captured_bodies()
    assert len(received) == 3 + 8  # 3 replies, 8 verdicts
    for body in received:
        assert body.encode() == httpx_json(json.loads(body))
    assert any('"temperature":1e-05' in body for body in received)
