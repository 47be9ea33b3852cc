"""The connection check behind the configuration screen's "check connection": before a run
spends an hour, ask each endpoint the few questions that would otherwise fail it.

For each endpoint (the model under test's, and the grader's when it is elsewhere): is it
reachable, does it take the key, does it serve the model; then one tiny completion per model, and
one grader call with ``response_format`` json_schema to learn whether verdicts will come as a
schema or have to be parsed from text. Messages are one plain line each and never hold a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hbtui.client.chat import AUTH, NOT_FOUND, ChatClient
from hbtui.client.http1 import AnswerTooLarge, AnswerUnreadable, TransportError, UnsendableRequest
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import (
    ChatError,
    Endpoint,
    endpoints_of,
    list_models,
    unreachable_reason,
)
from hbtui.core.calls import CHAT_API
from hbtui.core.errors import HbtuiError
from hbtui.core.grading import VERDICT_FORMAT
from hbtui.core.redact import redact
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.core.text import one_line

PING = [{"role": "user", "content": "Reply with the single word OK."}]
GRADER_PING = [
    {
        "role": "user",
        "content": 'Answer with this JSON object only: {"explanation": "connection check", "criteria_met": true}',
    }
]


class ModelNotServed(HbtuiError):
    """A model of the run that its endpoint lists its models without, and refuses by name."""


@dataclass(frozen=True)
class CheckResult:
    name: str  # what was checked, e.g. "test endpoint", "grader model grader-x"
    ok: bool
    message: str


def _scrub(message: str, *secrets: str | None) -> str:
    """A provider may echo the key back in its error, whole or masked: neither is shown."""
    return one_line(redact(message, secrets), 200)


def _reach_error(exc: BaseException, url: str) -> str:
    reason = unreachable_reason(exc)
    return f"unreachable: {reason if reason != 'cannot connect' else f'{type(exc).__name__}: {exc}'} at {url}"


def _chat_error(exc: ChatError, model: str) -> str:
    if exc.kind == AUTH:
        return f"{exc.status or 401}: key rejected"
    if exc.kind == NOT_FOUND:
        return f"model {model} not found at this endpoint ({exc.message})"
    return str(exc)


async def _check_endpoint(
    role: str,
    endpoint: Endpoint,
    models: list[tuple[str, str]],
    timeout: float,
    named: bool = False,
    rate_limit_patience: float = 600.0,
    limit: int = 8 * 1024 * 1024,
    apis: dict[str, str] | None = None,
) -> list[CheckResult]:
    """``models``: (purpose, model) pairs served by this endpoint; purpose is "test" or "grader".
    ``named``: one of several endpoints, so each line says which (its URL, never its key).
    ``apis``: the API each purpose is asked through (API_TEST, API_GRADER; chat by default)."""
    apis = apis or {}
    url, key = endpoint.base_url, endpoint.api_key
    where = f" at {endpoint.label}" if named else ""
    results: list[CheckResult] = []
    name = f"{role} endpoint{where}"
    served: list[str] | None = None
    try:
        served = await list_models(endpoint, timeout, limit)
    except ChatError as exc:
        if exc.kind == AUTH:
            return [CheckResult(name, False, f"{exc.status}: key rejected")]
        # Some servers have no /models (404): the completions below still tell.
        results.append(CheckResult(name, True, f"reachable; no model list ({_scrub(str(exc), key)})"))
    except (TransportError, OSError) as exc:  # TimeoutError is an OSError
        return [CheckResult(name, False, _scrub(_reach_error(exc, url), key))]
    except UnsendableRequest as exc:
        return [CheckResult(name, False, _scrub(f"cannot be asked: {exc}", key))]
    except AnswerTooLarge:
        results.append(CheckResult(name, True, "reachable; the model list is larger than MAX_ANSWER_MIB"))
    except AnswerUnreadable as exc:
        results.append(CheckResult(name, True, f"reachable; the model list cannot be read ({exc})"))
    except ValueError:
        results.append(CheckResult(name, True, "reachable; the model list is not JSON"))
    if served is not None:
        results.append(CheckResult(name, True, f"reachable, key accepted, {len(served)} models served"))

    # A short patience: a check that meets nothing but 429s says so within seconds, not minutes.
    client = ChatClient(
        endpoint,
        limiter=AdaptiveLimiter(1),
        timeout=timeout,
        max_attempts=2,
        backoff_base=0.2,
        rate_limit_patience=rate_limit_patience,
        refusals_for=min(timeout, 20.0),
        key_name="GRADER_API_KEY" if role == "grader" else "API_KEY",
    )
    try:
        for purpose, model in models:
            label = f"{purpose} model {model}{where}"
            if served is not None and served and model not in served:
                shown = ", ".join(served[:8]) + (", …" if len(served) > 8 else "")
                results.append(CheckResult(label, False, f"model {model} not served (served: {shown})"))
                continue
            try:
                api = apis.get(purpose, CHAT_API)
                if purpose == "grader":
                    result = await client.complete(
                        model, GRADER_PING, max_tokens=64, response_format=VERDICT_FORMAT, api=api
                    )
                else:
                    result = await client.complete(model, PING, max_tokens=8, api=api)
            except ChatError as exc:
                results.append(CheckResult(label, False, _scrub(_chat_error(exc, model), key)))
                continue
            results.append(CheckResult(label, True, f"answered in {result.latency_ms:.0f} ms"))
            pacer = client.pacers.get(model)
            pace = pacer.describe() if pacer is not None else None
            if pace:
                results.append(CheckResult(f"{label} limits", True, pace))
            if purpose == "grader":
                quirks = client.learned(model, apis.get(purpose, CHAT_API))
                if quirks is not None and not quirks.json_schema:
                    # Handled: verdicts are then parsed from the text (schema first, then fallback).
                    results.append(
                        CheckResult(
                            f"{label} json_schema", True, "json_schema not supported: verdicts will be parsed from text"
                        )
                    )
                else:
                    results.append(CheckResult(f"{label} json_schema", True, "json_schema supported"))
    finally:
        await client.aclose()
    return results


def _roles(test, grader, test_models, grader_models):
    """(role, endpoints, models) to check: one role when the grader shares the test's endpoints."""
    if test == grader:
        return [("test", test, test_models + grader_models)]
    return [("test", test, test_models), ("grader", grader, grader_models)]


