"""A small, fast, OpenAI-compatible chat-completions server for hbtui's tests.

It runs as a separate process (see ``server_process.FakeServer``) so integration
tests talk over a real socket and throughput benchmarks do not share a CPU with
the code they measure.  Run it directly with::

    python tests/support/fake_server.py --port 0 [--api-key KEY] [--models a,b]
                                        [--config '{"latency_ms": 200}']

On startup it prints exactly one line, ``LISTENING http://127.0.0.1:PORT``, and
nothing else to stdout.

Every reply is deterministic so tests can predict scores:

* A request is a GRADER call when the text of its last message contains
  ``criteria_met``; otherwise it is a GENERATION call.
* Generation replies are ``expected_generation_reply(last user message)``.
* Grader verdicts are ``expected_verdict(last message text)``.

Behaviour switches (latency, faults, error modes, verdict formatting) live in a
JSON config that can be given at startup (``--config``) and changed at run time
with ``POST /__control``; ``GET /__stats`` reports what the server saw.  See
``DEFAULT_CONFIG`` for every key.

This file deliberately imports only the standard library and aiohttp so that it
runs as a plain script path, without the ``tests`` package on ``sys.path``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import json
import os
import random
import sys
import time
from collections import Counter, deque
from typing import Any

from aiohttp import web

try:
    from tests.support.fake_batches import MAX_BYTES as MAX_BATCH_BYTES
    from tests.support.fake_batches import add_batch_routes, validate_batch_config
except ImportError:  # run as a script (server_process.py does): its own folder is on the path
    from fake_batches import MAX_BYTES as MAX_BATCH_BYTES  # type: ignore[no-redef]
    from fake_batches import add_batch_routes, validate_batch_config  # type: ignore[no-redef]

# --------------------------------------------------------------------------
# Deterministic content (pure functions, importable by tests)
# --------------------------------------------------------------------------

GRADER_MARKER = "criteria_met"
FORCE_MET_MARKER = "[[MET]]"
FORCE_NOT_MET_MARKER = "[[NOT_MET]]"
GENERATION_SENTENCE = "This is a deterministic test reply from the hbtui fake server."
DEFAULT_MODELS: list[str] = ["test-model", "grader-model"]

FAULT_NAMES: tuple[str, ...] = ("rate_limit", "server_error", "drop", "hang", "bad_json")
# "ok" is only meaningful in a script: it consumes one entry and injects nothing.
SCRIPT_ENTRIES: tuple[str, ...] = (*FAULT_NAMES, "ok")
GRADER_FORMATS: tuple[str, ...] = ("json", "fenced", "prose_then_json", "think", "broken")


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def message_text(content: Any) -> str:
    """Text of an OpenAI message ``content``: a string, a list of parts, or null."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Multi-part content: [{"type": "text", "text": "..."}, ...]
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """Content of the last ``user`` message ("" if there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def last_message_text(messages: list[dict[str, Any]]) -> str:
    return message_text(messages[-1].get("content")) if messages else ""


def is_grader_call(messages: list[dict[str, Any]]) -> bool:
    return GRADER_MARKER in last_message_text(messages)


def total_message_chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(message_text(m.get("content"))) for m in messages)


def prompt_token_count(messages: list[dict[str, Any]]) -> int:
    """Fake tokenizer: ~4 characters per token, never zero."""
    return total_message_chars(messages) // 4 + 1


def completion_token_count(content: str) -> int:
    return len(content) // 4 + 1


def expected_generation_reply(user_text: str) -> str:
    """The reply a generation call gets, given its last user message's text."""
    return f"Reply {_sha256_hex(user_text)[:12]}. {GENERATION_SENTENCE}"


def expected_verdict(grader_prompt_text: str) -> bool:
    """The verdict the server gives for a grader prompt (its last message's full text).

    ``[[NOT_MET]]`` forces False and wins over ``[[MET]]``, which forces True.
    Otherwise about two thirds of prompts are met, decided by a hash, so the
    outcome is independent of the prompt's layout but stable across runs.
    """
    if FORCE_NOT_MET_MARKER in grader_prompt_text:
        return False
    if FORCE_MET_MARKER in grader_prompt_text:
        return True
    return int(_sha256_hex(grader_prompt_text), 16) % 3 != 0


def grader_reply_parts(grader_prompt_text: str, grader_format: str) -> tuple[str, str, str]:
    """Build a grader reply as ``(prefix, json_object_text, suffix)``.

    Kept in three parts so truncation can cut in the middle of the JSON object
    whatever prose surrounds it.  For "broken" the JSON part is empty.
    """
    verdict = expected_verdict(grader_prompt_text)
    short_hash = _sha256_hex(grader_prompt_text)[:8]
    met_word = "met" if verdict else "not met"
    if grader_format == "broken":
        return "I think yes", "", ""
    if grader_format == "prose_then_json":
        # Braces inside the JSON string value trip naive "first { to first }" parsers.
        explanation = f"Check {short_hash}: the response handles case }} and {{ fully; criterion {met_word}."
    else:
        explanation = f"Check {short_hash}: the criterion is {met_word}."
    json_text = json.dumps({"explanation": explanation, "criteria_met": verdict})
    if grader_format == "json":
        return "", json_text, ""
    if grader_format == "fenced":
        return (
            "Here is my assessment of the response.\n```json\n",
            json_text,
            "\n```\nLet me know if you need more detail.",
        )
    if grader_format == "prose_then_json":
        return "Considering the set {a} of claims and the map {b: c} of sources, my verdict is:\n", json_text, ""
    if grader_format == "think":
        # The fake object inside <think> carries the OPPOSITE verdict, so a parser
        # that picks it up instead of the real answer gets the score wrong.
        fake = json.dumps({"criteria_met": not verdict})
        return f"<think>reasoning with {fake} fake json</think>\n", json_text, ""
    raise ValueError(f"unknown grader_format {grader_format!r}")


