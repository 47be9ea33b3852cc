"""What every import format reads into, and the checks that name a bad field exactly.

A format module turns a file into an ``ImportedFile`` without touching the database; every field
is checked as it is read, so the first bad one stops the import with one line naming the file,
the line (or JSON path) and the field, before anything is written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hbtui.core.dataset import _lone_surrogate_field
from hbtui.core.errors import HbtuiError
from hbtui.core.files import read_user_file
from hbtui.store import ERROR, MET, NOT_MET, ImportedReply, ImportedVerdict


class ImportProblem(HbtuiError, ValueError):
    """A file that cannot be imported; the message names the file, the line and the field."""


@dataclass(slots=True)
class ReadConversation:
    """One conversation as a file gives it. Criterion texts and tags are None where the format
    keeps only points (the single-script harness): the dataset gives them back."""

    where: str  # "file:line" or "file: json.path", for the errors of the join
    prompt_id: str
    prompt: list[dict] | None
    reply: ImportedReply
    criteria: list[tuple[str | None, float, tuple[str, ...] | None]]
    example_tags: list[str] | None = None
    repeat: int | None = None  # the file's own; None: counted from the order (a prompt_id's nth time)


@dataclass(slots=True)
class ImportedFile:
    format: str
    path: Path
    conversations: list[ReadConversation]
    model_test: str = "unknown"
    model_grader: str = "unknown"
    settings: dict[str, Any] = field(default_factory=dict)  # what the file says of how it was made
    stated_score: float | None = None
    stated: dict[str, str] = field(default_factory=dict)  # the file's own description, as written
    dataset_named: str | None = None  # the dataset the file says it ran on
    notes: list[str] = field(default_factory=list)


def read_text(path: Path) -> str:
    data = read_user_file(path, ImportProblem)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportProblem(f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x})") from None


def json_value(text: str, where: str) -> Any:
    """``text`` parsed, or one line naming where it is broken; a lone surrogate (which no file
    or database can hold) is named by its field."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        position = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise ImportProblem(f"{where}: invalid JSON at {position}: {exc.msg}") from None
    except RecursionError:
        raise ImportProblem(f"{where}: invalid JSON: nested too deeply") from None
    bad = _lone_surrogate_field(value)
    if bad:
        raise ImportProblem(f"{where}: {bad}: holds a lone surrogate (\\ud800-\\udfff), which is not text")
    return value


def jsonl_lines(path: Path) -> list[tuple[int, Any]]:
    """(line number, parsed object) of each non-blank line; the last may lack its newline."""
    return [
        (number, json_value(line, f"{path}:{number}"))
        for number, line in enumerate(read_text(path).split("\n"), start=1)
        if line.strip()
    ]


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text):,} characters)"


class Fields:
    """Reads the fields of one JSON object, each miss named as ``where: path: problem``."""

    def __init__(self, obj: Any, where: str, path: str = "") -> None:
        self.where, self.path = where, path
        if not isinstance(obj, dict):
            self.fail("", f"must be a JSON object (is {_shown(obj)})")
        self.obj: dict = obj

    def name(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str | int, problem: str) -> None:
        name = self.name(key) if key != "" else self.path
        raise ImportProblem(f"{self.where}: {name + ': ' if name else ''}{problem}")

    def raw(self, key: str, required: bool = True) -> Any:
        if key not in self.obj:
            if required:
                self.fail(key, "missing")
            return None
        return self.obj[key]

    def text(self, key: str, required: bool = True, nullable: bool = False) -> str | None:
        value = self.raw(key, required)
        if value is None and (nullable or not required):
            return None
        if not isinstance(value, str):
            self.fail(key, f"must be a string (is {_shown(value)})")
        return value

    def number(self, key: str, required: bool = True, nullable: bool = False) -> float | None:
        value = self.raw(key, required)
        if value is None and (nullable or not required):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(key, f"must be a number (is {_shown(value)})")
        return value

    def listed(self, key: str, required: bool = True) -> list:
        value = self.raw(key, required)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            self.fail(key, f"must be a list (is {_shown(value)})")
        return value

    def strings(self, key: str, required: bool = True) -> list[str]:
        values = self.listed(key, required)
        for i, value in enumerate(values):
            if not isinstance(value, str):
                self.fail(key, f"[{i}] must be a string (is {_shown(value)})")
        return values

    def child(self, key: str | int, value: Any) -> Fields:
        return Fields(value, self.where, self.name(key))

    def children(self, key: str) -> list[Fields]:
        return [Fields(item, self.where, f"{self.name(key)}[{i}]") for i, item in enumerate(self.listed(key))]

    def messages(self, key: str) -> list[dict]:
        """A conversation: a non-empty list of {role, content} with string values."""
        items = self.children(key)
        if not items:
            self.fail(key, "is empty: a conversation needs at least one message")
        for item in items:
            item.text("role")
            item.text("content")
        return [item.obj for item in items]

    def verdict(self, met_key: str = "criteria_met", error_key: str | None = None) -> ImportedVerdict:
        """criteria_met true or false; null only where the format records why (``error_key``)."""
        met = self.raw(met_key)
        explanation = self.text("explanation", required=False, nullable=True)
        if met is True or met is False:
            return ImportedVerdict(MET if met else NOT_MET, explanation)
        if met is None and error_key is not None:
            error = self.text(error_key, required=False)
            kind, _, message = (error or "").partition(": ")
            if error and message:
                return ImportedVerdict(ERROR, explanation, message, kind)
            return ImportedVerdict(ERROR, explanation, "not graded in the imported file", "not_graded")
        self.fail(met_key, f"must be true or false (is {_shown(met)})")
        raise AssertionError  # fail raised


def description_lines(text: str) -> dict[str, tuple[str, int]]:
    """``Key: value`` lines of a description (markdown list marks and bold allowed): key ->
    (value, line number); the first of a key counts."""
    fields: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        key, colon, value = line.strip().lstrip("-* ").partition(":")
        if colon and key and not key.startswith("#"):
            fields.setdefault(key.strip().strip("*").strip().lower(), (value.strip(), number))
    return fields


def finite_number(text: str, where: str) -> float:
    """``text`` as a number, or one line naming ``where``: a word, NaN or infinity is none."""
    try:
        number = float(text)
    except ValueError:
        raise ImportProblem(f"{where}: not a number ({_shown(text)})") from None
    if not math.isfinite(number):
        raise ImportProblem(f"{where}: not a number ({_shown(text)})")
    return number


def stated_number(value: str | None, where: str) -> float | None:
    """The single-script harness's ``Score``: its first word; ``None`` or ``nan`` where it had none."""
    if value is None or value.strip() in ("", "None", "nan"):
        return None
    return finite_number(value.split()[0], where)
