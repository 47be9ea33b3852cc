"""One async OpenAI-compatible chat client, for both the model under test and the grader.

Retries with exponential backoff and jitter on 5xx, timeouts and dropped connections, a bounded
number of attempts; a rate-limit 429 is no failed attempt: the call waits for the endpoint's pace
(hbtui.core.rate_limits) and goes again, while a quota or a daily limit stops it at once. And the
provider quirks that break naive harnesses: ``response_format`` refused, parameters a model refuses or wants renamed,
reasoning in a separate field or inside ``<think>``. What was learned about an endpoint and
model is remembered for the rest of the client's life and reported once through ``on_note``.
What lies under it (the endpoint, the request's bytes, the errors) is hbtui.client.wire, and
under that the connection pool, which reads an answer against its limit (hbtui.client.http1).

Longer than most modules (about 620 lines) because one request's attempts are one loop: the pace,
the retries, the quirks an endpoint refuses (learned and left out), the refusals and the reply's
parsing all act on it; the wire under it is in wire.py, the limiter in limiter.py.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from hbtui.client.http1 import (
    AnswerTooLarge,
    AnswerUnreadable,
    CallWithheld,
    HttpAnswer,
    HttpPool,
    TransportError,
    UnsendableRequest,
)
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import (
    MIB,
    ChatError,
    ChatRequest,
    Endpoint,
    encode_request,
    error_message,
    error_type,
    make_http_client,
    origin_of,
    token_count,
    transport_error,
)
from hbtui.core.calls import CHAT_API, GENERATION, RESPONSES_API, ChatResult, replace_lone_surrogates

# Error kinds live in hbtui.core.errors (the store needs them without the client); named here too
# for the modules that take them from the client.
from hbtui.core.errors import (  # noqa: F401
    AUTH,
    BAD_RESPONSE,
    CLIENT_ERROR,
    CONNECTION,
    CONTENT_FILTER,
    CONTEXT_LENGTH,
    DAILY_LIMIT,
    EXIT_FAILED,
    FATAL_KINDS,
    NOT_FOUND,
    QUOTA,
    RATE_LIMITED,
    REDIRECTED,
    REFUSED,
    RETRIED_KINDS,
    SERVER_ERROR,
    TIMEOUT,
    TOO_LARGE,
    TRANSIENT_KINDS,
    UNPARSEABLE,
    HbtuiError,
)
from hbtui.core.rate_limits import DAILY, RatePacer, classify_refusal, refusal_message
from hbtui.core.rate_limits import QUOTA as QUOTA_REFUSAL
from hbtui.core.redact import provider_text
from hbtui.core.text import one_line

OPTIONAL_PARAMS = (
    "reasoning_effort",
    "temperature",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "max_output_tokens",  # the Responses API's
    "reasoning",
)
CONTEXT_PATTERNS = re.compile(
    r"context[ _]length|context size|maximum context|context window|too many tokens|exceed_context|prompt is too long",
    re.IGNORECASE,
)
# What a provider's error code says when its content filter refused the request.
CONTENT_FILTER_CODES = ("content_filter", "content_policy_violation")
MAX_REDIRECTS = 5  # within the endpoint's origin (a path moved, a trailing slash)
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
THINK_BLOCK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


@dataclass
class ModelQuirks:
    """What an endpoint and model turned out not to accept.

    Until one request of a shape (with or without response_format) has succeeded, requests of
    that shape go one at a time: otherwise every request in flight would be refused for the
    same reason before the first refusal taught us anything.
    """

    json_schema: bool = True
    dropped: set[str] = field(default_factory=set)
    max_tokens_key: str = "max_tokens"
    settled: set[bool] = field(default_factory=set)
    first_call: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True)
class CallRecord:
    """Handed to ``on_call`` after every HTTP attempt, for live rates and latency figures."""

    endpoint: str
    ok: bool
    kind: str | None
    latency_ms: float
    message: str = ""


def split_reasoning(message: dict) -> tuple[str, str | None]:
    """Final answer and reasoning from a message, whichever way the server delivers reasoning."""
    content = message.get("content") or ""
    if not isinstance(content, str):  # content parts: keep the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if not isinstance(reasoning, str):
        reasoning = None
    match = THINK_BLOCK.match(content)
    if match:
        inner = match.group(1).strip()
        reasoning = f"{reasoning}\n{inner}" if reasoning else inner
        content = content[match.end() :]
    elif content.lstrip().startswith("<think>") and "</think>" not in content:
        # Cut off while thinking: there is no final answer at all.
        reasoning = content.lstrip()[len("<think>") :]
        content = ""
    return content.strip(), reasoning


def _refused_param(message: str, param: str | None, body: dict) -> str | None:
    """The optional request parameter a 400 complains about, if any."""
    schema = "response_format" in body or "text" in body  # the Responses API asks for it in text.format
    if schema and (
        param in ("response_format", "text", "text.format")
        or re.search(r"response_format|text\.format|json_schema|structured output", message, re.I)
    ):
        return "response_format"
    if param in body and param in OPTIONAL_PARAMS:
        return param
    for name in OPTIONAL_PARAMS:
        if name in body and re.search(rf"(?<![a-z_]){name}(?![a-z_])", message):
            return name
    return None


class ChatClient:
    """Chat completions for one endpoint, shared by every call a run makes to it."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        limiter: AdaptiveLimiter,
        timeout: float = 120.0,
        max_attempts: int = 6,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        on_note: Callable[[str], None] | None = None,
        on_call: Callable[[CallRecord], None] | None = None,
        http: HttpPool | None = None,
        gate: asyncio.Event | None = None,
        before_send: Callable[[], None] | None = None,
        rate_limits: Mapping[str, tuple[float | None, float | None]] | None = None,
        rate_limit_patience: float = 600.0,
        key_name: str = "API_KEY",
        refusals_for: float | None = None,
        max_answer_bytes: int = 8 * MIB,
    ) -> None:
        """``rate_limits``: (RPM, TPM) given for a model, which win over what is learned;
        ``key_name``: the setting that holds this endpoint's key, for a quota's message;
        ``timeout``: the most one answer may take, from sending to its last byte (the wait for
        the endpoint's pace is not part of it); ``max_answer_bytes``: the most an answer may
        hold after decompression (MAX_ANSWER_MIB)."""
        self.endpoint = endpoint
        self.max_answer_bytes = max_answer_bytes
        self.rate_limits = dict(rate_limits or {})
        self.rate_limit_patience = rate_limit_patience
        # How long nothing but 429s is borne before the call gives up (the patience, unless told:
        # the connection check gives up sooner, but still tells a daily limit by the patience).
        self.refusals_for = rate_limit_patience if refusals_for is None else refusals_for
        self.key_name = key_name
        # One pace per model, as OpenAI's limits are per model (hbtui.core.rate_limits).
        self.pacers: dict[str, RatePacer] = {}
        # Since when this endpoint has answered nothing but rate-limit 429s (monotonic), if it has.
        self.refusing_since: float | None = None
        # A quota or daily limit reached: every later call raises this, unsent (the calls already
        # in flight are the only ones sent after it).
        self.closed: ChatError | None = None
        self.limiter = limiter
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.on_note = on_note or (lambda message: None)
        self.on_call = on_call or (lambda record: None)
        self.quirks: dict[str, ModelQuirks] = {}
        self._chat_url = endpoint.chat_url
        self._headers = endpoint.headers
        # While the gate is clear (a paused run) no new request leaves, retries included.
        self.gate = gate
        # Asked once a slot is held, just before the gate's last look: its owner closes the gate
        # there if its right to call lapsed meanwhile (a process stopped past its lease). A slot
        # freed by an answer wakes the next call before that answer reaches its owner.
        self.before_send = before_send
        self._own_http = http is None
        # Made at the first request: a run whose calls all come from the verdict cache never
        # builds a connection pool (and its TLS context, a tenth of a second).
        self._http = http

    async def aclose(self) -> None:
        if self._own_http and self._http is not None:
            await self._http.close()

    @property
    def http(self) -> HttpPool:
        if self._http is None:
            self._http = make_http_client(self.timeout, self.limiter.max_limit)
        return self._http

    def _may_send(self) -> bool:
        """The last look before a request's bytes leave: its owner may close the gate here."""
        if self.before_send is not None:
            self.before_send()
        return self.gate is None or self.gate.is_set()

    def learned(self, model: str, api: str = CHAT_API) -> ModelQuirks | None:
        """What this endpoint and model refused so far, asked through ``api``."""
        return self.quirks.get(_learned_as(model, api))

    def _url(self, request: ChatRequest) -> str:
        return self._chat_url if request.api == CHAT_API else self.endpoint.responses_url

    async def _post(self, body: dict[str, Any], attempts: int, url: str) -> HttpAnswer:
        """One answer, read whole within TIMEOUT from its connection to the last byte received
        (a server that drips a byte a second never resets it), and within MAX_ANSWER_MIB.
        Redirects are followed only within the endpoint's origin: another server's answer is
        never taken for the model's, nor sent its key."""
        data = encode_request(body)
        http = self.http
        may_send = None if self.before_send is None else self._may_send
        asked = url
        for _ in range(MAX_REDIRECTS + 1):
            try:
                answer = await http.post(url, data, self._headers, limit=self.max_answer_bytes, may_send=may_send)
            except AnswerTooLarge as exc:
                raise ChatError(
                    TOO_LARGE,
                    f"the answer is over MAX_ANSWER_MIB ({self.max_answer_bytes / MIB:g} MiB) after"
                    f" decompression: cut at {exc.size:,} bytes, not read further",
                    exc.status,
                    attempts,
                ) from None
            except AnswerUnreadable as exc:
                raise ChatError(BAD_RESPONSE, str(exc), exc.status, attempts) from None
            location = answer.headers.get("Location")
            if answer.status_code in REDIRECT_STATUSES and location:
                target = urljoin(url, location)
                try:
                    origin = origin_of(target)
                except ValueError:  # a port beyond 65535, a broken address
                    raise ChatError(
                        BAD_RESPONSE,
                        f"{asked} redirected (HTTP {answer.status_code}) to {one_line(target, 200)}, not a URL",
                        answer.status_code,
                        attempts,
                    ) from None
                if origin != self.endpoint.origin:
                    raise ChatError(
                        REDIRECTED,
                        f"{asked} redirected (HTTP {answer.status_code}) to another origin,"
                        f" {one_line(target, 200)}: refused, so that no other server answers for the"
                        " model or is sent its key; set BASE_URL to the server meant",
                        answer.status_code,
                        attempts,
                    )
                url = target
                continue
            return answer
        raise ChatError(BAD_RESPONSE, f"{asked}: more than {MAX_REDIRECTS} redirects", None, attempts)

    def _body(self, request: ChatRequest, quirks: ModelQuirks) -> dict[str, Any]:
        return request_body(request, quirks)

    def _learn(self, model: str, quirks: ModelQuirks, param: str) -> None:
        where = f"{self.endpoint.base_url} model {model}"
        if param == "response_format":
            quirks.json_schema = False
            self.on_note(f"{where}: response_format json_schema refused; asking without it and parsing the reply")
        elif param == "max_tokens":
            quirks.max_tokens_key = "max_completion_tokens"
            self.on_note(f"{where}: max_tokens refused; sending max_completion_tokens instead")
        else:
            quirks.dropped.add(param)
            self.on_note(f"{where}: parameter {param} refused; leaving it out from now on")

    def pacer(self, model: str) -> RatePacer:
        pacer = self.pacers.get(model)
        if pacer is None:
            rpm, tpm = self.rate_limits.get(model, (None, None))
            pacer = self.pacers[model] = RatePacer(rpm, tpm)
        return pacer

    def _closed_error(self, attempts: int) -> ChatError:
        closed = self.closed
        assert closed is not None
        error = ChatError(closed.kind, closed.message, closed.status, attempts)
        error.endpoint = self.endpoint.label
        return error

    def _delay(self, attempt: int) -> float:
        ceiling = min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)

    async def complete(
        self,
        model: str,
        messages: list[dict],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        response_format: dict | None = None,
        priority: int = GENERATION,
        leave: Callable[[], bool] | None = None,
        slot: int | None = None,
        api: str = CHAT_API,
    ) -> ChatResult:
        """``leave``: asked after a failed attempt, before the next; True gives up on this
        endpoint at once (the call is not answered, so another endpoint may take it). ``api``:
        chat completions, or the Responses API (POST /responses)."""
        request = ChatRequest(
            model, messages, temperature, max_tokens, reasoning_effort, response_format, priority, slot, api
        )
        # What one API refuses says nothing of the other's parameters: learned apart.
        learned_as = _learned_as(model, api)
        quirks = self.quirks.get(learned_as) or self.quirks.setdefault(learned_as, ModelQuirks())
        shape = response_format is not None
        if shape not in quirks.settled:
            async with quirks.first_call:
                if shape not in quirks.settled:
                    result = await self._complete(request, quirks, leave)
                    quirks.settled.add(shape)
                    return result
            # Settled while we waited: go now, without holding the lock (it would serialise us).
        return await self._complete(request, quirks, leave)

    async def _acquire(self, priority: int) -> None:
        while True:
            if self.gate is not None and not self.gate.is_set():  # a coroutine a call saved when open
                await self.gate.wait()
            await self.limiter.acquire(priority)
            if self.before_send is not None:
                self.before_send()
            if self.gate is None or self.gate.is_set():
                return
            self.limiter.release()  # paused while we queued for the slot: wait for the resume

    async def _complete(
        self, request: ChatRequest, quirks: ModelQuirks, leave: Callable[[], bool] | None = None
    ) -> ChatResult:
        model = request.model
        pacer = self.pacer(model)
        attempts = 0
        adjustments = 0
        refusals = 0  # rate-limit 429s of this call
        while True:
            attempts += 1
            body = self._body(request, quirks)
            if self.closed is not None:
                raise self._closed_error(attempts - 1)
            await self._acquire(request.priority)
            prompt_chars = 0
            if pacer.paced or pacer.refused:
                # The endpoint's pace: waited for in the slot, outside the call's TIMEOUT.
                prompt_chars = _prompt_chars(request.messages)
                tokens = pacer.estimate_tokens(prompt_chars, request.max_tokens) if pacer.token_rate else 0.0
                try:
                    await pacer.turn(tokens)
                except BaseException:
                    self.limiter.release()
                    raise
            if self.closed is not None:
                self.limiter.release()
                raise self._closed_error(attempts - 1)
            if leave is not None and leave():
                # Set aside while this call waited for its turn: it goes elsewhere, unsent.
                self.limiter.release()
                moved = ChatError(CONNECTION, "endpoint set aside before the call was sent", attempts=attempts - 1)
                moved.endpoint = self.endpoint.label
                raise moved
            sent_at = time.monotonic()
            pacer.sent(sent_at)
            started = time.perf_counter()
            try:
                response = await self._post(body, attempts, self._url(request))
                error = None
            except ChatError as exc:  # too large, redirected away, undecodable
                error = exc
            except CallWithheld:
                # Stopped between its slot and its bytes, and its right to call lapsed
                # meanwhile: nothing left, so nothing was tried; it waits for the gate
                # (the slot is given back below, as after any call).
                attempts -= 1
                continue
            except UnsendableRequest as exc:
                # Its key (most often) or its URL: no call to this endpoint can go, so the run stops.
                error = ChatError(AUTH, f"the request cannot be sent: {exc}", attempts=attempts)
            except (TimeoutError, TransportError) as exc:
                error = transport_error(exc, self.timeout, attempts, self.endpoint.secrets)
            finally:
                self.limiter.release()
            latency_ms = (time.perf_counter() - started) * 1000
            if error is None:
                status = response.status_code
                if status == 200:
                    try:
                        result = self._result(
                            response, latency_ms, attempts, "response_format" in body or "text" in body, request.api
                        )
                    except ChatError as exc:
                        error = exc
                    else:
                        self.limiter.succeeded()
                        self._answered(pacer, model, response, sent_at, prompt_chars, result.prompt_tokens)
                        self.on_call(CallRecord(self.endpoint.label, True, None, latency_ms))
                        result.endpoint = self.endpoint.label
                        return result
                else:
                    message, param, code = error_message(response, self.endpoint.secrets)
                    if status in (402, 429):
                        stop = self._refused(pacer, model, response, message, code, latency_ms, attempts, leave)
                        if stop is not None:
                            raise stop
                        attempts -= 1  # waiting for the endpoint's rate is no failed try
                        refusals += 1
                        if not pacer.holding():
                            # No wait said, no pace known: this call backs off on its own.
                            await asyncio.sleep(self._delay(min(refusals, 6)))
                        continue
                    self._answered(pacer, model, response, sent_at, 0, 0)
                    if status >= 500:
                        error = ChatError(SERVER_ERROR, message, status, attempts)
                    elif status == 408:
                        error = ChatError(TIMEOUT, message, status, attempts)
                    elif status in (401, 403):
                        error = ChatError(AUTH, message, status, attempts)
                    elif status == 404 and request.api == RESPONSES_API and code != "model_not_found":
                        # The route itself is missing (vLLM, llama.cpp and proxies without it): no
                        # later call would fare better, so it stops the run as a wrong model does.
                        error = ChatError(
                            NOT_FOUND,
                            f"the endpoint has no Responses API (404 for POST {self.endpoint.responses_url}):"
                            " ask it through chat completions (API_TEST=chat or API_GRADER=chat)",
                            status,
                            attempts,
                        )
                    elif status == 404:
                        error = ChatError(
                            NOT_FOUND, f"{message} ({self._url(request)}, model {model})", status, attempts
                        )
                    elif status in (400, 413, 422) and (
                        code == "context_length_exceeded" or CONTEXT_PATTERNS.search(message)
                    ):
                        error = ChatError(CONTEXT_LENGTH, message, status, attempts)
                    elif 400 <= status < 500 and (
                        code in CONTENT_FILTER_CODES or error_type(response) in CONTENT_FILTER_CODES
                    ):
                        error = ChatError(CONTENT_FILTER, message, status, attempts)
                    else:
                        refused = _refused_param(message, param, body) if status in (400, 422) else None
                        if refused and adjustments < 6:
                            adjustments += 1
                            attempts -= 1  # learning what the server accepts is not a failed try
                            self._learn(model, quirks, refused)
                            continue
                        # Not a verdict on the conversation (a proxy's "400 bad request"): an
                        # error of this call, asked again by resume and regrade-errors.
                        error = ChatError(CLIENT_ERROR, message, status, attempts)
            error.attempts = attempts
            error.endpoint = self.endpoint.label
            self.on_call(CallRecord(self.endpoint.label, False, error.kind, latency_ms, error.message))
            if error.kind not in RETRIED_KINDS or attempts >= self.max_attempts or (leave is not None and leave()):
                raise error
            await asyncio.sleep(self._delay(attempts))

    def _answered(
        self, pacer: RatePacer, model: str, response: HttpAnswer, sent_at: float, chars: int, tokens: int
    ) -> None:
        """Any answer but a 429: the endpoint answers again, and its headers may tell its pace."""
        self.refusing_since = None
        note = pacer.answered(response.headers, sent_at, chars, tokens)
        if note:
            self.on_note(f"{self.endpoint.label} model {model}: {note}")

    def _refused(
        self,
        pacer: RatePacer,
        model: str,
        response: HttpAnswer,
        message: str,
        code: str | None,
        latency_ms: float,
        attempts: int,
        leave: Callable[[], bool] | None,
    ) -> ChatError | None:
        """A 429 or 402: None when the call is to wait for the pace and go again; else the error
        it ends in (a quota, a daily limit, or RATE_LIMIT_PATIENCE of nothing but 429s)."""
        label = self.endpoint.label
        refusal = classify_refusal(
            response.status_code, code, error_type(response), message, response.headers, self.rate_limit_patience
        )
        if refusal.kind in (QUOTA_REFUSAL, DAILY):
            kind = QUOTA if refusal.kind == QUOTA_REFUSAL else DAILY_LIMIT
            error = ChatError(kind, refusal_message(refusal, self.key_name), response.status_code, attempts)
            error.endpoint = label
            if self.closed is None:
                self.closed = error
                self.on_note(f"{label} model {model}: {one_line(message, 300)}")
            self.on_call(CallRecord(label, False, kind, latency_ms, error.message))
            return error
        now = time.monotonic()
        note = pacer.refused_now(response.headers, refusal.wait)
        if not pacer.holding():
            self.limiter.rate_limited()  # no rate to keep, no wait said: fewer in flight meanwhile
        if note:
            self.on_note(f"{label} model {model}: {note}")
        self.refusing_since = self.refusing_since or now
        self.on_call(CallRecord(label, False, RATE_LIMITED, latency_ms, message))
        patience = self.refusals_for
        if now - self.refusing_since >= patience:
            pace = pacer.describe()
            error = ChatError(
                RATE_LIMITED,
                f"{label} answered nothing but 429 (rate limited) for {now - self.refusing_since:.0f} s"
                f" (RATE_LIMIT_PATIENCE {patience:g} s)" + (f"; its pace was {pace}" if pace else "") + f": {message}",
                response.status_code,
                attempts,
            )
        elif leave is not None and leave():
            error = ChatError(RATE_LIMITED, message, response.status_code, attempts)
        else:
            return None
        error.endpoint = label
        return error

    def _result(
        self, response: HttpAnswer, latency_ms: float, attempts: int, json_schema: bool, api: str = CHAT_API
    ) -> ChatResult:
        return answer_result(response, latency_ms, attempts, json_schema, api, self.endpoint.secrets)