def grader_reply(grader_prompt_text: str, grader_format: str = "json") -> str:
    """Complete (untruncated) grader reply content for the given format."""
    return "".join(grader_reply_parts(grader_prompt_text, grader_format))


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------

DEFAULT_CONFIG: dict[str, Any] = {
    # GET /models answers 404, as a server or proxy without the route does.
    "no_model_list": False,
    # Delay applied to every call that passes the auth and model checks.
    "latency_ms": 0.0,
    # Extra uniform random delay in [0, latency_jitter_ms].
    "latency_jitter_ms": 0.0,
    # Seeds the fault RNG; setting it (even to the same value) restarts the fault
    # sequence and the 500/503 alternation.
    "seed": 0,
    # Per-request fault probabilities, e.g. {"rate_limit": 0.1, "drop": 0.01}.
    "faults": {},
    # Retry-After header value (seconds) on 429 responses.
    "retry_after": 0.05,
    # How long a "hang" fault stalls before answering normally.
    "hang_seconds": 30.0,
    # Fault names consumed one per request, in arrival order, before random faults.
    "script": [],
    # The first N requests (counted from when this is set) all get 429.
    "persistent_429_until": 0,
    # How grader verdicts are formatted; see GRADER_FORMATS.
    "grader_format": "json",
    # Add "reasoning_content" to the reply message, like reasoning-model servers do.
    "reasoning_field": False,
    # 400 for response_format of type json_schema.
    "reject_json_schema": False,
    # Top-level request keys that get a 400 "Unsupported parameter".
    "reject_params": [],
    # 400 context_length_exceeded when total message chars exceed this (None: no limit).
    "context_chars": None,
    # Generation calls come back cut short with finish_reason "length".
    "truncate_generation": False,
    # Grader calls whose max_tokens/max_completion_tokens is below this come back cut.
    "truncate_grader_below": None,
    # Grader calls sent with no token limit come back cut, as at a server's own limit.
    "truncate_grader_unbounded": False,
    # POST /responses answers 404, as a server without the Responses API does.
    "no_responses_api": False,
    # Answer with an error that echoes the key sent, as providers and proxies do: "full" (the
    # key and the Authorization header in an OpenAI-style message), "masked" (OpenAI's 401:
    # sk-proj-****abcd), "headers" (a plain-text page listing the request's headers), or None.
    "echo_auth": None,
    # The status of those errors (401, 400, 500...).
    "echo_auth_status": 401,
    # Which calls get them: "all" (the model list too), "generation" or "grader".
    "echo_auth_calls": "all",
    # A lone surrogate (the JSON escape \ud800, valid JSON) in every reply and its reasoning,
    # in every grader explanation (escaped inside the verdict's JSON text) and in the
    # context-length error's message.
    "lone_surrogate": False,
    # Keep the body of every chat request as received (GET /__requests), to compare requests
    # byte for byte with what the reference sends. Cleared by /__reset_stats.
    "capture_requests": False,
    # A file to which every chat request answered 200 adds one line, {"kind", "sha256"} of its
    # body, flushed at once: what was paid for, still readable after the server is gone.
    "answers_log": None,
    # A file to which every chat answer adds one line once its last byte is written to the
    # socket, {"kind", "sha256", "status", "written_at"} (time.time()), flushed at once: which
    # answers a client killed at a given moment had been sent whole (read, or still in its
    # socket buffer), and which were still in flight.
    "written_log": None,
    # After this many chat requests answered 200, the server drops every request and its process
    # exits a moment later (a replica that dies mid-run: refused connections from then on).
    "die_after_answers": None,
    # Each generation reply ends with the number of its call and a padding that varies with it,
    # so the repeats of one prompt get replies of different text and length (and so different
    # verdicts on criteria without a marker): what repeats measure.
    "numbered_replies": False,
    # Limits as hosted providers enforce them, or None: {"rpm": N, "tpm": N, "headers": true,
    # "scope": "model"}. Each is a token bucket refilled at rpm/60 (tpm/60) a second holding one
    # second of it; a request costs one request and its prompt tokens plus the max tokens it asks
    # for. "headers": the x-ratelimit-* headers on every answer (limit per minute, remaining,
    # reset), as OpenAI sends them; false: a 429 and its Retry-After only. "scope": "model" (one
    # bucket per model, as OpenAI's limits are) or "key" (one for every model).
    "rate_limit": None,
    # Every chat call answers as an account out of credit: 429 insufficient_quota (OpenAI's), or
    # with quota_status 402, OpenRouter's "insufficient credits".
    "quota_exhausted": False,
    "quota_status": 429,
    # Every chat call answers 429 with this Retry-After and Groq's per-day text (None: off).
    "daily_limit_retry_after": None,
    # Hostile answers: "content": null with this finish_reason ("stop", or "length" as a reasoning
    # model out of budget gives it) for "generation", "grader" or "all" calls; and JSON nested
    # 10,000 deep, as an extra field of the body ("body") or 100,000 deep inside a grader's text
    # ("grader_content").
    "null_content": None,
    "null_content_finish": "stop",
    "deep_json": None,
    # The usage object every answer carries instead of the true one (negative, infinite counts).
    "usage": None,
    # What a provider may put into its answers (a key it was sent): every generation reply is this
    # text instead of the deterministic one, and every grader explanation starts with this one.
    "reply_text": None,
    "explanation_text": None,
    # The batch API's pace and refusals (tests/support/fake_batches.py, BATCH_DEFAULTS), or None
    # for its defaults: {"validating_s", "finalizing_s", "concurrency", "shuffle",
    # "expire_after_s", "fail_validation", "max_enqueued"}.
    "batch": None,
}
LONE_SURROGATE = "\ud800"  # json.dumps sends it as the escape \ud800


