"""The test server's batch API, as OpenAI's (and the OpenAI-compatible ones of Groq, Together and
others) serve it: ``POST /v1/files`` (purpose batch), ``GET /v1/files``, ``GET`` and ``DELETE /v1/files/{id}`` and its
``/content``, ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches`` (newest first,
with each batch's metadata), ``POST /v1/batches/{id}/cancel``.

A batch goes validating, then in progress, then finalizing, then completed, as a provider's does,
at the pace the ``batch`` config sets; each line is answered by the server's own route for it
(``/v1/chat/completions`` or ``/v1/responses``, over loopback), so every fault, limit and answer of
the online path holds for batch lines too, and the server's stats count each line as a request.
It refuses and fails as providers do: a file that is not one model, a custom_id twice, a line of
another route, more than 50,000 lines or 200 MB (``failed`` at validation, with the line);
lines answered 4xx or 5xx go to the error file; a batch past ``expire_after_s`` expires with the
lines it answered in its output and the others in its error file as ``batch_expired``; a cancelled
one keeps what it answered; too many batches enqueued is a 429 until earlier ones end; an account
out of credit (``quota_exhausted``) is refused at creation. The output file's lines come in an
order of their own (``shuffle``), as a provider's do.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import aiohttp
from aiohttp import web

MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024
ROUTES = ("/v1/chat/completions", "/v1/responses")
ACTIVE = ("validating", "in_progress", "finalizing", "cancelling")
# The ``batch`` config: seconds in validating and in finalizing, lines answered at once, the
# output shuffled, seconds in progress before the batch expires (None: never), a validation
# failure forced (its message), and how many batches may be enqueued at once (None: any).
BATCH_DEFAULTS: dict[str, Any] = {
    "validating_s": 0.1,
    "finalizing_s": 0.05,
    "concurrency": 16,
    "shuffle": True,
    "expire_after_s": None,
    "fail_validation": None,
    "max_enqueued": None,
    # Seconds a route holds its answer after doing its work (the file stored, the batch created, the
    # content read): the window in which a test kills the client, as a process dies there.
    # No batch API at all (llama.cpp's server, Ollama): 404 on its every route.
    "absent": False,
    "hold_upload_s": 0,
    "hold_create_s": 0,
    "hold_content_s": 0,
}


def validate_batch_config(value: Any) -> None:
    if not isinstance(value, dict) or set(value) - set(BATCH_DEFAULTS):
        raise ValueError(f"batch must be an object of {sorted(BATCH_DEFAULTS)}")
    for key in ("validating_s", "finalizing_s", "expire_after_s", "hold_upload_s", "hold_create_s", "hold_content_s"):
        number = value.get(key, 0)
        if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0):
            raise ValueError(
                f"batch.{key} must be a non-negative number" + (" or null" if key == "expire_after_s" else "")
            )
    for key in ("concurrency", "max_enqueued"):
        number = value.get(key, 1)
        if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 1):
            raise ValueError(f"batch.{key} must be a whole number of 1 or more")
    if not isinstance(value.get("absent", False), bool):
        raise ValueError("batch.absent must be true or false")
    if not isinstance(value.get("fail_validation"), (str, type(None))):
        raise ValueError("batch.fail_validation must be a message or null")


class BatchState:
    """The files and batches, beside the server's own state (``server``: its config and stats;
    ``check_auth``: its key check), which the server hands in: it may run as ``__main__``."""

    def __init__(self, server: Any, check_auth: Any) -> None:
        self.server = server
        self.check_auth = check_auth
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        # What each batch was made of, kept after its file is deleted: a test counts the requests
        # submitted (GET /__batch_inputs/{id}, the server's own route, no provider's).
        self.inputs: dict[str, bytes] = {}
        self.counter = 0
        self.session: aiohttp.ClientSession | None = None

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-fake{self.counter:06d}"

    def add_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = self.next_id("file")
        self.contents[file_id] = content
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
        }
        return self.files[file_id]


BATCHES_KEY = web.AppKey("batches", BatchState)


def _error(status: int, message: str, kind: str = "invalid_request_error", code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status)


def _config(server: Any) -> dict[str, Any]:
    return {**BATCH_DEFAULTS, **(server.config.get("batch") or {})}


@web.middleware
async def _authorized(request: web.Request, handler):
    """The key checked on every route of the batch API, as on the chat routes."""
    if request.path.startswith(("/v1/files", "/v1/batches")):
        state = request.app[BATCHES_KEY]
        if _config(state.server)["absent"]:
            return web.Response(status=404, text="File Not Found")
        refused = state.check_auth(state.server, request)
        if refused is not None:
            return refused
    return await handler(request)


def _missing(kind: str, name: str) -> web.Response:
    return _error(404, f"No such {kind} object: {name}")


async def create_file(request: web.Request) -> web.Response:
    if not request.content_type.startswith("multipart/"):
        return _error(400, "Files are uploaded as multipart/form-data with a 'file' and a 'purpose'.")
    purpose, content, filename = None, None, "upload.jsonl"
    reader = await request.multipart()
    async for part in reader:
        if part.name == "purpose":
            purpose = (await part.text()).strip()
        elif part.name == "file":
            filename = part.filename or filename
            content = bytes(await part.read())
    if purpose is None:
        return _error(400, "Missing required parameter: 'purpose'.")
    if content is None:
        return _error(400, "Missing required parameter: 'file'.")
    if purpose == "batch" and len(content) > MAX_BYTES:
        return _error(400, f"File is too large: {len(content):,} bytes; a batch input file holds at most 200 MB.")
    state = request.app[BATCHES_KEY]
    stored = state.add_file(content, filename, purpose)
    await asyncio.sleep(_config(state.server)["hold_upload_s"])
    return web.json_response(stored)


async def list_files(request: web.Request) -> web.Response:
    files = list(request.app[BATCHES_KEY].files.values())
    return web.json_response({"object": "list", "data": files, "has_more": False})


async def get_file(request: web.Request) -> web.Response:
    found = request.app[BATCHES_KEY].files.get(request.match_info["file_id"])
    if found is None:
        return _missing("File", request.match_info["file_id"])
    return web.json_response(found)


async def batch_input(request: web.Request) -> web.Response:
    content = request.app[BATCHES_KEY].inputs.get(request.match_info["batch_id"])
    if content is None:
        return _missing("Batch", request.match_info["batch_id"])
    return web.Response(body=content, content_type="application/octet-stream")


async def delete_file(request: web.Request) -> web.Response:
    state = request.app[BATCHES_KEY]
    file_id = request.match_info["file_id"]
    if state.files.pop(file_id, None) is None:
        return _missing("File", file_id)
    state.contents.pop(file_id, None)
    return web.json_response({"id": file_id, "object": "file", "deleted": True})


async def file_content(request: web.Request) -> web.Response:
    content = request.app[BATCHES_KEY].contents.get(request.match_info["file_id"])
    if content is None:
        return _missing("File", request.match_info["file_id"])
    await asyncio.sleep(_config(request.app[BATCHES_KEY].server)["hold_content_s"])
    return web.Response(body=content, content_type="application/octet-stream")


async def create_batch(request: web.Request) -> web.Response:
    state = request.app[BATCHES_KEY]
    server = state.server
    config = _config(server)
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "The body is not valid JSON.")
    if not isinstance(body, dict):
        return _error(400, "The body must be a JSON object.")
    file_id, route = body.get("input_file_id"), body.get("endpoint")
    if file_id not in state.files:
        return _missing("File", file_id)
    if route not in ROUTES:
        return _error(400, f"Invalid 'endpoint': {route!r}; one of {', '.join(ROUTES)}.")
    if body.get("completion_window") != "24h":
        return _error(400, "Invalid 'completion_window': only '24h' is supported.")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or len(metadata) > 16 or not all(isinstance(v, str) for v in metadata.values()):
        return _error(400, "Invalid 'metadata': at most 16 pairs of strings.")
    if server.config.get("quota_exhausted"):
        return _error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        )
    enqueued = sum(1 for batch in state.batches.values() if batch["status"] in ACTIVE)
    if config["max_enqueued"] is not None and enqueued >= config["max_enqueued"]:
        return _error(
            429,
            f"Enqueued token limit reached: {enqueued} batches in progress. Please try again once some"
            " in_progress batches have been completed.",
            "invalid_request_error",
            "token_limit_exceeded",
        )
    now = int(time.time())
    batch_id = state.next_id("batch")
    batch = {
        "id": batch_id,
        "object": "batch",
        "endpoint": route,
        "errors": None,
        "input_file_id": file_id,
        "completion_window": "24h",
        "status": "validating",
        "output_file_id": None,
        "error_file_id": None,
        "created_at": now,
        "in_progress_at": None,
        "expires_at": now + 24 * 3600,
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "metadata": metadata,
    }
    state.batches[batch_id] = batch
    state.inputs[batch_id] = state.contents[file_id]
    origin = str(request.url.origin())
    auth = request.headers.get("Authorization")
    state.tasks[batch_id] = asyncio.create_task(_process(request.app, batch, origin, auth))
    answer = dict(batch)  # as it was made: the hold does not show its later states
    await asyncio.sleep(config["hold_create_s"])
    return web.json_response(answer)


async def get_batch(request: web.Request) -> web.Response:
    batch = request.app[BATCHES_KEY].batches.get(request.match_info["batch_id"])
    if batch is None:
        return _missing("Batch", request.match_info["batch_id"])
    return web.json_response(batch)


async def list_batches(request: web.Request) -> web.Response:
    newest_first = list(reversed(request.app[BATCHES_KEY].batches.values()))
    after = request.query.get("after")
    if after is not None:
        ids = [batch["id"] for batch in newest_first]
        newest_first = newest_first[ids.index(after) + 1 :] if after in ids else []
    try:
        limit = max(1, min(100, int(request.query.get("limit", "20"))))
    except ValueError:
        return _error(400, "Invalid 'limit': a whole number from 1 to 100.")
    page = newest_first[:limit]
    return web.json_response(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(newest_first) > limit,
        }
    )


async def cancel_batch(request: web.Request) -> web.Response:
    batch = request.app[BATCHES_KEY].batches.get(request.match_info["batch_id"])
    if batch is None:
        return _missing("Batch", request.match_info["batch_id"])
    if batch["status"] not in ("validating", "in_progress", "finalizing"):
        return _error(400, f"Cannot cancel a batch with status '{batch['status']}'.")
    batch["status"], batch["cancelling_at"] = "cancelling", int(time.time())
    return web.json_response(batch)


def _validation_error(content: bytes, route: str) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
    """(the lines, None), or (None, the error of the first line that fails) as OpenAI's batch
    validation reports it: a code, a message, and the line (counted from 1)."""
    lines: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()
    texts = content.decode("utf-8", "replace").splitlines()
    if len(texts) > MAX_LINES:
        return None, {
            "code": "too_many_requests",
            "message": f"{len(texts):,} requests; at most {MAX_LINES:,}",
            "line": None,
        }
    for number, text in enumerate(texts, start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            return None, {"code": "invalid_json_line", "message": "This line is not valid JSON.", "line": number}
        if (
            not isinstance(line, dict)
            or not isinstance(line.get("custom_id"), str)
            or not isinstance(line.get("body"), dict)
        ):
            return None, {
                "code": "invalid_request",
                "message": "A line needs custom_id, method, url and body.",
                "line": number,
            }
        if line["custom_id"] in seen:
            return None, {
                "code": "duplicate_custom_id",
                "message": f"custom_id {line['custom_id']!r} twice.",
                "line": number,
            }
        if line.get("method") != "POST" or line.get("url") != route:
            return None, {"code": "mismatched_endpoint", "message": f"The line's url is not {route}.", "line": number}
        seen.add(line["custom_id"])
        models.add(str(line["body"].get("model")))
        if len(models) > 1:
            return None, {
                "code": "mismatched_model",
                "message": "A batch file holds requests to one model.",
                "line": number,
            }
        lines.append(line)
    if not lines:
        return None, {"code": "empty_file", "message": "The file holds no request.", "line": None}
    return lines, None


async def _process(app: web.Application, batch: dict[str, Any], origin: str, auth: str | None) -> None:
    state = app[BATCHES_KEY]
    config = _config(state.server)
    # The config read as it waits: a test that shortens validating_s lets a waiting batch go on.
    started = time.monotonic()
    while time.monotonic() < started + _config(state.server)["validating_s"] and batch["status"] != "cancelling":
        await asyncio.sleep(0.02)
    if batch["status"] == "cancelling":
        batch["status"], batch["cancelled_at"] = "cancelled", int(time.time())
        return
    lines, error = _validation_error(state.contents[batch["input_file_id"]], batch["endpoint"])
    if error is None and config["fail_validation"]:
        error = {"code": "invalid_request", "message": config["fail_validation"], "line": 1}
    if lines is None or error is not None:
        batch["status"], batch["failed_at"] = "failed", int(time.time())
        batch["errors"] = {"object": "list", "data": [{**error, "param": None}]}
        return
    batch["status"], batch["in_progress_at"] = "in_progress", int(time.time())
    batch["request_counts"]["total"] = len(lines)
    deadline = None if config["expire_after_s"] is None else time.monotonic() + config["expire_after_s"]
    if state.session is None:
        state.session = aiohttp.ClientSession()
    answered: dict[str, dict[str, Any]] = {}
    queue = list(lines)

    async def worker() -> None:
        while queue and batch["status"] == "in_progress":
            if deadline is not None and time.monotonic() >= deadline:
                return
            line = queue.pop(0)
            headers = {"Authorization": auth} if auth else {}
            try:
                async with state.session.post(origin + line["url"], json=line["body"], headers=headers) as response:
                    status, text = response.status, await response.text()
            except aiohttp.ClientError as exc:  # a dropped connection (the drop fault): a 500 line
                status, text = (
                    500,
                    json.dumps({"error": {"message": f"connection lost: {exc}", "type": "server_error"}}),
                )
            try:
                body = json.loads(text)
            except ValueError:
                body = {"error": {"message": text[:200], "type": "server_error"}}
            answered[line["custom_id"]] = {"status": status, "body": body}
            counts = batch["request_counts"]
            counts["completed" if status == 200 else "failed"] += 1

    workers = [asyncio.create_task(worker()) for _ in range(config["concurrency"])]
    await asyncio.gather(*workers)
    cancelled = batch["status"] == "cancelling"
    expired = not cancelled and bool(queue)
    if not cancelled and not expired:
        batch["status"], batch["finalizing_at"] = "finalizing", int(time.time())
        await asyncio.sleep(config["finalizing_s"])
    order = [line["custom_id"] for line in lines]
    if config["shuffle"]:
        random.Random(batch["id"]).shuffle(order)
    output, errors = [], []
    for number, custom_id in enumerate(order, start=1):
        done = answered.get(custom_id)
        if done is None:
            if expired:
                errors.append(
                    {
                        "id": f"batch_req_{batch['id']}_{number}",
                        "custom_id": custom_id,
                        "response": None,
                        "error": {
                            "code": "batch_expired",
                            "message": "This request could not be executed before the completion window expired.",
                        },
                    }
                )
            continue
        entry = {
            "id": f"batch_req_{batch['id']}_{number}",
            "custom_id": custom_id,
            "response": {"status_code": done["status"], "request_id": f"req_{number}", "body": done["body"]},
            "error": None,
        }
        (output if done["status"] == 200 else errors).append(entry)
    if output:
        text = "".join(json.dumps(entry) + "\n" for entry in output).encode()
        batch["output_file_id"] = state.add_file(text, f"{batch['id']}_output.jsonl", "batch_output")["id"]
    if errors:
        text = "".join(json.dumps(entry) + "\n" for entry in errors).encode()
        batch["error_file_id"] = state.add_file(text, f"{batch['id']}_error.jsonl", "batch_output")["id"]
    now = int(time.time())
    if cancelled:
        batch["status"], batch["cancelled_at"] = "cancelled", now
    elif expired:
        batch["status"], batch["expired_at"] = "expired", now
        batch["request_counts"]["failed"] += len(queue)
    else:
        batch["status"], batch["completed_at"] = "completed", now


def add_batch_routes(app: web.Application, server: Any, check_auth: Any) -> None:
    app[BATCHES_KEY] = BatchState(server, check_auth)
    app.middlewares.append(_authorized)
    app.router.add_post("/v1/files", create_file)
    app.router.add_get("/v1/files", list_files)
    app.router.add_get("/v1/files/{file_id}", get_file)
    app.router.add_delete("/v1/files/{file_id}", delete_file)
    app.router.add_get("/__batch_inputs/{batch_id}", batch_input)
    app.router.add_get("/v1/files/{file_id}/content", file_content)
    app.router.add_post("/v1/batches", create_batch)
    app.router.add_get("/v1/batches", list_batches)
    app.router.add_get("/v1/batches/{batch_id}", get_batch)
    app.router.add_post("/v1/batches/{batch_id}/cancel", cancel_batch)

    async def close_session(app: web.Application) -> None:
        state = app[BATCHES_KEY]
        for task in state.tasks.values():
            task.cancel()
        if state.session is not None:
            await state.session.close()

    app.on_cleanup.append(close_session)
