"""Fetching a file from the web (a HealthBench subset, the meta-eval's file, the reference prompt)
straight to disk, under a deadline of its own.

A download is not a model call: it may follow a redirect to another origin (Hugging Face's and
GitHub's go to their CDNs), and it is never held in memory whole (a subset is up to 200 MB).
It sends no key but a dataset's own (HF_TOKEN, for a gated Hugging Face dataset), and httpx
drops an ``Authorization`` header on a redirect that leaves the origin, so none is carried
across. The deadline is the whole download's, first byte to last: a server that drips a byte a
second never resets it, as it would reset a read timeout.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_DEADLINE = 1800.0  # seconds: 200 MB at 120 kB/s; HBTUI_DOWNLOAD_TIMEOUT changes it
STALL_SECONDS = 60.0  # no byte for this long: the server is gone
CONNECT_SECONDS = 15.0


class DownloadError(Exception):
    """A download that did not complete; the message says why in a few words."""


def download_deadline() -> float:
    """HBTUI_DOWNLOAD_TIMEOUT, seconds, if it is a positive number; else the default."""
    text = os.environ.get("HBTUI_DOWNLOAD_TIMEOUT", "").strip()
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_DEADLINE
    return value if 0 < value < float("inf") else DEFAULT_DEADLINE


def download_to(
    url: str,
    target: Path,
    *,
    on_chunk: Callable[[bytes], None] | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    max_bytes: int | None = None,
    deadline: float | None = None,
    connect: float = CONNECT_SECONDS,
    headers: dict[str, str] | None = None,
) -> None:
    """``url`` written to ``target`` as it arrives, within ``deadline`` seconds (default
    HBTUI_DOWNLOAD_TIMEOUT) and ``max_bytes``; DownloadError otherwise (``target`` may then hold
    part of it: the caller's temporary name). Runs in a thread of its own with its own event
    loop, so it is called alike from plain code, a worker thread and a running loop."""
    outcome: dict[str, BaseException] = {}
    seconds = deadline if deadline is not None else download_deadline()

    def run() -> None:
        try:
            asyncio.run(_download(url, target, on_chunk, progress, max_bytes, seconds, connect, headers or {}))
        except BaseException as exc:  # noqa: BLE001 - carried over to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="hbtui-download", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]


async def _download(
    url: str,
    target: Path,
    on_chunk: Callable[[bytes], None] | None,
    progress: Callable[[int, int | None], None] | None,
    max_bytes: int | None,
    seconds: float,
    connect: float,
    headers: dict[str, str],
) -> None:
    import httpx

    timeout = httpx.Timeout(STALL_SECONDS, connect=connect)
    try:
        async with asyncio.timeout(seconds):
            async with httpx.AsyncClient(timeout=timeout, follow_redirects=True, trust_env=True) as http:
                async with http.stream("GET", url, headers=headers) as response:
                    if response.status_code != 200:
                        raise DownloadError(f"HTTP {response.status_code}")
                    total = _length(response)
                    if max_bytes is not None and total is not None and total > max_bytes:
                        raise DownloadError(f"{total:,} bytes, more than the {max_bytes:,} expected")
                    done = 0
                    with target.open("wb") as handle:
                        async for chunk in response.aiter_bytes(1 << 16):
                            done += len(chunk)
                            if max_bytes is not None and done > max_bytes:
                                raise DownloadError(f"more than the {max_bytes:,} bytes expected")
                            handle.write(chunk)
                            if on_chunk:
                                on_chunk(chunk)
                            if progress:
                                progress(done, total)
    except TimeoutError:
        raise DownloadError(f"not complete within {seconds:g} s (HBTUI_DOWNLOAD_TIMEOUT)") from None
    except httpx.HTTPError as exc:
        raise DownloadError(f"download failed ({type(exc).__name__}: {exc})".replace(": )", ")")) from None


def _length(response: Any) -> int | None:
    try:
        return int(response.headers.get("content-length") or 0) or None
    except ValueError:
        return None