_NUMBER_KEYS = frozenset(
    {
        "latency_ms",
        "latency_jitter_ms",
        "seed",
        "retry_after",
        "hang_seconds",
        "persistent_429_until",
        "context_chars",
        "truncate_grader_below",
        "daily_limit_retry_after",
    }
)
_NULLABLE_KEYS = frozenset({"context_chars", "truncate_grader_below", "daily_limit_retry_after"})
RATE_LIMIT_KEYS = frozenset({"rpm", "tpm", "headers", "scope"})
ECHO_FORMS: tuple[str, ...] = ("full", "masked", "headers")
ECHO_CALLS: tuple[str, ...] = ("all", "generation", "grader")


def validate_config_update(update: Any) -> dict[str, Any]:
    """Check a config update; raise ValueError with a readable message if it is wrong.

    Strict on purpose: a typo in a test's control call should fail loudly, not
    silently leave the server in its default mode.
    """
    if not isinstance(update, dict):
        raise ValueError("config must be a JSON object")
    unknown = sorted(set(update) - set(DEFAULT_CONFIG))
    if unknown:
        raise ValueError(f"unknown config keys: {unknown}; known: {sorted(DEFAULT_CONFIG)}")
    if "faults" in update:
        faults = update["faults"]
        if not isinstance(faults, dict) or any(name not in FAULT_NAMES for name in faults):
            raise ValueError(f"faults must map names from {list(FAULT_NAMES)} to probabilities")
        if any(not isinstance(p, (int, float)) or p < 0 for p in faults.values()):
            raise ValueError("fault probabilities must be non-negative numbers")
    if "script" in update:
        script = update["script"]
        if not isinstance(script, list) or any(entry not in SCRIPT_ENTRIES for entry in script):
            raise ValueError(f"script must be a list of names from {list(SCRIPT_ENTRIES)}")
    for key in _NUMBER_KEYS & set(update):
        value = update[key]
        if value is None and key in _NULLABLE_KEYS:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{key} must be a non-negative number" + (" or null" if key in _NULLABLE_KEYS else ""))
    if "grader_format" in update and update["grader_format"] not in GRADER_FORMATS:
        raise ValueError(f"grader_format must be one of {list(GRADER_FORMATS)}")
    if update.get("echo_auth") not in (None, *ECHO_FORMS):
        raise ValueError(f"echo_auth must be null or one of {list(ECHO_FORMS)}")
    if "echo_auth_status" in update and update["echo_auth_status"] not in range(400, 600):
        raise ValueError("echo_auth_status must be an HTTP error status (400-599)")
    if "echo_auth_calls" in update and update["echo_auth_calls"] not in ECHO_CALLS:
        raise ValueError(f"echo_auth_calls must be one of {list(ECHO_CALLS)}")
    limits = update.get("rate_limit")
    if limits is not None:
        if not isinstance(limits, dict) or set(limits) - RATE_LIMIT_KEYS:
            raise ValueError(f"rate_limit must be null or an object of {sorted(RATE_LIMIT_KEYS)}")
        for key in ("rpm", "tpm"):
            if limits.get(key) is not None and (not isinstance(limits[key], (int, float)) or limits[key] <= 0):
                raise ValueError(f"rate_limit.{key} must be a positive number or null")
        if limits.get("scope", "model") not in ("model", "key"):
            raise ValueError("rate_limit.scope must be model or key")
    if update.get("null_content") not in (None, "generation", "grader", "all"):
        raise ValueError("null_content must be null, generation, grader or all")
    if update.get("null_content_finish", "stop") not in ("stop", "length"):
        raise ValueError("null_content_finish must be stop or length")
    if update.get("deep_json") not in (None, "body", "grader_content"):
        raise ValueError("deep_json must be null, body or grader_content")
    if "quota_status" in update and update["quota_status"] not in (402, 429):
        raise ValueError("quota_status must be 402 or 429")
    for key in ("reply_text", "explanation_text"):
        if not isinstance(update.get(key), (str, type(None))):
            raise ValueError(f"{key} must be a string or null")
    if update.get("batch") is not None:
        validate_batch_config(update["batch"])
    if "reject_params" in update and not isinstance(update["reject_params"], list):
        raise ValueError("reject_params must be a list of parameter names")
    return update


# --------------------------------------------------------------------------
# Server state
# --------------------------------------------------------------------------


