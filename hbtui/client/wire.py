"""The wire under the chat client (hbtui.client.chat): an endpoint and a request, the request's
bytes, the connection pool (hbtui.client.http1, which reads an answer against its size limit),
the errors a call ends in, and the model list.

Apart from the client's retries, pacing and quirks so that each can be read whole; the checks
(hbtui.client.checks) use the model list and the session too.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import socket
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from hbtui.client.http1 import HttpAnswer, HttpPool
from hbtui.core.calls import replace_lone_surrogates
from hbtui.core.errors import (
    AUTH,
    CLIENT_ERROR,
    CONNECTION,
    EXIT_FAILED,
    FATAL_KINDS,
    NOT_FOUND,
    TIMEOUT,
    HbtuiError,
)
from hbtui.core.redact import provider_text, redact

if TYPE_CHECKING:
    import httpx

MIB = 1 << 20


def encode_request(body: dict[str, Any]) -> bytes:
    """A request's body as httpx encodes ``json=`` (json.dumps: compact, non-ASCII as UTF-8, no
    NaN), byte for byte, so the requests on the wire stay what the reference sends.

    orjson writes the same bytes for strings, booleans, None, 64-bit integers, lists and dicts
    with string keys, which is all the messages and a response format hold (nearly all of a
    body), at a tenth of the CPU: json.dumps took 27 us a grader request, 9% of `hbtui run`'s
    CPU. Its floats differ in places (1e-05 is 0.00001 to it, NaN null), so a body whose top-level
    float (the temperature) it would write otherwise, and one it cannot write at all (a lone
    surrogate, an integer beyond 64 bits), is encoded by json.dumps, which also raises as before.
    """
    for value in body.values():
        if type(value) is float and not _orjson_writes_it_as_json(value):
            return _json_request(body)
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError
        return _json_request(body)


@functools.lru_cache(maxsize=64)
def _orjson_writes_it_as_json(value: float) -> bool:
    """Once per temperature, not once per request."""
    return math.isfinite(value) and orjson.dumps(value) == repr(value).encode()


def _json_request(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    # Which of several keys of one URL this is (1-based), so that they are told apart; None
    # when the URL is listed once. Never the key itself: the label is shown and stored.
    key_number: int | None = None

    @property
    def label(self) -> str:
        """The endpoint as screens, logs and the database name it: its URL (and key's position)."""
        return self.base_url if self.key_number is None else f"{self.base_url} (key {self.key_number})"

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    @property
    def responses_url(self) -> str:
        return self.base_url.rstrip("/") + "/responses"

    @property
    def origin(self) -> str:
        return origin_of(self.base_url)

    @property
    def secrets(self) -> tuple[str | None, ...]:
        """What this endpoint is sent that it must never get back into our files or screens."""
        return (self.api_key,)

    @property
    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def endpoints_of(pairs: list[tuple[str, str | None]]) -> list[Endpoint]:
    """The endpoints of (URL, key) pairs in order: a URL listed more than once is told apart by
    its key's position."""
    urls = [url for url, _ in pairs]
    return [
        Endpoint(url, key, number if urls.count(url) > 1 else None) for number, (url, key) in enumerate(pairs, start=1)
    ]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    messages: list[dict]
    temperature: float | None
    max_tokens: int | None
    reasoning_effort: str | None
    response_format: dict | None
    priority: int
    slot: int | None = None  # llama.cpp's id_slot: the server slot that holds this prompt's prefix
    api: str = "chat"  # or "responses": POST /responses (hbtui.core.calls.APIS)


class ChatError(HbtuiError):
    exit_code = EXIT_FAILED  # the endpoint failed, not the command

    def __init__(self, kind: str, message: str, status: int | None = None, attempts: int = 1) -> None:
        message, _ = replace_lone_surrogates(message)  # a provider's error text is stored too
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.attempts = attempts
        self.endpoint: str | None = None  # set by the client that raised it

    @property
    def fatal(self) -> bool:
        return self.kind in FATAL_KINDS

    def __str__(self) -> str:
        status = f"HTTP {self.status}: " if self.status else ""
        return f"{self.kind}: {status}{self.message}"


def origin_of(url: str) -> str:
    """scheme://host:port of a URL, the port written out: what a redirect may not leave."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def error_message(
    response: httpx.Response | HttpAnswer, secrets: tuple[str | None, ...]
) -> tuple[str, str | None, str | None]:
    """(message, param, code) from an OpenAI-style error body, or the raw text; the message
    without the key, which providers echo (OpenAI's 401 shows it masked, proxies whole)."""
    try:
        body = response.json()
    except ValueError:
        return provider_text(response.text, secrets, 500).strip() or response.reason_phrase, None, None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return redact(str(error.get("message") or error), secrets), error.get("param"), error.get("code")
    if isinstance(error, str):
        return redact(error, secrets), None, None
    if isinstance(body, dict) and "message" in body:
        return redact(str(body["message"]), secrets), None, None
    return provider_text(json.dumps(body), secrets, 500), None, None


def error_type(response: HttpAnswer | httpx.Response) -> str | None:
    """The ``error.type`` of an OpenAI-style error body (insufficient_quota names itself there too)."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    value = error.get("type") if isinstance(error, dict) else None
    return value if isinstance(value, str) else None


def token_count(value: object) -> int:
    """A token count as the provider reports it, or 0 where it is no count: negative, not finite
    (int(inf) raised), or beyond what SQLite's integers hold."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if 0 <= value < 2**53 else 0


def aiohttp_module():
    """aiohttp, imported by the first request that needs it: the batch API's client (its files'
    uploads are multipart forms) and `hbtui serve`; the chat calls go through hbtui.client.http1."""
    import aiohttp

    return aiohttp


def make_http_client(timeout: float, connections: int) -> HttpPool:
    """The pool the chat calls go through (hbtui.client.http1).

    Neither httpx nor aiohttp: httpx's own pool (httpcore) spends time quadratic in its size
    (measured here, 256 requests in flight at 200 ms latency gave 67 calls/s at 14 ms CPU per
    call), and aiohttp's request machinery cost three times this pool's CPU per call (see
    http1's docstring). Our limiter decides how many requests are in flight, so the pool only
    keeps room for them. TIMEOUT is the whole answer's, from its connection to its last byte.
    """
    return HttpPool(timeout, connections + 8)


def unreachable_reason(exc: BaseException) -> str:
    """Why a request got no answer, in a few words: "no answer within the timeout", "connection
    refused", "unknown host" or "cannot connect"; for the client's errors and the connection
    check alike, whichever library raised (the socket's own error may sit a few causes down)."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    text = " ".join(str(c).lower() for c in chain)
    # httpx raised nothing in a process that never loaded it (the chat calls use hbtui.client.http1).
    httpx = sys.modules.get("httpx")
    timeouts = (asyncio.TimeoutError, httpx.TimeoutException) if httpx else (asyncio.TimeoutError,)
    if any(isinstance(c, timeouts) for c in chain):
        return "no answer within the timeout"
    if any(isinstance(c, ConnectionRefusedError) for c in chain) or "refused" in text:
        return "connection refused"
    if any(isinstance(c, socket.gaierror) for c in chain) or "name or service" in text:
        return "unknown host"
    return "cannot connect"


def transport_error(exc: Exception, timeout: float, attempts: int, secrets: tuple[str | None, ...]) -> ChatError:
    if unreachable_reason(exc) == "no answer within the timeout":
        # TIMEOUT bounds the whole answer, first byte sent to last received.
        return ChatError(TIMEOUT, f"no answer within {timeout:g} s (TIMEOUT)", attempts=attempts)
    detail = redact(f"{type(exc).__name__}: {exc}".rstrip(": "), secrets)
    return ChatError(CONNECTION, f"connection failed ({detail})", attempts=attempts)


async def list_models(endpoint: Endpoint, timeout: float = 10.0, limit: int = 8 * 1024 * 1024) -> list[str]:
    """Model ids an endpoint serves (GET /models), for the connection check and a run's check of
    its models: through the run's own pool and its bounded reader (``limit`` bytes after
    decompression: a gzip bomb is cut, AnswerTooLarge, as a reply is). A refusal is ChatError; a
    transport failure is TransportError or TimeoutError (unreachable_reason reads it); a body
    that is not a model list is ValueError (AnswerUnreadable too)."""
    async with make_http_client(timeout, 1) as http:
        answer = await http.get(endpoint.base_url.rstrip("/") + "/models", endpoint.headers, limit=limit)
    if answer.status_code != 200:
        message, _, _ = error_message(answer, endpoint.secrets)
        kind = AUTH if answer.status_code in (401, 403) else NOT_FOUND if answer.status_code == 404 else CLIENT_ERROR
        raise ChatError(kind, message, answer.status_code)
    try:
        data = answer.json()["data"]
    except (KeyError, TypeError, RecursionError):
        raise ValueError("not a model list") from None
    if not isinstance(data, list):
        raise ValueError("not a model list")
    return [str(item.get("id")) for item in data if isinstance(item, dict)]