async def check_connection(settings: Settings) -> list[CheckResult]:
    """Every check, in order; never raises for a network or provider problem."""
    if not settings.base_url:
        return [CheckResult("test endpoint", False, "BASE_URL is not set")]
    timeout = min(settings.timeout, 20.0)
    test_models = [("test", settings.model_test)] if settings.model_test else []
    grader_models = [("grader", settings.model_grader)] if settings.model_grader else []
    try:
        test_endpoints, grader_endpoints = settings.test_endpoints, settings.grader_endpoints
    except SettingsError as exc:
        return [CheckResult("endpoints", False, str(exc))]
    results: list[CheckResult] = []
    # Each endpoint is asked on its own: one replica down or with a wrong key is named.
    for role, endpoints, models in _roles(test_endpoints, grader_endpoints, test_models, grader_models):
        for endpoint in endpoints_of(endpoints):
            results += await _check_endpoint(
                role,
                endpoint,
                models,
                timeout,
                named=len(endpoints) > 1,
                rate_limit_patience=settings.rate_limit_patience,
                limit=settings.max_answer_bytes,
                apis={"test": settings.api_test, "grader": settings.api_grader},
            )
    if settings.batch:  # the run goes through the batch API: asked whether there is one
        urls = dict.fromkeys(url for url, _ in (test_endpoints[:1] + grader_endpoints[:1]))
        keys = dict(test_endpoints + grader_endpoints)
        for url in urls:
            results.append(await _check_batch_api(Endpoint(url, keys.get(url)), timeout))
    if not settings.model_test:
        results.append(CheckResult("test model", False, "MODEL_TEST is not set"))
    if not settings.model_grader:
        results.append(CheckResult("grader model", False, "MODEL_GRADER is not set"))
    return results


async def _check_batch_api(endpoint: Endpoint, timeout: float) -> CheckResult:
    """BATCH: whether the endpoint lists its batches, as a batch run needs (its files and batches)."""
    from hbtui.client.batches import BatchClient

    name = f"batch API at {endpoint.label}"
    async with BatchClient(endpoint, timeout=timeout) as client:
        try:
            await client.list_batches(limit=1)
        except ChatError as exc:
            if exc.status == 404:
                return CheckResult(name, False, "none here (404): run without BATCH, or with --batch-files")
            return CheckResult(name, False, exc.message)
    return CheckResult(name, True, "answers (/batches)")


# A 4xx that names the model as unknown (OpenAI and vLLM say 404; some proxies say 400).
UNKNOWN_MODEL = re.compile(
    r"model.{0,80}(not found|does not exist|not exist|unknown|not supported)|no such model", re.I
)


async def served_models(endpoint: Endpoint, timeout: float, limit: int) -> list[str] | None:
    """The model ids an endpoint lists, or None where it lists none that can be read (no
    /models, a refusal, too large, not a list, unreachable): then the run's own calls tell."""
    try:
        return await list_models(endpoint, timeout, limit) or None
    except (ChatError, AnswerTooLarge, ValueError, TransportError, OSError):
        return None


async def _refuses_the_name(endpoint: Endpoint, model: str, timeout: float, role: str) -> bool:
    """One call of one token: does the endpoint refuse ``model`` as unknown? llama.cpp's server
    lists one alias and answers any name, so a model missing from the list is asked once."""
    client = ChatClient(
        endpoint,
        limiter=AdaptiveLimiter(1),
        timeout=timeout,
        max_attempts=1,
        key_name="GRADER_API_KEY" if role == "grader" else "API_KEY",
    )
    try:
        await client.complete(model, PING, max_tokens=1)
    except ChatError as exc:
        return exc.kind == NOT_FOUND or (exc.status in (400, 422) and bool(UNKNOWN_MODEL.search(exc.message)))
    finally:
        await client.aclose()
    return False


async def models_not_served(settings: Settings) -> list[str]:
    """Before a run's first call: each model of the run that an endpoint lists its models
    without and then refuses by name, as one line of the connection check's with how to fix it.
    Empty when every model is served, and where an endpoint lists none (it cannot be told)."""
    timeout = min(settings.timeout, 20.0)
    test_models = [] if settings.completions else [("test", settings.model_test)]
    grader_models = [("grader", settings.model_grader)]
    problems: list[str] = []
    roles = _roles(settings.test_endpoints, settings.grader_endpoints, test_models, grader_models)
    for role, endpoints, models in roles:
        for endpoint in endpoints_of(endpoints):
            served = await served_models(endpoint, timeout, settings.max_answer_bytes)
            if served is None:
                continue
            for purpose, model in models:
                if model in served or not await _refuses_the_name(endpoint, model, timeout, role):
                    continue
                shown = ", ".join(served[:8]) + (", …" if len(served) > 8 else "")
                key = "MODEL_GRADER" if purpose == "grader" else "MODEL_TEST"
                problems.append(
                    f"{purpose} model {model} not served at {endpoint.label} (served: {shown});"
                    f" set {key} to one of them"
                )
    return problems