def request_body(request: ChatRequest, quirks: ModelQuirks) -> dict[str, Any]:
    """The request as an endpoint and model accept it, after what they refused so far (a batch
    file's lines: what no endpoint has refused yet)."""
    if request.api == RESPONSES_API:
        return responses_body(request, quirks)
    body: dict[str, Any] = {"model": request.model, "messages": request.messages}
    if request.temperature is not None and "temperature" not in quirks.dropped:
        body["temperature"] = request.temperature
    if request.max_tokens is not None and quirks.max_tokens_key not in quirks.dropped:
        body[quirks.max_tokens_key] = request.max_tokens
    if request.reasoning_effort and "reasoning_effort" not in quirks.dropped:
        body["reasoning_effort"] = request.reasoning_effort
    if request.response_format is not None and quirks.json_schema:
        body["response_format"] = request.response_format
    if request.slot is not None and "id_slot" not in quirks.dropped:
        body["id_slot"] = request.slot
    return body


def responses_body(request: ChatRequest, quirks: ModelQuirks) -> dict[str, Any]:
    """POST /responses: the messages as ``input`` (a system message of ours as the
    ``developer`` role, as the reference's ResponsesSampler sends it), and each parameter
    only when set and not refused: ``reasoning``, ``temperature``, ``max_output_tokens``, and
    the verdict's schema as ``text.format``. Nothing else (no llama.cpp slot)."""
    body: dict[str, Any] = {
        "model": request.model,
        "input": [
            {**message, "role": "developer"} if message.get("role") == "system" else message
            for message in request.messages
        ],
    }
    if request.reasoning_effort and "reasoning" not in quirks.dropped:
        body["reasoning"] = {"effort": request.reasoning_effort}
    if request.temperature is not None and "temperature" not in quirks.dropped:
        body["temperature"] = request.temperature
    if request.max_tokens is not None and "max_output_tokens" not in quirks.dropped:
        body["max_output_tokens"] = request.max_tokens
    if request.response_format is not None and quirks.json_schema:
        schema = request.response_format.get("json_schema", {})
        body["text"] = {"format": {"type": "json_schema", **schema}}
    return body


