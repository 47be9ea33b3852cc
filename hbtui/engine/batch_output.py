"""A batch output file (OpenAI's batch output format, vLLM's run-batch's) read and checked whole
before anything of it is stored (hbtui.engine.batch_files stores it): a line that is not JSON,
names no request of the run, or repeats a custom_id, is one line naming the file and line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hbtui.core.batch_files import CUSTOM_ID, BatchFiles
from hbtui.core.errors import SERVER_ERROR, HbtuiError
from hbtui.core.verdicts import GENERATED
from hbtui.store import RunRow, Store


class BatchImportError(HbtuiError):
    """An output file that cannot be imported: the message names the file and line."""


# ---- an output file, read and checked whole --------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputLine:
    number: int
    custom_id: str
    position: int
    repeat: int
    idx: int | None  # None: a reply's line
    status: int | None  # the response's status_code; None: the line never ran (error only)
    body: bytes
    error: str | None  # the output's error, for a line that never ran ("batch_expired: ...")
    error_kind: str = SERVER_ERROR  # of a line that never ran: asked again (a batch failed at validation: not)


def iter_output(path: Path, token: str, digest: Any = None) -> Iterator[OutputLine]:
    """Each line of an output file (OpenAI's batch output format, vLLM's run-batch's), read a line
    at a time (a 50,000-line file is 100 MB and more); BatchImportError naming the first line that
    is none. ``digest``: a hashlib object the file's bytes are fed to."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise BatchImportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BatchImportError(f"{path}: a folder, not an output file") from None
    seen: dict[str, int] = {}
    with handle:
        # Lines end at "\n" alone (a binary file's lines): an engine may write a U+2028 raw inside a
        # reply, which JSON allows.
        for number, data in enumerate(handle, start=1):
            if digest is not None:
                digest.update(data)
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BatchImportError(f"{path}:{number}: not UTF-8 text ({exc.reason})") from None
            if raw.strip():
                yield output_line(raw, f"{path}:{number}", number, token, seen)


def output_line(raw: str, where: str, number: int, token: str, seen: dict[str, int]) -> OutputLine:
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        raise BatchImportError(f"{where}: not a JSON line") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str):
        raise BatchImportError(f"{where}: not a batch output line (no custom_id)")
    custom_id = entry["custom_id"]
    found = CUSTOM_ID.match(custom_id)
    if found is None or found["token"] != token:
        raise BatchImportError(f"{where}: custom_id {custom_id!r} names no request of this run")
    if custom_id in seen:
        raise BatchImportError(f"{where}: custom_id {custom_id!r} is on line {seen[custom_id]} too")
    seen[custom_id] = number
    response, error = entry.get("response"), entry.get("error")
    status, body, failure = None, b"", None
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        status = response["status_code"]
        answer = response.get("body")
        if answer is None and status != 200 and error is not None:
            # vLLM's run-batch: a failed request's status, and its error beside, not in, the body.
            answer = error if isinstance(error, dict) else {"error": {"message": str(error)}}
        if not isinstance(answer, (dict, str)):
            raise BatchImportError(f"{where}: response.body is not an answer")
        body = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
    elif isinstance(error, dict):
        failure = f"{error.get('code') or 'error'}: {error.get('message') or 'no message'}"
    else:
        raise BatchImportError(f"{where}: neither a response with its status_code nor an error")
    idx = found["idx"]
    return OutputLine(
        number,
        custom_id,
        int(found["position"]),
        int(found["repeat"]),
        None if idx is None else int(idx),
        status,
        body,
        failure,
    )


@dataclass(slots=True)
class Imported:
    replies: int = 0
    verdicts: int = 0
    failed: int = 0  # lines stored as a failure that no retry cures (a 4xx)
    no_answer: int = 0  # lines that got no answer that counts: asked again while attempts remain
    already: int = 0  # lines whose request was answered by an earlier import


@dataclass(slots=True)
class CheckedOutput:
    """An output file checked whole, every line found to name a request of the run; its lines are
    read again as they are stored (``lines``: given, for lines made here rather than read)."""

    path: Path
    sha256: str
    token: str
    conversations: dict[tuple[int, int], tuple[int, str, int]]
    verdicts: dict[tuple[int, int], str]
    lines: list[OutputLine] | None = None

    def read(self) -> Iterator[OutputLine]:
        return iter(self.lines) if self.lines is not None else iter_output(self.path, self.token)


async def check_output(store: Store, run: RunRow, path: Path, batch: BatchFiles | None = None) -> CheckedOutput:
    """``path`` read and checked against ``run`` before anything is stored (BatchImportError)."""
    batch = batch or BatchFiles.of(run.plan)
    assert batch is not None
    conversations, verdicts = await store.batch_targets(run.id)
    digest = hashlib.sha256()
    count = 0
    for line in iter_output(path, batch.token, digest):
        check_line(path, line, run, conversations)
        count += 1
    if not count:
        raise BatchImportError(f"{path}: holds no output line: nothing to import")
    return CheckedOutput(path, digest.hexdigest(), batch.token, conversations, verdicts)


def check_line(
    path: Path, line: OutputLine, run: RunRow, conversations: dict[tuple[int, int], tuple[int, str, int]]
) -> None:
    target = conversations.get((line.position, line.repeat))
    if target is None or (line.idx is not None and line.idx >= target[2]):
        raise BatchImportError(f"{path}:{line.number}: custom_id {line.custom_id!r} names no request of run {run.id}")
    if line.idx is not None and target[1] != GENERATED:  # no reply: its grader was never asked
        raise BatchImportError(
            f"{path}:{line.number}: custom_id {line.custom_id!r} names a grader request never written"
            " (its conversation has no reply)"
        )
