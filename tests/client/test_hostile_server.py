"""Servers that misbehave below HTTP's politeness: a drip that never ends, an answer of 50 MB or a
gzip bomb, a redirect to another server, a proxy's 400 for every call. Each ends as an error of
that call (or, where every call would meet it, the run's stop), within TIMEOUT and within
MAX_ANSWER_MIB, against tests.support.hostile_server over a real socket."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

from hbtui.client.chat import CLIENT_ERROR, CONTENT_FILTER, REDIRECTED, TIMEOUT, TOO_LARGE, ChatClient
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import MIB, ChatError, Endpoint
from tests.conftest import make_record, write_jsonl
from tests.support.hostile_server import Behaviour, HostileServer
from tests.support.peak_rss import run_measured

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def hostile():
    with HostileServer() as server:
        yield server


def call(base_url: str, *, timeout: float = 5.0, max_attempts: int = 2, max_answer_bytes: int = 8 * MIB, key=None):
    async def go():
        client = ChatClient(
            Endpoint(base_url, key),
            limiter=AdaptiveLimiter(2),
            timeout=timeout,
            max_attempts=max_attempts,
            backoff_base=0.01,
            max_answer_bytes=max_answer_bytes,
        )
        try:
            return await client.complete("test-model", MESSAGES)
        finally:
            await client.aclose()

    return asyncio.run(go())


# ---- 1. TIMEOUT is the whole answer's ----------------------------------------------------


@pytest.mark.parametrize("mode, interval", [("drip_body", 0.2), ("drip_headers", 0.2), ("drip_chunks", 0.05)])
def test_a_drip_that_never_ends_is_a_timeout_of_the_whole_answer(hostile, mode, interval):
    # Each byte (or chunk) comes well within TIMEOUT of the last: only a deadline on the whole
    # answer ends it. Before, sock_read was the timeout and these calls never ended.
    hostile.behaviour = Behaviour(mode=mode, interval=interval)
    started = time.monotonic()
    with pytest.raises(ChatError) as error:
        call(hostile.base_url, timeout=1.0, max_attempts=2)
    assert error.value.kind == TIMEOUT and error.value.attempts == 2
    assert "no answer within 1 s" in error.value.message
    assert len(hostile.requests) == 2
    assert time.monotonic() - started < 20  # two deadlines and a backoff; never the drip's end


# ---- 3. the answer's size ---------------------------------------------------------------


def test_an_answer_over_the_limit_is_cut_there_and_not_asked_again(hostile):
    hostile.behaviour = Behaviour(mode="big", size=3 * MIB)
    with pytest.raises(ChatError) as error:
        call(hostile.base_url, max_answer_bytes=1 * MIB)
    assert error.value.kind == TOO_LARGE and error.value.attempts == 1
    assert "MAX_ANSWER_MIB (1 MiB)" in error.value.message
    assert len(hostile.requests) == 1  # a model that wrote that much would write it again


def test_a_gzip_bomb_is_cut_at_the_limit_as_it_inflates(hostile):
    hostile.behaviour = Behaviour(mode="gzip_bomb")
    with pytest.raises(ChatError) as error:
        call(hostile.base_url, max_answer_bytes=2 * MIB)
    assert error.value.kind == TOO_LARGE
    cut = int(error.value.message.split("cut at ")[1].split(" bytes")[0].replace(",", ""))
    assert 2 * MIB < cut <= 2 * MIB + 1  # read one byte past the limit, no more


def test_a_gzip_answer_within_the_limit_is_read(hostile):
    hostile.behaviour = Behaviour(mode="gzip", content="Zipped reply.")
    assert call(hostile.base_url).content == "Zipped reply."
    assert hostile.requests[0]["headers"]["accept-encoding"] == "gzip, deflate"


def test_a_declared_length_past_the_limit_is_cut_at_once_not_waited_for(hostile):
    hostile.behaviour = Behaviour(mode="declared")  # 10^12 bytes announced, one sent, then silence
    started = time.monotonic()
    with pytest.raises(ChatError) as caught:
        call(hostile.base_url, timeout=30)
    assert caught.value.kind == "too_large" and "cut at 1,000,000,000,000 bytes" in caught.value.message
    assert time.monotonic() - started < 10  # not the TIMEOUT of 30 s
    assert len(hostile.requests) == 1  # too large is no failed attempt to make again


# ---- 3. HTTP as servers send it, and as they break it -------------------------------------


def test_a_body_ended_by_the_connection_closing_is_read_whole(hostile):
    hostile.behaviour = Behaviour(mode="until_close", content="Read to the end of the connection.")
    assert call(hostile.base_url).content == "Read to the end of the connection."


def test_an_answer_after_100_continue_is_the_one_read(hostile):
    hostile.behaviour = Behaviour(mode="continue", content="After the informational answer.")
    assert call(hostile.base_url).content == "After the informational answer."


@pytest.mark.parametrize("mode, words", [("garbage", "not an HTTP answer"), ("cut", "closed the connection")])
def test_no_http_or_a_body_cut_short_is_a_connection_error_asked_again(hostile, mode, words):
    hostile.behaviour = Behaviour(mode=mode)
    with pytest.raises(ChatError) as caught:
        call(hostile.base_url, max_attempts=2)
    assert caught.value.kind == "connection" and words in caught.value.message
    assert caught.value.attempts == 2 and len(hostile.requests) == 2


def test_calls_one_after_another_share_one_kept_alive_connection(hostile):
    async def three():
        client = ChatClient(Endpoint(hostile.base_url), limiter=AdaptiveLimiter(1), timeout=5)
        try:
            return [(await client.complete("test-model", MESSAGES)).content for _ in range(3)]
        finally:
            await client.aclose()

    assert asyncio.run(three()) == ["A reply."] * 3
    assert len({request["peer"] for request in hostile.requests}) == 1
    assert hostile.requests[0]["headers"]["user-agent"].startswith("hbtui/")


def test_an_answer_no_request_asked_for_is_never_taken_for_the_next_calls(hostile):
    # The server sends two answers to one request: the second must not become the next call's.
    hostile.behaviour = Behaviour(mode="out_of_turn", content="The answer asked for.")

    async def two():
        client = ChatClient(Endpoint(hostile.base_url), limiter=AdaptiveLimiter(1), timeout=5)
        try:
            first = (await client.complete("test-model", MESSAGES)).content
            await asyncio.sleep(0.1)  # the stray answer arrives on the idle connection
            return first, (await client.complete("test-model", MESSAGES)).content
        finally:
            await client.aclose()

    assert asyncio.run(two()) == ("The answer asked for.", "The answer asked for.")
    assert len({request["peer"] for request in hostile.requests}) == 2  # the connection was let go


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["big", "gzip_bomb"])
def test_a_50_mb_answer_or_a_gzip_bomb_leaves_hbtui_run_under_300_mib(hostile, tmp_path, mode):
    hostile.behaviour = Behaviour(mode=mode, size=50 * 1024 * 1024)
    data = write_jsonl(tmp_path / "one.jsonl", [make_record("p1", [("Advises rest", 5, ["axis:accuracy"])])])
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_", "GRADER_"))},
        "BASE_URL": hostile.base_url,
        "MODEL_TEST": "m",
        "MODEL_GRADER": "g",
        "GRADER_TEMPLATE": "builtin",
        "MAX_ATTEMPTS": "2",
        "HBTUI_DB": str(tmp_path / "runs" / "hbtui.sqlite"),
    }
    code, peak, output = run_measured(
        [sys.executable, "-m", "hbtui", "run", "--data", str(data), "--name", mode], env, tmp_path
    )
    assert "Traceback" not in output
    assert code != 0 and "too_large" in output, output
    assert peak < 300, f"peak {peak:.0f} MiB"
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as db:
        assert db.execute("SELECT status, error_kind FROM conversations").fetchall() == [("failed", TOO_LARGE)]


# ---- 12. redirects ----------------------------------------------------------------------


def test_a_redirect_to_another_origin_is_refused_naming_both(hostile):
    with HostileServer() as other:
        hostile.behaviour = Behaviour(mode="redirect", location=other.base_url + "/chat/completions")
        with pytest.raises(ChatError) as error:
            call(hostile.base_url, key="sk-secret-key-value-1234")
        assert error.value.kind == REDIRECTED and error.value.fatal
        assert hostile.base_url in error.value.message and other.origin in error.value.message
        assert other.requests == []  # its answer is never taken, nor is it sent the key


def test_a_redirect_within_the_origin_is_followed_with_the_key(hostile):
    hostile.behaviour = Behaviour(
        mode="redirect", location="/v2/chat/completions", redirect_from="/v1/chat/completions", content="moved"
    )
    assert call(hostile.base_url, key="sk-key").content == "moved"
    assert [r["path"] for r in hostile.requests] == ["/v1/chat/completions", "/v2/chat/completions"]
    moved = hostile.requests[1]
    assert moved["method"] == "POST" and moved["headers"]["authorization"] == "Bearer sk-key"
    assert moved["body"] == hostile.requests[0]["body"]


def test_a_download_follows_a_redirect_to_a_cdn_and_sends_neither_a_key(tmp_path, monkeypatch):
    from hbtui.core.dataset import OfficialFile, download_file

    payload = b'{"prompt_id": "x"}\n'
    import hashlib

    with HostileServer() as cdn, HostileServer() as origin:
        cdn.behaviour = Behaviour(mode="status", status=200, body=payload)
        origin.behaviour = Behaviour(mode="redirect", location=cdn.origin + "/file.jsonl", redirect_status=302)
        monkeypatch.setenv("HBTUI_DATA_URL", origin.origin)
        official = OfficialFile("file.jsonl", hashlib.sha256(payload).hexdigest(), 1)
        path = download_file(official, tmp_path)
        assert path.read_bytes() == payload
        assert origin.requests and cdn.requests  # the redirect was followed
        assert not any("authorization" in r["headers"] for r in origin.requests + cdn.requests)


# ---- 13. a 4xx that is no refusal -------------------------------------------------------


def test_a_generic_400_is_an_error_of_that_call_not_a_refusal(hostile):
    hostile.behaviour = Behaviour(mode="status", status=400)
    with pytest.raises(ChatError) as error:
        call(hostile.base_url, max_attempts=4)
    assert error.value.kind == CLIENT_ERROR and error.value.attempts == 1
    assert len(hostile.requests) == 1  # the same request would get the same 400


@pytest.mark.parametrize("code", ["content_filter", "content_policy_violation"])
def test_a_4xx_content_filter_is_a_refusal(hostile, code):
    body = json.dumps({"error": {"message": "filtered", "type": "invalid_request_error", "code": code}}).encode()
    hostile.behaviour = Behaviour(mode="status", status=400, body=body)
    with pytest.raises(ChatError) as error:
        call(hostile.base_url, max_attempts=3)
    assert error.value.kind == CONTENT_FILTER and not error.value.fatal
    assert error.value.attempts == 1 and len(hostile.requests) == 1  # a refusal is an answer: not asked again


def test_a_200_ended_by_the_content_filter_is_a_refusal(hostile):
    hostile.behaviour = Behaviour(mode="ok", content="", finish_reason="content_filter")
    with pytest.raises(ChatError) as error:
        call(hostile.base_url, max_attempts=3)
    assert error.value.kind == CONTENT_FILTER and len(hostile.requests) == 1


def test_a_400_for_every_call_stops_the_run_resumable(hostile, tmp_path):
    hostile.behaviour = Behaviour(mode="status", status=400)
    data = write_jsonl(
        tmp_path / "d.jsonl", [make_record(f"p{i}", [("Advises rest", 5, ["axis:accuracy"])]) for i in range(40)]
    )
    db = tmp_path / "runs" / "hbtui.sqlite"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_", "GRADER_"))},
        "BASE_URL": hostile.base_url,
        "MODEL_TEST": "m",
        "MODEL_GRADER": "g",
        "GRADER_TEMPLATE": "builtin",
        "CONCURRENCY": "2",
        "HBTUI_DB": str(db),
    }
    result = subprocess.run(
        [sys.executable, "-m", "hbtui", "run", "--data", str(data), "--name", "proxy"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in result.stderr
    assert result.returncode != 0
    assert "refused every call with HTTP 400" in result.stdout + result.stderr
    assert "--base-url" in result.stdout + result.stderr  # what to do about it
    assert len(hostile.requests) < 10  # not 40 conversations failed one by one
    with sqlite3.connect(db) as connection:
        (failed,) = connection.execute("SELECT count(*) FROM conversations WHERE status = 'failed'").fetchone()
        (pending,) = connection.execute("SELECT count(*) FROM conversations WHERE status = 'pending'").fetchone()
    assert pending >= 30 and failed <= 5
    # Resumable: once the proxy takes the requests, a resume asks every conversation again (this
    # server's "verdicts" are no verdicts, so the run then ends incomplete on its grading).
    hostile.behaviour = Behaviour(mode="ok")
    resumed = subprocess.run(
        [sys.executable, "-m", "hbtui", "resume", "proxy"], env=env, cwd=tmp_path, capture_output=True, timeout=120
    )
    assert b"Traceback" not in resumed.stderr
    with sqlite3.connect(db) as connection:
        left = connection.execute("SELECT count(*) FROM conversations WHERE status != 'generated'").fetchone()
    assert left == (0,), resumed.stdout


def test_client_errors_and_older_refused_rows_are_asked_again_by_regrade_errors(server, small_dataset, tmp_path):
    from tests.conftest import run_engine, settings_for

    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db, grader_template="builtin")
    run_id, status = asyncio.run(run_engine(settings, small_dataset))
    assert status == "finished"
    with sqlite3.connect(db) as connection:
        ids = [row[0] for row in connection.execute("SELECT id FROM conversations ORDER BY id")]
        connection.execute(
            "UPDATE conversations SET status = 'failed', reply = NULL, error_kind = 'refused' WHERE id = ?", (ids[0],)
        )
        connection.execute(
            "UPDATE conversations SET status = 'failed', reply = NULL, error_kind = 'client_error' WHERE id = ?",
            (ids[1],),
        )
        connection.execute(
            "UPDATE conversations SET status = 'failed', reply = NULL, error_kind = 'content_filter' WHERE id = ?",
            (ids[2],),
        )
    from hbtui.store import Store

    async def reset():
        async with await Store.open(db) as store:
            return await store.reset_errors(run_id)

    _, replies = asyncio.run(reset())
    assert replies == 2
    with sqlite3.connect(db) as connection:
        statuses = dict(connection.execute("SELECT id, status FROM conversations WHERE id IN (?, ?, ?)", ids[:3]))
    assert statuses == {ids[0]: "pending", ids[1]: "pending", ids[2]: "failed"}  # a refusal stays an answer


def test_a_download_that_drips_ends_at_its_own_deadline(tmp_path, monkeypatch):
    from hbtui.core.dataset import DatasetError, OfficialFile, download_file

    with HostileServer() as dripping:
        dripping.behaviour = Behaviour(mode="drip_body", interval=0.2)  # its .part is begun, then dropped
        monkeypatch.setenv("HBTUI_DATA_URL", dripping.origin)
        monkeypatch.setenv("HBTUI_DOWNLOAD_TIMEOUT", "1.5")
        with pytest.raises(DatasetError, match=r"not complete within 1.5 s \(HBTUI_DOWNLOAD_TIMEOUT\)"):
            download_file(OfficialFile("file.jsonl", "0" * 64, 1), tmp_path)
    assert not list(tmp_path.glob("*.part"))  # nothing half-written is left to be mistaken for it


def test_the_model_list_of_a_hostile_server_is_read_within_the_limit(hostile):
    """`hbtui check` and a run's check of its models read GET /models as a reply is read: a gzip
    bomb there is cut at MAX_ANSWER_MIB, said in one line, never inflated whole."""
    from hbtui.client.checks import check_connection, served_models
    from hbtui.client.wire import Endpoint
    from tests.conftest import offline_settings

    hostile.behaviour = Behaviour(mode="gzip_bomb")
    settings = offline_settings(
        base_url=(hostile.base_url,), model_test="m", model_grader="g", max_answer_mib=2.0, timeout=10.0
    )
    assert asyncio.run(served_models(Endpoint(hostile.base_url, None), 10.0, settings.max_answer_bytes)) is None
    lines = [f"{result.name}: {result.message}" for result in asyncio.run(check_connection(settings))]
    assert "test endpoint: reachable; the model list is larger than MAX_ANSWER_MIB" in lines, lines


# ---- 4. An answer's JSON, read as json.loads reads it ---------------------------------------

JSON_CASES = [
    b'{"choices": [{"message": {"content": "caf\\u00e9 \\ud83d\\ude00"}}], "usage": {"prompt_tokens": 12}}',
    b'{"a": 1, "a": 2}',  # the last of a repeated key
    b'{"x": 0.1, "y": -0.0, "z": 1e-7, "w": 1.7976931348623157e308}',
    b'{"n": NaN, "i": Infinity}',  # orjson refuses these; json.loads reads them
    b'{"big": 1e400}',
    b'{"s": "\\ud800 alone"}',  # a lone surrogate
    '\ufeff{"bom": true}'.encode(),  # a byte-order mark
    '{"utf16": "yes"}'.encode("utf-16"),
]


@pytest.mark.parametrize("body", JSON_CASES)
def test_an_answers_json_is_what_json_loads_reads(body):
    from hbtui.client.http1 import HttpAnswer

    got = HttpAnswer(200, "OK", {}, body).json()
    expected = json.loads(body)
    assert json.dumps(got) == json.dumps(expected) and repr(got) == repr(expected)


@pytest.mark.parametrize(
    "body, error",
    [(b"[" * 100_000 + b"]" * 100_000, RecursionError), (b"not json", ValueError), (b"\xff\xfe\xfa", ValueError)],
)
def test_an_answer_json_loads_refuses_is_refused_as_it_refuses_it(body, error):
    from hbtui.client.http1 import HttpAnswer

    with pytest.raises(error):
        json.loads(body)
    with pytest.raises(error):
        HttpAnswer(200, "OK", {}, body).json()


# ---- 5. What servers send as they are, and what a keep-alive pool meets -------------------


def test_lines_ended_by_a_bare_lf_are_read_as_aiohttp_read_them(hostile):
    hostile.behaviour = Behaviour(mode="bare_lf", content="Lines ended by LF.")
    assert call(hostile.base_url).content == "Lines ended by LF."


@pytest.mark.parametrize(
    "mode, kind, words",
    [
        ("reset_body", "connection", "closed the connection"),  # no length, then a reset: not the whole body
        ("gzip_cut", "bad_response", "ends before its end"),
        ("upgrade", "connection", "switched protocols"),
    ],
)
def test_a_body_cut_short_or_an_upgrade_is_never_taken_for_an_answer(hostile, mode, kind, words, caplog):
    hostile.behaviour = Behaviour(mode=mode)
    with pytest.raises(ChatError) as caught:
        call(hostile.base_url, max_attempts=1)
    assert caught.value.kind == kind and words in caught.value.message
    assert "Fatal error" not in caplog.text  # nothing escaped the protocol into asyncio's log


def test_a_kept_alive_connection_closed_as_it_is_reused_is_replaced_without_a_failed_attempt(hostile):
    # The server's idle timeout meets the next request on the way: nothing answered, so the
    # request is made again on a new connection, not counted as a failed attempt.
    hostile.behaviour = Behaviour(mode="drop_reused", content="Made again.")
    calls = []

    async def three():
        client = ChatClient(
            Endpoint(hostile.base_url), limiter=AdaptiveLimiter(1), timeout=5, max_attempts=1, on_call=calls.append
        )
        try:
            return [(await client.complete("test-model", MESSAGES)).content for _ in range(3)]
        finally:
            await client.aclose()

    assert asyncio.run(three()) == ["Made again."] * 3
    assert hostile.dropped == 2 and all(record.ok for record in calls)


def test_a_reused_connection_dropped_after_the_server_worked_on_the_request_is_a_failed_attempt(hostile):
    # A proxy's idle timeout while the model generates: the request was read and maybe paid for,
    # so it is not made again unseen. It is the call's failure, as any connection's.
    hostile.behaviour = Behaviour(mode="drop_reused", content="Answered.", drop_after=1.5)

    async def two():
        client = ChatClient(Endpoint(hostile.base_url), limiter=AdaptiveLimiter(1), timeout=10, max_attempts=1)
        try:
            first = await client.complete("test-model", MESSAGES)
            with pytest.raises(ChatError) as caught:
                await client.complete("test-model", MESSAGES)
            return first.content, caught.value
        finally:
            await client.aclose()

    content, error = asyncio.run(two())
    assert content == "Answered." and error.kind == "connection" and error.attempts == 1
    assert hostile.dropped == 1  # the second request reached the server once


def test_a_request_whose_deadline_passed_while_it_connected_is_not_sent(hostile):
    # Sent, it would be paid for and cut off unread by the timer a loop turn later.
    from hbtui.client.http1 import HttpPool, _request_head

    async def go():
        async with HttpPool(30, 2) as pool:
            origin, host, head = _request_head("POST", hostile.base_url + "/chat/completions", {})
            loop = asyncio.get_running_loop()
            connection = await pool._connect(origin, host, loop.time() + 30)
            with pytest.raises(TimeoutError):
                await pool._exchange(origin, connection, head + b"Content-Length: 2\r\n\r\n{}", 1000, loop.time(), None)
            await asyncio.sleep(0.2)

    asyncio.run(go())
    assert hostile.requests == []


@pytest.mark.parametrize("key", ["sk-\u2011dash", "sk-line\nbreak"])
def test_a_key_http_cannot_carry_stops_at_once_and_sends_nothing(hostile, key):
    # Every call would fail the same way: no connection's failure, so not retried, and fatal.
    from hbtui.client.checks import _check_endpoint
    from hbtui.core.errors import AUTH, FATAL_KINDS

    with pytest.raises(ChatError) as caught:
        call(hostile.base_url, key=key, max_attempts=3)
    assert caught.value.kind == AUTH in FATAL_KINDS and caught.value.attempts == 1
    assert "cannot be sent" in caught.value.message and key not in caught.value.message
    results = asyncio.run(_check_endpoint("test", Endpoint(hostile.base_url, key), [("test", "test-model")], 5))
    assert not results[0].ok and "cannot be asked" in results[0].message, results
    assert hostile.requests == []


def test_a_redirect_to_a_port_beyond_65535_is_a_bad_answer_not_a_crash(hostile):
    hostile.behaviour = Behaviour(mode="redirect", location="http://127.0.0.1:99999/v1/chat/completions")
    with pytest.raises(ChatError) as caught:
        call(hostile.base_url, max_attempts=1)
    assert caught.value.kind == "bad_response" and "not a URL" in caught.value.message


def test_the_request_line_and_host_as_servers_expect_them():
    from hbtui.client.http1 import _keepalive, _request_head

    origin, host, head = _request_head("POST", "https://api.example.com:443/v1/a b/é?q=x y", {"X-Key": "v"})
    assert origin == ("https", "api.example.com", 443) and host == "api.example.com"
    assert head.startswith(b"POST /v1/a%20b/%C3%A9?q=x%20y HTTP/1.1\r\nHost: api.example.com\r\n")
    assert b"X-Key: v\r\n" in head and b"User-Agent: hbtui/" in head
    assert b"Host: [::1]:8080\r\n" in _request_head("GET", "http://[::1]:8080/v1/models", {})[2]
    assert _request_head("GET", "http://bücher.example/v1", {})[1] == "xn--bcher-kva.example"
    assert b"/v1/already%20escaped " in _request_head("GET", "http://h/v1/already%20escaped", {})[2]
    assert _keepalive("timeout=5, max=100") == 4.0 and _keepalive(None) == 4.0 and _keepalive("timeout=1") == 0.0


def test_a_connection_closed_as_it_is_accepted_fails_at_once_not_at_the_timeout(hostile):
    hostile.behaviour = Behaviour(mode="close_at_once")
    started = time.monotonic()
    with pytest.raises(ChatError) as caught:
        call(hostile.base_url, timeout=30, max_attempts=2)
    assert caught.value.kind == "connection" and caught.value.attempts == 2
    assert time.monotonic() - started < 10  # not TIMEOUT's 30 s


def test_a_request_on_a_connection_lost_before_it_was_sent_fails_at_once(hostile):
    # The race behind the test above, made certain: the server's close is seen (connection_lost
    # has run) after the connection was made and before the request is written. Written into a
    # closed transport, its bytes would vanish and only TIMEOUT would end the call.
    from hbtui.client.http1 import HttpPool, TransportError, _request_head

    async def go():
        async with HttpPool(30, 2) as pool:
            url = hostile.base_url + "/chat/completions"
            origin, host, head = _request_head("POST", url, {})
            connection = await pool._connect(origin, host, asyncio.get_running_loop().time() + 30)
            connection.transport.abort()
            await asyncio.sleep(0.05)
            assert connection.closed
            started = time.monotonic()
            with pytest.raises(TransportError, match="before the request was sent"):
                await pool._exchange(
                    origin, connection, head + b"Content-Length: 2\r\n\r\n{}", 1000, started + 30, None
                )
            return time.monotonic() - started

    assert asyncio.run(go()) < 5


def test_a_host_of_several_addresses_is_raced_and_one_of_a_single_address_is_dialled_by_the_loop(hostile, monkeypatch):
    """Happy eyeballs where there is something to race: the first address refuses, the second is
    reached. A host of one address is connected to by the event loop itself (half the CPU)."""
    import aiohappyeyeballs

    from hbtui.client.http1 import HttpPool

    port = urlsplit(hostile.base_url).port
    with socket.socket() as unused:  # a port nobody listens on: refused at once
        unused.bind(("127.0.0.1", 0))
        refusing = unused.getsockname()[1]

    def address(to: int) -> tuple:
        return (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", to))

    async def peer_port(addresses: list[tuple]) -> int:
        async with HttpPool(5, 2) as pool:

            async def resolved(host: str, to: int) -> list[tuple]:
                return addresses

            pool._resolve = resolved  # type: ignore[method-assign]
            connection = await pool._connect(
                ("http", "127.0.0.1", port), "127.0.0.1", asyncio.get_running_loop().time() + 5
            )
            assert connection.transport is not None
            try:
                return connection.transport.get_extra_info("peername")[1]
            finally:
                connection.close()

    assert asyncio.run(peer_port([address(refusing), address(port)])) == port

    def not_raced(*args, **kwargs):
        raise AssertionError("one address has nothing to race")

    monkeypatch.setattr(aiohappyeyeballs, "start_connection", not_raced)
    assert asyncio.run(peer_port([address(port)])) == port


def test_connections_made_together_look_their_host_up_once_and_a_failed_lookup_is_not_kept():
    from hbtui.client.http1 import HttpPool

    async def go():
        loop = asyncio.get_running_loop()
        asked = []
        real = loop.getaddrinfo

        async def counted(host, *args, **kwargs):
            asked.append(host)
            await asyncio.sleep(0.01)
            return await real(host, *args, **kwargs)

        loop.getaddrinfo = counted  # type: ignore[method-assign]
        async with HttpPool(5, 2) as pool:
            found = await asyncio.gather(*(pool._resolve("localhost", 80) for _ in range(20)))
            assert all(addresses == found[0] and addresses for addresses in found)
            for _ in range(2):
                with pytest.raises(OSError):
                    await pool._resolve("no-such-host.invalid", 80)
        return asked

    assert asyncio.run(go()) == ["localhost", "no-such-host.invalid", "no-such-host.invalid"]