def answer_result(
    response: HttpAnswer,
    latency_ms: float,
    attempts: int,
    json_schema: bool,
    api: str = CHAT_API,
    secrets: tuple[str | None, ...] = (),
) -> ChatResult:
    """A 200 that is not a chat completion is a bad response (retried), never a crash."""
    if api == RESPONSES_API:
        return responses_result(response, latency_ms, attempts, json_schema, secrets)

    def bad() -> ChatError:
        text = provider_text(response.text, secrets, 200)
        return ChatError(BAD_RESPONSE, f"not a chat completion: {text!r}", 200, attempts)

    try:
        body = response.json()
        choice = body["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        # RecursionError: JSON nested past Python's stack (10,000 arrays): a bad answer of
        # this call, retried, never the run's end.
        raise bad() from None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        raise bad()
    finish_reason = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
    if finish_reason == "content_filter":
        # The provider's filter stopped the reply: a refusal, as a 4xx content_filter is.
        raise ChatError(CONTENT_FILTER, "the reply was stopped by the provider's content filter", 200, attempts)
    if message.get("content") is None and finish_reason != "length":
        # No reply at all (the reference asks again): never graded as an empty one. A null
        # cut off by its token limit (reasoning used the whole budget) is a cut-off reply.
        raise ChatError(
            BAD_RESPONSE, f"the answer holds no reply (content null, finish_reason {finish_reason})", 200, attempts
        )
    usage = _usage(body)
    return _chat_result(
        message,
        finish_reason,
        (usage.get("prompt_tokens"), usage.get("completion_tokens")),
        latency_ms,
        attempts,
        json_schema,
    )


def responses_result(
    response: HttpAnswer, latency_ms: float, attempts: int, json_schema: bool, secrets: tuple[str | None, ...] = ()
) -> ChatResult:
    """A Responses-API answer: its text is what the reference reads as ``output_text`` (the
    output messages' ``output_text`` parts, joined); reasoning items are kept apart; status
    incomplete for ``max_output_tokens`` is a reply cut off by its limit, as a chat
    answer's finish_reason length is."""

    def bad(why: str = "") -> ChatError:
        text = provider_text(response.text, secrets, 200)
        return ChatError(BAD_RESPONSE, f"not a Responses-API answer{why}: {text!r}", 200, attempts)

    try:
        body = response.json()
        output = body["output"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise bad() from None
    if not isinstance(body, dict) or not isinstance(output, list):
        raise bad()
    status = body.get("status")
    details = body.get("incomplete_details") if isinstance(body.get("incomplete_details"), dict) else {}
    reason = details.get("reason") if isinstance(details, dict) else None
    if reason == "content_filter":
        raise ChatError(CONTENT_FILTER, "the reply was stopped by the provider's content filter", 200, attempts)
    texts: list[str] = []
    thoughts: list[str] = []
    answered = False
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and isinstance(item.get("content"), list):
            answered = True
            texts += [
                part["text"]
                for part in item["content"]
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str)
            ]
        elif item.get("type") == "reasoning":
            for part in (item.get("summary") or []) + (item.get("content") or []):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    thoughts.append(part["text"])
    finish_reason = "length" if status == "incomplete" and reason == "max_output_tokens" else "stop"
    if status not in ("completed", "incomplete") or (not answered and finish_reason != "length"):
        raise ChatError(
            BAD_RESPONSE,
            f"the answer holds no reply (status {status}, {reason or 'no reason given'})",
            200,
            attempts,
        )
    message = {"content": "".join(texts), "reasoning": "\n".join(thoughts) or None}
    usage = _usage(body)
    return _chat_result(
        message,
        finish_reason,
        (usage.get("input_tokens"), usage.get("output_tokens")),
        latency_ms,
        attempts,
        json_schema,
    )


def _chat_result(
    message: dict, finish_reason: str | None, tokens: tuple, latency_ms: float, attempts: int, json_schema: bool
) -> ChatResult:
    """The reply of a chat message (or of a Responses answer put in one's shape): its text and
    reasoning apart, lone surrogates replaced here, before the reply is graded (what was graded
    is what is stored and read); ``tokens``: (prompt, completion) as the answer counted them."""
    content, reasoning = split_reasoning(message)
    content, invalid_content = replace_lone_surrogates(content)
    reasoning, invalid_reasoning = replace_lone_surrogates(reasoning) if reasoning else (reasoning, False)
    raw = message.get("content")
    return ChatResult(
        content=content,
        reasoning=reasoning,
        finish_reason=finish_reason,
        prompt_tokens=token_count(tokens[0]),
        completion_tokens=token_count(tokens[1]),
        latency_ms=latency_ms,
        attempts=attempts,
        json_schema_used=json_schema,
        invalid_text=invalid_content or invalid_reasoning,
        think_stripped=isinstance(raw, str) and raw.lstrip().startswith("<think>"),
    )


def _usage(body: dict) -> dict:
    found = body.get("usage")
    return found if isinstance(found, dict) else {}


def _learned_as(model: str, api: str) -> str:
    return model if api == CHAT_API else f"{model} ({api})"


def _prompt_chars(messages: list[dict]) -> int:
    """The characters of a request's messages, for its token estimate."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(part.get("text") or "") for part in content if isinstance(part, dict))
    return total


def batch_line_result(status: int, body: bytes, *, api: str, json_schema: bool, attempts: int) -> ChatResult:
    """The answer of one line of a batch output file (OpenAI's format, vLLM's run-batch's): a 200
    read as a call's answer is read, anything else the error the same answer would end a call in
    (raised as ChatError). No pace, retry or quirk applies: the batch holds one answer a line."""
    response = HttpAnswer(status, "", {}, body)
    if status == 200:
        return answer_result(response, 0.0, attempts, json_schema, api)
    message, _param, code = error_message(response, ())
    if status == 402 or code == "insufficient_quota" or error_type(response) == "insufficient_quota":
        raise ChatError(QUOTA, message, status, attempts)
    if status == 429:
        raise ChatError(RATE_LIMITED, message, status, attempts)
    if status >= 500:
        raise ChatError(SERVER_ERROR, message, status, attempts)
    if status == 408:
        raise ChatError(TIMEOUT, message, status, attempts)
    if status in (401, 403):
        raise ChatError(AUTH, message, status, attempts)
    if status == 404:
        raise ChatError(NOT_FOUND, message, status, attempts)
    if status in (400, 413, 422) and (code == "context_length_exceeded" or CONTEXT_PATTERNS.search(message)):
        raise ChatError(CONTEXT_LENGTH, message, status, attempts)
    if 400 <= status < 500 and (code in CONTENT_FILTER_CODES or error_type(response) in CONTENT_FILTER_CODES):
        raise ChatError(CONTENT_FILTER, message, status, attempts)
    raise ChatError(CLIENT_ERROR, message, status, attempts)