class Stats:
    """Counters reported by GET /__stats."""

    def __init__(self) -> None:
        self.requests = 0
        self.generation = 0
        self.grader = 0
        self.by_status: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.dropped = 0  # connections closed on purpose, no status sent
        self.cancelled = 0  # client went away before we answered
        self.in_flight = 0
        self.max_in_flight = 0
        self.by_model: Counter[str] = Counter()
        self.json_schema_requests = 0
        self.params_seen: Counter[str] = Counter()
        # The rate limits: requests refused for want of their rate, and the wall-clock times of
        # the first request and of the last answer written whole (a rate "first to last").
        self.rate_refused = 0
        self.rate_tokens_taken = 0  # the tokens the requests let through counted (prompt + max tokens)
        self.first_request_at: float | None = None
        self.last_answer_at: float | None = None

    def reset(self) -> None:
        # In-flight requests are still running; keep the gauge truthful.
        in_flight = self.in_flight
        self.__init__()  # type: ignore[misc]
        self.in_flight = in_flight
        self.max_in_flight = in_flight

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "generation": self.generation,
            "grader": self.grader,
            "by_status": dict(self.by_status),
            "faults": dict(self.faults),
            "dropped": self.dropped,
            "cancelled": self.cancelled,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "by_model": dict(self.by_model),
            "json_schema_requests": self.json_schema_requests,
            "params_seen": dict(self.params_seen),
            "rate_refused": self.rate_refused,
            "rate_tokens_taken": self.rate_tokens_taken,
            "first_request_at": self.first_request_at,
            "last_answer_at": self.last_answer_at,
        }


class ServerState:
    def __init__(self, api_key: str | None, models: list[str], config: dict[str, Any]) -> None:
        self.api_key = api_key
        self.expected_auth = f"Bearer {api_key}" if api_key else None
        self.answered_200 = 0
        self.models = models
        self.known_models = frozenset(models)
        self.restrict_models = False  # only when --models was given explicitly
        self.config: dict[str, Any] = copy.deepcopy(DEFAULT_CONFIG)
        self.stats = Stats()
        self.fault_rng = random.Random(0)
        self.jitter_rng = random.Random(1)  # separate so jitter never shifts the fault sequence
        self.script_queue: deque[str] = deque()
        self.persistent_429_served = 0
        self.server_errors_sent = 0
        self.completion_counter = 0
        self.captured: list[str] = []  # raw request bodies, while capture_requests is on
        self.buckets: dict[str, RateBuckets] = {}  # by model, or "" for the key (rate_limit.scope)
        self.apply_config(config)

    def apply_config(self, update: dict[str, Any]) -> None:
        validate_config_update(update)
        self.config.update(copy.deepcopy(update))
        if "seed" in update:
            # A seed restarts the whole fault sequence, 500/503 alternation included.
            self.fault_rng.seed(self.config["seed"])
            self.server_errors_sent = 0
            self.jitter_rng.seed(f"jitter-{self.config['seed']}")
        if "script" in update:
            self.script_queue = deque(self.config["script"])
        if "persistent_429_until" in update:
            self.persistent_429_served = 0
        if "rate_limit" in update:
            self.buckets.clear()  # a limit changed mid-run starts full, as a provider's does

    def choose_fault(self, grader: bool) -> str | None:
        """Pick this request's fault (None for none); called once per request on arrival."""
        if self.persistent_429_served < (self.config["persistent_429_until"] or 0):
            self.persistent_429_served += 1
            return "persistent_429"
        if self.script_queue:
            entry = self.script_queue.popleft()
            if entry == "bad_json" and not grader:
                return None
            return None if entry == "ok" else entry
        faults: dict[str, float] = self.config["faults"]
        if not faults:
            return None
        # One draw per request against stacked probability buckets: rates are
        # exact as long as they sum to <= 1, and the sequence depends only on seed.
        draw = self.fault_rng.random()
        cumulative = 0.0
        for name in FAULT_NAMES:
            cumulative += faults.get(name, 0.0)
            if draw < cumulative:
                if name == "bad_json" and not grader:
                    return None
                return name
        return None

    def latency_seconds(self) -> float:
        delay_ms = float(self.config["latency_ms"] or 0.0)
        jitter_ms = float(self.config["latency_jitter_ms"] or 0.0)
        if jitter_ms > 0:
            delay_ms += self.jitter_rng.uniform(0.0, jitter_ms)
        return delay_ms / 1000.0


