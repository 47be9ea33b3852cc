"""The meta-eval's rows: the official file (136 MB, downloaded once, sha256-checked, cached) or a
local one, read a line at a time and never whole.

A file is read twice: once to check every line and count them (a bad line stops everything,
named by file and line, before anything is stored), then to hand out the chosen rows. The
choice is the reference's: ``random.Random(seed).sample(rows, limit)`` picks by position alone,
so sampling the line numbers picks the same rows in the same order without holding them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hbtui.core.dataset import (
    ROLES,
    SURROGATE_ESCAPE,
    DatasetError,
    OfficialFile,
    ProgressCallback,
    _lone_surrogate_field,
    download_file,
)

OFFICIAL = OfficialFile(
    "2025-05-07-06-14-12_oss_meta_eval.jsonl",
    "6a343ed3fcb6f28353c2c6c157ae30ddf2db874c947b27ba474ad54da9c5dbac",
    29_511,
)
OFFICIAL_BYTES = 136_224_466
NAME = "meta-eval"


class MetaEvalDataError(DatasetError):
    """A meta-eval file that cannot be used; the message names the file, the line and the field."""


@dataclass(frozen=True, slots=True)
class MetaRow:
    """One judgement to make: does ``completion``, as the last turn of ``prompt``, meet ``rubric``?
    With the physicians' answers (``labels``, by ``physician_ids``) and the rubric's category."""

    line: int
    prompt: tuple[dict, ...]
    completion: str
    rubric: str
    category: str
    labels: tuple[bool, ...]
    physician_ids: tuple[str, ...]
    prompt_id: str | None = None
    completion_id: str | None = None


def official_path(cache_dir: str | Path, progress: ProgressCallback | None = None) -> Path:
    """The official file, downloaded once into ``cache_dir`` and sha256-checked (a copy that
    fails the check is fetched again)."""
    return download_file(OFFICIAL, cache_dir, progress)


def official_cached(cache_dir: str | Path) -> bool:
    return (Path(cache_dir) / OFFICIAL.filename).exists()


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text):,} characters)"


def parse_row(path: Path, line: int, text: bytes | str) -> MetaRow:
    where = f"{path}:{line}"
    try:
        value = json.loads(text)
    except UnicodeDecodeError:
        raise MetaEvalDataError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise MetaEvalDataError(f"{where}: invalid JSON at column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise MetaEvalDataError(f"{where}: invalid JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise MetaEvalDataError(f"{where}: must be a JSON object (is {_shown(value)})")
    if SURROGATE_ESCAPE.search(text if isinstance(text, str) else text.decode("utf-8", "replace")):
        bad = _lone_surrogate_field(value)  # no file or database can hold one
        if bad:
            raise MetaEvalDataError(f"{where}: {bad}: holds a lone surrogate (\\ud800-\\udfff), which is not text")

    def field(key: str, kind: type, what: str) -> Any:
        if key not in value:
            raise MetaEvalDataError(f"{where}: {key}: missing")
        if not isinstance(value[key], kind):
            raise MetaEvalDataError(f"{where}: {key}: must be {what} (is {_shown(value[key])})")
        return value[key]

    prompt = field("prompt", list, "a list of messages")
    if not prompt:
        raise MetaEvalDataError(f"{where}: prompt: is empty: a conversation needs at least one message")
    for i, message in enumerate(prompt):
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("content"), str)
        ):
            raise MetaEvalDataError(
                f"{where}: prompt[{i}]: must be {{role, content}} with a role of {', '.join(ROLES)} and text content"
            )
    completion = field("completion", str, "text")
    rubric = field("rubric", str, "text")
    category = field("category", str, "text")
    labels = field("binary_labels", list, "a list of true/false")
    if not labels:
        raise MetaEvalDataError(f"{where}: binary_labels: is empty: a row needs at least one physician's label")
    for i, label in enumerate(labels):
        if label is not True and label is not False:
            raise MetaEvalDataError(f"{where}: binary_labels[{i}]: must be true or false (is {_shown(label)})")
    physicians = field("anonymized_physician_ids", list, "a list of ids")
    if len(physicians) != len(labels):
        raise MetaEvalDataError(
            f"{where}: anonymized_physician_ids: {len(physicians)} ids for {len(labels)} binary_labels"
        )
    for i, physician in enumerate(physicians):
        if not isinstance(physician, str):
            raise MetaEvalDataError(f"{where}: anonymized_physician_ids[{i}]: must be text (is {_shown(physician)})")
    optional = {
        key: value.get(key) if isinstance(value.get(key), str) else None for key in ("prompt_id", "completion_id")
    }
    return MetaRow(line, tuple(prompt), completion, rubric, category, tuple(labels), tuple(physicians), **optional)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each non-blank line, from a buffered read: memory stays one line."""
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line
    except OSError as exc:
        raise MetaEvalDataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def check_file(path: Path) -> int:
    """Every line checked, the rows counted; the first bad line raises, naming it."""
    if not path.exists():
        raise MetaEvalDataError(f"{path}: no such file")
    if path.is_dir():
        raise MetaEvalDataError(f"{path}: is a folder, not a JSONL file")
    count = 0
    for number, line in _lines(path):
        parse_row(path, number, line)
        count += 1
    if not count:
        raise MetaEvalDataError(f"{path}: holds no rows")
    return count


def chosen(count: int, limit: int | None, seed: int) -> list[int]:
    """The rows' indices in the order the reference grades them."""
    if limit is None or limit >= count:
        return list(range(count))  # the reference samples only when asked for fewer than it has
    if limit < 1:
        raise MetaEvalDataError(f"--limit {limit}: must be at least 1")
    return random.Random(seed).sample(range(count), limit)


def read_rows(path: Path, indices: list[int]) -> Iterator[tuple[int, MetaRow]]:
    """(position in ``indices``, row) of the chosen rows, in the file's order."""
    wanted = {index: position for position, index in enumerate(indices)}
    index = 0
    for number, line in _lines(path):
        position = wanted.get(index)
        if position is not None:
            yield position, parse_row(path, number, line)
        index += 1
