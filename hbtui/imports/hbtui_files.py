"""hbtui's own results: a run folder (``results.jsonl`` + ``description.md``, as hbtui writes
them when a run ends) or an ``hbtui export`` JSONL file, e.g. from another machine."""

from __future__ import annotations

import re
from pathlib import Path

from hbtui.imports.common import (
    Fields,
    ImportedFile,
    ImportProblem,
    ReadConversation,
    finite_number,
    jsonl_lines,
    read_text,
)
from hbtui.store import ImportedReply

FOLDER, EXPORT = "hbtui run folder", "hbtui export"
MODEL_KEYS = ("model_test", "model_grader")  # hbtui.render.export.run_models
KNOWN_TEMPLATES = ("reference", "builtin")  # a file's path names a file of the other machine


def read_hbtui_lines(path: Path) -> tuple[list[ReadConversation], dict[str, str]]:
    """The conversations, and the run's model names as its lines give them (an export of an
    earlier version gives none)."""
    conversations = []
    models: dict[str, str] = {}
    for number, obj in jsonl_lines(path):
        line = Fields(obj, f"{path}:{number}")
        for key in MODEL_KEYS:
            name = line.text(key, required=False)
            if name:
                models.setdefault(key, name)
        line.number("score", required=False, nullable=True)  # the line's own: hbtui scores it again
        reply = line.text("completion", nullable=True)
        repeat = line.number("repeat")
        if repeat is None or repeat < 0 or repeat != int(repeat):
            line.fail("repeat", f"must be a whole number from 0 (is {repeat})")
        failure = line.text("generation_error", required=False) or ""
        kind, _, message = failure.partition(": ")
        rubrics = line.children("rubrics")
        conversations.append(
            ReadConversation(
                where=f"{path}:{number}",
                prompt_id=str(line.text("prompt_id")),
                prompt=line.messages("prompt"),
                reply=ImportedReply(
                    "generated" if reply is not None else "failed",
                    reply,
                    [item.verdict(error_key="error") for item in rubrics] if reply is not None else [],
                    reasoning=line.text("reasoning", required=False),
                    finish_reason="length" if line.raw("truncated", required=False) is True else None,
                    error=None if reply is not None else (message or "no reply in the imported file"),
                    error_kind=None if reply is not None else (kind if message else "no_reply"),
                ),
                criteria=[
                    (item.text("criterion"), float(item.number("points") or 0), tuple(item.strings("tags")))
                    for item in rubrics
                ],
                example_tags=line.strings("example_tags"),
                repeat=int(repeat or 0),
            )
        )
    if not conversations:
        raise ImportProblem(f"{path}: holds no conversations")
    return conversations, models


_LINE = {
    "model_test": re.compile(r"^- model under test: (.*?) at "),
    "model_grader": re.compile(r"^- grader: (.*?) at "),
    "dataset": re.compile(r"^- dataset: (.*?) \("),
    "template": re.compile(r"^- grader template: (\S+)"),
    "score": re.compile(r"^## Score: (\S+)"),
    "started": re.compile(r"^- started: (.*)$"),
}


def read_hbtui(path: Path) -> ImportedFile:
    """A folder (with its description) or an export file (lines alone)."""
    folder = path.is_dir()
    conversations, models = read_hbtui_lines(path / "results.jsonl" if folder else path)
    imported = ImportedFile(
        format=FOLDER if folder else EXPORT,
        path=path,
        conversations=conversations,
        model_test=models.get("model_test", "unknown"),
        model_grader=models.get("model_grader", "unknown"),
    )
    if not folder:
        return imported
    description = path / "description.md"
    if not description.exists():
        return imported
    found: dict[str, str] = {}
    line_of: dict[str, int] = {}
    for number, line in enumerate(read_text(description).splitlines(), start=1):
        for key, pattern in _LINE.items():
            match = pattern.match(line)
            if match and key not in found:
                found[key], line_of[key] = match.group(1), number
    imported.stated = found
    imported.model_test = found.get("model_test") or imported.model_test
    imported.model_grader = found.get("model_grader") or imported.model_grader
    imported.dataset_named = found.get("dataset")
    if found.get("template") in KNOWN_TEMPLATES:
        imported.settings["grader_template"] = found["template"]
    if "score" in found:
        imported.stated_score = finite_number(found["score"], f"{description}:{line_of['score']}: Score")
    return imported