class TokenBucket:
    """``per_minute`` refilled continuously at per_minute/60 a second, holding one second of it."""

    def __init__(self, per_minute: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(self.rate, 1.0)
        self.level = self.capacity
        self.at = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` is in the bucket (0: now)."""
        return max(0.0, (min(cost, self.capacity) - self.level) / self.rate)

    def headers(self, name: str) -> dict[str, str]:
        """OpenAI's three headers for this limit: per minute, what is left of the minute's worth
        (the bucket's share of it), and how long until the bucket is full again."""
        remaining = int(self.level / self.capacity * self.per_minute)
        reset = (self.capacity - self.level) / self.rate
        return {
            f"x-ratelimit-limit-{name}": str(int(self.per_minute)),
            f"x-ratelimit-remaining-{name}": str(remaining),
            f"x-ratelimit-reset-{name}": f"{reset * 1000:.0f}ms" if reset < 1 else f"{reset:.3f}s",
        }


class RateBuckets:
    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.requests = TokenBucket(rpm) if rpm else None
        self.tokens = TokenBucket(tpm) if tpm else None

    def take(self, tokens: float) -> tuple[float, str]:
        """Take one request of ``tokens``; (0, "") when it may go, else (seconds to wait, which)."""
        now = time.monotonic()
        waits = []
        for bucket, cost, name in ((self.requests, 1.0, "requests"), (self.tokens, tokens, "tokens")):
            if bucket is not None:
                bucket.refill(now)
                wait = bucket.wait_for(cost)
                if wait > 0:
                    waits.append((wait, name))
        if waits:
            return max(waits)
        if self.requests is not None:
            self.requests.level -= 1.0
        if self.tokens is not None:
            self.tokens.level -= min(tokens, self.tokens.capacity)
        return 0.0, ""

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for bucket, name in ((self.requests, "requests"), (self.tokens, "tokens")):
            if bucket is not None:
                out.update(bucket.headers(name))
        return out


def _rate_limit_answer(state: ServerState, model: str, body: dict[str, Any], prompt_tokens: int) -> web.Response | None:
    """A 429 when the request's rate or tokens are not there yet (taken from the buckets when
    they are); the headers are added to every answer through request["rate_headers"]."""
    limits = state.config["rate_limit"]
    scope = "" if limits.get("scope") == "key" else model
    buckets = state.buckets.get(scope)
    if buckets is None:
        buckets = state.buckets[scope] = RateBuckets(limits.get("rpm"), limits.get("tpm"))
    asked = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    cost = prompt_tokens + (asked if isinstance(asked, (int, float)) else 0)
    wait, which = buckets.take(cost)
    if not wait:
        state.stats.rate_tokens_taken += cost
    headers = buckets.headers() if limits.get("headers", True) else {}
    if not wait:
        return None
    state.stats.rate_refused += 1
    headers["Retry-After"] = f"{wait:.3f}"
    if limits.get("headers", True):
        headers["retry-after-ms"] = f"{wait * 1000:.0f}"
    bucket = buckets.requests if which == "requests" else buckets.tokens
    assert bucket is not None
    unit = "RPM" if which == "requests" else "TPM"
    return openai_error(
        429,
        f"Rate limit reached for {model} in organization org-fake on {which} per min ({unit}):"
        f" Limit {bucket.per_minute:.0f}, Used {bucket.per_minute:.0f}. Please try again in {wait * 1000:.0f}ms."
        " Visit https://platform.openai.com/account/rate-limits to learn more.",
        "requests" if which == "requests" else "tokens",
        "rate_limit_exceeded",
        headers=headers,
    )


def _quota_answer(state: ServerState, model: str) -> web.Response | None:
    config = state.config
    if config["quota_exhausted"]:
        if config["quota_status"] == 402:
            return _json(
                {
                    "error": {
                        "message": "Insufficient credits. Add more using https://openrouter.ai/credits",
                        "code": 402,
                    }
                },
                status=402,
            )
        return openai_error(
            429,
            "You exceeded your current quota, please check your plan and billing details. For more information on"
            " this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
            "insufficient_quota",
            "insufficient_quota",
        )
    daily = config["daily_limit_retry_after"]
    if daily is not None:
        minutes, seconds = divmod(int(daily), 60)
        return openai_error(
            429,
            f"Rate limit reached for model `{model}` in organization `org_fake` service tier `on_demand` on requests"
            f" per day (RPD): Limit 14400, Used 14400, Requested 1. Please try again in {minutes}m{seconds}s.",
            "requests",
            "rate_limit_exceeded",
            headers={"Retry-After": str(int(daily))},
        )
    return None


STATE_KEY = web.AppKey("state", ServerState)

# --------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode("utf-8"), status=status, content_type="application/json", headers=headers
    )


def openai_error(
    status: int,
    message: str,
    error_type: str,
    code: str | None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return _json(body, status=status, headers=headers)


def _unsupported_param_message(param: str) -> str:
    message = f"Unsupported parameter: '{param}' is not supported with this model."
    if param == "max_tokens":
        message += " Use 'max_completion_tokens' instead."
    return message


def echo_auth_error(state: ServerState, request: web.Request, call: str) -> web.Response | None:
    """The error of the echo_auth switch, if it applies to this ``call`` ("generation",
    "grader" or "models")."""
    form, calls = state.config["echo_auth"], state.config["echo_auth_calls"]
    if form is None or calls not in ("all", call):
        return None
    status = state.config["echo_auth_status"]
    header = request.headers.get("Authorization", "")
    key = header.removeprefix("Bearer ")
    if form == "headers":
        lines = "".join(f"{name}: {value}\n" for name, value in request.headers.items())
        return web.Response(
            text=f"{status} Error\nRequest headers as received:\n{lines}", status=status, content_type="text/plain"
        )
    if form == "masked":
        masked = key[:8] + "*" * max(len(key) - 12, 4) + key[-4:]
        message = (
            f"Incorrect API key provided: {masked}. You can find your API key at"
            " https://platform.openai.com/account/api-keys."
        )
    else:
        message = f"Incorrect API key provided: {key}. The request had Authorization: {header}"
    return openai_error(status, message, "invalid_request_error", "invalid_api_key")


def _check_auth(state: ServerState, request: web.Request) -> web.Response | None:
    if state.expected_auth is not None and request.headers.get("Authorization") != state.expected_auth:
        return openai_error(401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key")
    return None


# --------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------


async def handle_chat_completions(request: web.Request, converted: dict | None = None) -> web.StreamResponse:
    """``converted``: a Responses-API request in chat's shape (handle_responses)."""
    state = request.app[STATE_KEY]
    stats = state.stats
    stats.requests += 1
    if stats.first_request_at is None:
        stats.first_request_at = time.time()
    stats.in_flight += 1
    if stats.in_flight > stats.max_in_flight:
        stats.max_in_flight = stats.in_flight
    config = state.config
    if state.answered_200 >= (config.get("die_after_answers") or float("inf")):
        request.transport.close()  # dying: no answer, as from a process killed mid-request
        return web.Response(status=204)
    try:
        response = await _chat_completion(state, request, converted)
    except asyncio.CancelledError:
        # aiohttp cancels the handler when the client disconnects (handler_cancellation).
        stats.cancelled += 1
        raise
    finally:
        stats.in_flight -= 1
    if response is not None:
        stats.by_status[str(response.status)] += 1
        if response.status == 200:
            _answered(state, request, response)
        rate_headers = request.get("rate_headers")
        if rate_headers:
            response.headers.update(rate_headers)
        if response.status == 200:
            # Written whole before the handler returns only once prepared; near enough for a rate.
            stats.last_answer_at = time.time()
        if config.get("written_log") and converted is None:  # (a Responses answer is converted first)
            await _write_and_log(request, response, config["written_log"])
        return response
    # Deliberate drop: the transport is already closed; aiohttp ignores the
    # failed write of this placeholder, so the client sees no response at all.
    return web.Response(status=204)


def _answered(state: ServerState, request: web.Request, response: web.Response) -> None:
    state.answered_200 += 1
    config = state.config
    if config.get("answers_log"):
        body = request.get("raw_body", b"")
        kind = "grader" if GRADER_MARKER in body.decode("utf-8", "replace") else "generation"
        with open(config["answers_log"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"kind": kind, "sha256": hashlib.sha256(body).hexdigest()}) + "\n")
    if state.answered_200 == config.get("die_after_answers"):
        asyncio.get_running_loop().call_later(0.2, os._exit, 0)


async def _write_and_log(request: web.Request, response: web.Response, path: str) -> None:
    """Send the answer whole now (aiohttp leaves a prepared response alone once the handler
    returns it), then log that its last byte was written."""
    await response.prepare(request)
    await response.write_eof()
    body = request.get("raw_body", b"")
    kind = "grader" if GRADER_MARKER in body.decode("utf-8", "replace") else "generation"
    entry = {"kind": kind, "sha256": hashlib.sha256(body).hexdigest(), "status": response.status}
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps({**entry, "written_at": time.time()}) + "\n")


async def _chat_completion(
    state: ServerState, request: web.Request, converted: dict | None = None
) -> web.Response | None:
    """Answer one chat completion; None means the connection was dropped on purpose.
    ``converted``: a Responses-API request already read and put in chat's shape."""
    config = state.config
    stats = state.stats

    auth_error = _check_auth(state, request)
    if auth_error is not None:
        return auth_error

    if converted is not None:
        body = converted
    else:
        read = await _read_body(state, request)
        if isinstance(read, web.Response):
            return read
        body = read
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return openai_error(
            400, "'messages' must be a non-empty array of message objects.", "invalid_request_error", None, "messages"
        )

    model = str(body.get("model", ""))
    grader = is_grader_call(messages)
    if grader:
        stats.grader += 1
    else:
        stats.generation += 1
    stats.by_model[model] += 1
    stats.params_seen.update(body.keys())
    response_format = body.get("response_format")
    wants_json_schema = isinstance(response_format, dict) and response_format.get("type") == "json_schema"
    if wants_json_schema:
        stats.json_schema_requests += 1

    echoed = echo_auth_error(state, request, "grader" if grader else "generation")
    if echoed is not None:
        return echoed

    if state.restrict_models and model not in state.known_models:
        return openai_error(404, f"The model `{model}` does not exist", "invalid_request_error", "model_not_found")

    quota = _quota_answer(state, model)
    if quota is not None:
        return quota
    if config["rate_limit"]:
        refused = _rate_limit_answer(state, model, body, prompt_token_count(messages))
        if refused is not None:
            return refused
        if config["rate_limit"].get("headers", True):
            request["rate_headers"] = state.buckets[
                "" if config["rate_limit"].get("scope") == "key" else model
            ].headers()

    fault = state.choose_fault(grader)
    if fault is not None:
        stats.faults[fault] += 1

    if fault == "hang":
        await asyncio.sleep(float(config["hang_seconds"]))
    else:
        delay = state.latency_seconds()
        if delay > 0:
            await asyncio.sleep(delay)

    if fault in ("rate_limit", "persistent_429"):
        retry_after = config["retry_after"]
        return openai_error(
            429,
            f"Rate limit reached for requests on {model}. Please try again in {retry_after}s.",
            "rate_limit_error",
            "rate_limit_exceeded",
            headers={"Retry-After": str(retry_after)},
        )
    if fault == "server_error":
        # Alternate so clients are exercised on both retryable 5xx codes.
        state.server_errors_sent += 1
        if state.server_errors_sent % 2 == 1:
            return openai_error(
                500, "The server had an error while processing your request. Sorry about that!", "server_error", None
            )
        return openai_error(503, "The engine is currently overloaded, please try again later.", "server_error", None)
    if fault == "drop":
        stats.dropped += 1
        if request.transport is not None:
            request.transport.close()
        return None

    sent_keys = request.get("sent_keys") or body.keys()  # a Responses request's own parameters
    for param in config["reject_params"] or ():
        if param in sent_keys:
            return openai_error(
                400, _unsupported_param_message(param), "invalid_request_error", "unsupported_parameter", param
            )

    if wants_json_schema and config["reject_json_schema"]:
        return openai_error(
            400,
            "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
            "invalid_request_error",
            None,
            "response_format",
        )

    total_chars = total_message_chars(messages)
    prompt_tokens = total_chars // 4 + 1
    context_chars = config["context_chars"]
    if context_chars is not None and total_chars > context_chars:
        return openai_error(
            400,
            f"This model's maximum context length is {context_chars // 4} tokens. "
            f"However, your messages resulted in {prompt_tokens} tokens."
            + (f" {LONE_SURROGATE}" if config["lone_surrogate"] else ""),
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        )

    finish_reason = "stop"
    if grader:
        grader_format = "broken" if fault == "bad_json" else config["grader_format"]
        prefix, json_text, suffix = grader_reply_parts(last_message_text(messages), grader_format)
        content = prefix + json_text + suffix
        limit = body.get("max_completion_tokens")
        if limit is None:
            limit = body.get("max_tokens")
        truncate_below = config["truncate_grader_below"]
        cut_unbounded = limit is None and config["truncate_grader_unbounded"]
        if cut_unbounded or (truncate_below is not None and isinstance(limit, (int, float)) and limit < truncate_below):
            # Cut inside the JSON object, like a real model running out of tokens.
            cut_source = json_text or content
            content = prefix + cut_source[: len(cut_source) // 2]
            finish_reason = "length"
    else:
        content = config["reply_text"] or expected_generation_reply(last_user_text(messages))
        if config["numbered_replies"]:
            content += f" Call {stats.generation}." + " More detail." * (stats.generation % 5)
        if config["truncate_generation"]:
            content = content[: len(content) // 2]
            finish_reason = "length"

    reasoning = f"Thinking it over ({_sha256_hex(content)[:8]})."
    completion_tokens = completion_token_count(content)
    if config["lone_surrogate"]:
        reasoning += f" {LONE_SURROGATE}"
        if grader:  # escaped inside the verdict's JSON text, and raw after it
            content = content.replace('"explanation": "', '"explanation": "\\ud800 ', 1) + f" {LONE_SURROGATE}"
        else:
            content += f" {LONE_SURROGATE}"
    if grader and config["explanation_text"]:
        escaped = json.dumps(config["explanation_text"])[1:-1]
        content = content.replace('"explanation": "', f'"explanation": "{escaped} ', 1)
    if grader and config["deep_json"] == "grader_content":
        content = "[" * 100_000 + "]" * 100_000
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if config["reasoning_field"] or config["lone_surrogate"]:
        message["reasoning_content"] = reasoning
    if config["null_content"] in ("all", "grader" if grader else "generation"):
        message["content"] = None
        finish_reason = config["null_content_finish"]
    state.completion_counter += 1
    if config["deep_json"] == "body":
        deep = "[" * 10_000 + "]" * 10_000
        text = json.dumps(
            {
                "id": f"chatcmpl-fake{state.completion_counter:08d}",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            }
        )
        return web.Response(body=(text[:-1] + ', "extra": ' + deep + "}").encode(), content_type="application/json")
    return _json(
        {
            "id": f"chatcmpl-fake{state.completion_counter:08d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": config["usage"]
            or {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


async def _read_body(state: ServerState, request: web.Request) -> dict | web.Response:
    """The request's JSON object, read and kept (raw_body, the capture), or the 400 it gets."""
    raw = await request.read()
    request["raw_body"] = raw
    if state.config.get("capture_requests"):
        state.captured.append(raw.decode("utf-8", "replace"))
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return openai_error(400, "We could not parse the JSON body of your request.", "invalid_request_error", None)
    if not isinstance(body, dict):
        return openai_error(400, "The request body must be a JSON object.", "invalid_request_error", None)
    return body


async def handle_responses(request: web.Request) -> web.StreamResponse:
    """POST /responses (OpenAI's Responses API): the request put in chat's shape, answered as a
    chat completion is (faults, limits and all), and the answer put in the Responses shape."""
    state = request.app[STATE_KEY]
    config = state.config
    if config["no_responses_api"]:
        return web.Response(status=404, text="404: Not Found")
    body = await _read_body(state, request)
    if isinstance(body, web.Response):
        return body
    if not isinstance(body.get("input"), list):
        return openai_error(400, "'input' must be an array of input items.", "invalid_request_error", None, "input")
    request["sent_keys"] = list(body)
    converted: dict[str, Any] = {
        "model": body.get("model"),
        "messages": [
            {**item, "role": "system" if item.get("role") == "developer" else item.get("role")}
            for item in body["input"]
            if isinstance(item, dict)
        ],
    }
    if "temperature" in body:
        converted["temperature"] = body["temperature"]
    if "max_output_tokens" in body:
        converted["max_tokens"] = body["max_output_tokens"]
    text_format = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(text_format, dict) and text_format.get("type") == "json_schema":
        converted["response_format"] = {
            "type": "json_schema",
            "json_schema": {k: v for k, v in text_format.items() if k != "type"},
        }
    request["responses_api"] = True
    response = await handle_chat_completions(request, converted)
    if response.status != 200 or not isinstance(response, web.Response) or response.body is None:
        return response
    completion = json.loads(response.body)  # type: ignore[arg-type]
    choice = completion["choices"][0]
    message = choice["message"]
    output: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        output.append(
            {
                "type": "reasoning",
                "id": "rs_fake",
                "summary": [{"type": "summary_text", "text": message["reasoning_content"]}],
            }
        )
    if message.get("content") is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_fake{state.completion_counter:08d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": message["content"], "annotations": []}],
            }
        )
    cut = choice["finish_reason"] == "length"
    usage = completion.get("usage") or {}
    answer = _json(
        {
            "id": f"resp_fake{state.completion_counter:08d}",
            "object": "response",
            "created_at": completion.get("created", int(time.time())),
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "model": completion.get("model"),
            "output": output,
            "usage": {
                "input_tokens": usage.get("prompt_tokens", 0),
                "output_tokens": usage.get("completion_tokens", 0),
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.get("total_tokens", 0),
            },
        }
    )
    answer.headers.update({k: v for k, v in response.headers.items() if k.lower().startswith("x-ratelimit")})
    return answer


async def handle_models(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    auth_error = _check_auth(state, request) or echo_auth_error(state, request, "models")
    if auth_error is not None:
        return auth_error
    if state.config.get("no_model_list"):  # a server without the route, as some proxies are
        return openai_error(404, "Not Found", "invalid_request_error", "not_found")
    return _json(
        {
            "object": "list",
            "data": [{"id": name, "object": "model", "created": 0, "owned_by": "hbtui-fake"} for name in state.models],
        }
    )


async def handle_get_control(request: web.Request) -> web.Response:
    return _json(request.app[STATE_KEY].config)


async def handle_post_control(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    try:
        update = json.loads(await request.read() or b"{}")
        state.apply_config(update)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        return _json({"error": str(exc)}, status=400)
    return _json(state.config)


async def handle_stats(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    data = state.stats.as_dict()
    data["script_remaining"] = len(state.script_queue)
    return _json(data)


async def handle_requests(request: web.Request) -> web.Response:
    return _json(request.app[STATE_KEY].captured)


async def handle_reset_stats(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    state.stats.reset()
    state.captured.clear()
    return _json(state.stats.as_dict())


async def handle_health(request: web.Request) -> web.Response:
    return _json({"status": "ok"})


def build_app(
    api_key: str | None = None, models: list[str] | None = None, config: dict[str, Any] | None = None
) -> web.Application:
    # A batch input file may be 200 MB (fake_batches.MAX_BYTES), as at OpenAI; a chat body far less.
    app = web.Application(client_max_size=MAX_BATCH_BYTES + 1024 * 1024)
    state = ServerState(api_key, list(models) if models else list(DEFAULT_MODELS), config or {})
    state.restrict_models = models is not None
    app[STATE_KEY] = state
    app.router.add_post("/v1/chat/completions", handle_chat_completions)
    app.router.add_post("/v1/responses", handle_responses)
    app.router.add_get("/v1/models", handle_models)
    app.router.add_get("/__control", handle_get_control)
    app.router.add_post("/__control", handle_post_control)
    app.router.add_get("/__stats", handle_stats)
    app.router.add_get("/__requests", handle_requests)
    app.router.add_post("/__reset_stats", handle_reset_stats)
    app.router.add_get("/health", handle_health)
    add_batch_routes(app, state, _check_auth)
    return app


# --------------------------------------------------------------------------
# Process entry point
# --------------------------------------------------------------------------


async def _exit_when_orphaned(parent_pid: int) -> None:
    """Exit if the process that started us dies, so killed test runs leak no servers."""
    while True:
        await asyncio.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


async def serve(
    port: int, api_key: str | None, models: list[str] | None, config: dict[str, Any], exit_with_parent: bool
) -> None:
    app = build_app(api_key, models, config)
    # access_log=None: per-request logging would cost more than the handler itself.
    # handler_cancellation: a client that gives up (timeout, kill) frees its handler,
    # so hangs don't pile up and in_flight reflects what clients are really waiting on.
    runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    # backlog: the default 128 would make a 256-connection burst wait on SYN retries.
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=2048)
    await site.start()
    bound_port = runner.addresses[0][1]
    sys.stdout.write(f"LISTENING http://127.0.0.1:{bound_port}\n")
    sys.stdout.flush()
    watchdog = asyncio.create_task(_exit_when_orphaned(os.getppid())) if exit_with_parent else None
    try:
        await asyncio.Event().wait()  # serve until killed
    finally:
        if watchdog is not None:
            watchdog.cancel()
        await runner.cleanup()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="OpenAI-compatible fake server for hbtui tests")
    parser.add_argument("--port", type=int, default=0, help="port to bind on 127.0.0.1 (0: pick a free one)")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    parser.add_argument("--models", default=None, help="comma-separated model ids; others get 404")
    parser.add_argument("--config", default=None, help="JSON object of config keys (see DEFAULT_CONFIG)")
    parser.add_argument("--exit-with-parent", action="store_true", help="exit when the parent process dies")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    models = [name.strip() for name in args.models.split(",") if name.strip()] if args.models else None
    try:
        config = validate_config_update(json.loads(args.config)) if args.config else {}
    except ValueError as exc:
        sys.exit(f"fake_server: bad --config: {exc}")
    try:
        asyncio.run(serve(args.port, args.api_key, models, config, args.exit_with_parent))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
