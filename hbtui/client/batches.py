"""The batch API of an OpenAI-compatible endpoint (OpenAI's ``/v1/files`` and ``/v1/batches``, and
the same routes at Groq, Together and others): a file uploaded, a batch created, watched,
cancelled, and found again by its metadata, and its output and error files streamed to disk.

The client of a run through a provider's batch API (issue 27) is built on this; today it is
tested against the project's test server (tests/client/test_batch_client.py), which serves the
same routes with their states, refusals and failures.

A batch's files reach 200 MB: they stream to and from disk under a timeout of their own, never
held whole. Its answers are read as a call's (hbtui.client.chat.batch_line_result). Like a call,
a request follows no redirect (the key would go along), and the endpoint's key is never part of
an error's text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hbtui.client.http1 import HttpAnswer
from hbtui.client.wire import ChatError, Endpoint, aiohttp_module, error_message, error_type
from hbtui.core.errors import (
    AUTH,
    BAD_RESPONSE,
    CLIENT_ERROR,
    CONNECTION,
    NOT_FOUND,
    QUOTA,
    RATE_LIMITED,
    REDIRECTED,
    SERVER_ERROR,
    TIMEOUT,
)
from hbtui.core.redact import provider_text

ENDED = ("completed", "failed", "expired", "cancelled")
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch as the endpoint describes it."""

    id: str
    status: str  # validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    created_at: int | None
    expires_at: int | None
    total: int
    completed: int
    failed: int
    metadata: dict[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # a batch failed at validation: what the endpoint said of it

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @classmethod
    def of(cls, data: Any) -> Batch:
        """A batch object of the endpoint; ChatError (a bad response) for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("status"), str):
            raise ChatError(BAD_RESPONSE, f"not a batch object: {str(data)[:200]!r}", 200)
        counts: dict = data["request_counts"] if isinstance(data.get("request_counts"), dict) else {}
        errors: dict = data["errors"] if isinstance(data.get("errors"), dict) else {}
        messages = tuple(
            f"{e.get('code') or 'error'}: {e.get('message') or ''}" + (f" (line {e['line']})" if e.get("line") else "")
            for e in (errors.get("data") or [])
            if isinstance(e, dict)
        )
        metadata: dict = data["metadata"] if isinstance(data.get("metadata"), dict) else {}

        def number(value: Any) -> int:
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        return cls(
            id=data["id"],
            status=data["status"],
            input_file_id=data.get("input_file_id"),
            output_file_id=data.get("output_file_id"),
            error_file_id=data.get("error_file_id"),
            created_at=data.get("created_at") if isinstance(data.get("created_at"), int) else None,
            expires_at=data.get("expires_at") if isinstance(data.get("expires_at"), int) else None,
            total=number(counts.get("total")),
            completed=number(counts.get("completed")),
            failed=number(counts.get("failed")),
            metadata={str(k): str(v) for k, v in metadata.items()},
            errors=messages,
        )


def _unreachable(url: str, exc: BaseException, secrets: tuple[str | None, ...]) -> ChatError:
    return ChatError(CONNECTION, f"cannot reach {url}: {provider_text(str(exc), secrets, 200)}")


class BatchClient:
    """The batch routes of one endpoint. ``timeout``: of each request but a file's; ``file_timeout``:
    of a file's upload or download, which may be 200 MB."""

    def __init__(self, endpoint: Endpoint, timeout: float = 60.0, file_timeout: float = 1800.0) -> None:
        self.endpoint = endpoint
        self.timeout, self.file_timeout = timeout, file_timeout
        self._session: Any = None

    async def __aenter__(self) -> BatchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> Any:
        if self._session is None:
            aiohttp = aiohttp_module()
            # No proxy from the environment, no redirect, no decompression asked for: as a call.
            key = {"Authorization": f"Bearer {self.endpoint.api_key}"} if self.endpoint.api_key else {}
            self._session = aiohttp.ClientSession(headers=key)  # a file's upload sets its own type
        return self._session

    def _url(self, path: str) -> str:
        return self.endpoint.base_url.rstrip("/") + path

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        aiohttp = aiohttp_module()
        url = self._url(path)
        try:
            async with self.session.request(
                method, url, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=self.timeout), **kwargs
            ) as response:
                body = await response.read()
                status = response.status
                headers = response.headers
        except TimeoutError:
            raise ChatError(TIMEOUT, f"no answer from {url} within {self.timeout:g} s") from None
        except aiohttp.ClientError as exc:
            raise ChatError(
                CONNECTION, f"cannot reach {url}: {provider_text(str(exc), self.endpoint.secrets, 200)}"
            ) from None
        if status != 200:
            raise self._error(status, body, headers, method, url)
        try:
            return json.loads(body)
        except ValueError:
            raise ChatError(BAD_RESPONSE, f"{method} {url}: not JSON: {body[:200]!r}", status) from None

    def _error(self, status: int, body: bytes, headers: Any, method: str, url: str) -> ChatError:
        answer = HttpAnswer(status, "", dict(headers), body)
        message, _param, code = error_message(answer, self.endpoint.secrets)
        where = f"{method} {url}"
        if 300 <= status < 400:
            return ChatError(REDIRECTED, f"{where} redirected elsewhere (HTTP {status}): not followed", status)
        if status == 402 or code == "insufficient_quota" or error_type(answer) == "insufficient_quota":
            return ChatError(QUOTA, f"{where}: out of quota: {message}", status)
        if status == 429:  # too many batches or tokens enqueued: earlier batches must end first
            return ChatError(RATE_LIMITED, f"{where}: {message}", status)
        if status in (401, 403):
            return ChatError(AUTH, f"{where}: {message}", status)
        if status == 404:
            return ChatError(NOT_FOUND, f"{where}: {message}", status)
        if status >= 500:
            return ChatError(SERVER_ERROR, f"{where}: {message}", status)
        return ChatError(CLIENT_ERROR, f"{where}: {message}", status)

    # ---- the routes ----------------------------------------------------------------------------

    async def upload(self, path: Path, purpose: str = "batch") -> str:
        """The file's id once the endpoint holds ``path`` (streamed from disk)."""
        aiohttp = aiohttp_module()
        url = self._url("/files")
        form = aiohttp.FormData()
        form.add_field("purpose", purpose)
        with path.open("rb") as handle:
            form.add_field("file", handle, filename=path.name, content_type="application/jsonl")
            try:
                async with self.session.post(
                    url, data=form, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=self.file_timeout)
                ) as response:
                    body = await response.read()
                    if response.status != 200:
                        raise self._error(response.status, body, response.headers, "POST", url)
            except TimeoutError:
                raise ChatError(
                    TIMEOUT, f"upload of {path.name} to {url}: not done within {self.file_timeout:g} s"
                ) from None
            except aiohttp.ClientError as exc:
                raise ChatError(
                    CONNECTION, f"cannot reach {url}: {provider_text(str(exc), self.endpoint.secrets, 200)}"
                ) from None
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise ChatError(BAD_RESPONSE, f"POST {url}: not a file object: {body[:200]!r}", 200)
        return data["id"]

    async def create(self, file_id: str, route: str, metadata: dict[str, str], window: str = "24h") -> Batch:
        body = {"input_file_id": file_id, "endpoint": route, "completion_window": window, "metadata": metadata}
        return Batch.of(await self._json("POST", "/batches", json=body))

    async def get(self, batch_id: str) -> Batch:
        return Batch.of(await self._json("GET", f"/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> Batch:
        return Batch.of(await self._json("POST", f"/batches/{batch_id}/cancel"))

    async def list_batches(self, limit: int = 100) -> Any:
        """The newest batches, as the endpoint lists them (a check that it has a batch API)."""
        return await self._json("GET", "/batches", params={"limit": str(limit)})

    async def find(self, metadata: dict[str, str], input_file_id: str | None = None, pages: int = 50) -> Batch | None:
        """The newest batch whose metadata holds every pair of ``metadata`` (and made of
        ``input_file_id``, when given): one a process created and died before it could record
        (listed newest first, a page of 100 at a time)."""
        after: str | None = None
        for _ in range(pages):
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._json("GET", "/batches", params=params)
            data = page.get("data") if isinstance(page, dict) else None
            if not isinstance(data, list):
                raise ChatError(BAD_RESPONSE, f"GET {self._url('/batches')}: not a list of batches", 200)
            for item in data:
                batch = Batch.of(item)
                if all(batch.metadata.get(key) == value for key, value in metadata.items()) and (
                    input_file_id is None or batch.input_file_id == input_file_id
                ):
                    return batch
            if not page.get("has_more") or not data:
                return None
            after = page.get("last_id") or Batch.of(data[-1]).id
        return None

    async def delete_file(self, file_id: str) -> None:
        """The endpoint's copy of a file gone (its storage counts against the account)."""
        await self._json("DELETE", f"/files/{file_id}")

    async def download(self, file_id: str, destination: Path) -> int:
        """The file's content streamed into ``destination`` (whole, or not there); its bytes."""
        aiohttp = aiohttp_module()
        url = self._url(f"/files/{file_id}/content")
        partial = destination.with_name(destination.name + ".partial")
        size = 0
        try:
            async with self.session.get(
                url, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=self.file_timeout)
            ) as response:
                if response.status != 200:
                    raise self._error(response.status, await response.read(), response.headers, "GET", url)
                with partial.open("wb") as out:
                    os.chmod(partial, 0o600)
                    async for chunk in response.content.iter_chunked(CHUNK):
                        out.write(chunk)
                        size += len(chunk)
        except TimeoutError:
            partial.unlink(missing_ok=True)
            raise ChatError(
                TIMEOUT, f"download of {file_id} from {url}: not done within {self.file_timeout:g} s"
            ) from None
        except aiohttp.ClientError as exc:
            partial.unlink(missing_ok=True)
            raise ChatError(
                CONNECTION, f"cannot reach {url}: {provider_text(str(exc), self.endpoint.secrets, 200)}"
            ) from None
        os.replace(partial, destination)
        return size
