"""The earlier single-script harness's run folders: ``results.jsonl`` (one conversation a line,
each criterion only its points, verdict and prompt_id) and ``description.md`` (``Key: value``
lines; ``Score`` only once the run finished). Criterion texts and tags come back from the dataset,
joined by prompt_id and position."""

from __future__ import annotations

import time
from pathlib import Path

from hbtui.imports.common import (
    Fields,
    ImportedFile,
    ImportProblem,
    ReadConversation,
    description_lines,
    jsonl_lines,
    read_text,
    stated_number,
)
from hbtui.store import ImportedReply

FORMAT = "single-script harness"


def _effort(value: str | None) -> str | None:
    """The script wrote Python's None for an effort it did not send."""
    return None if value in (None, "", "None") else value


def read_legacy(folder: Path) -> ImportedFile:
    results = folder / "results.jsonl"
    conversations = []
    for number, obj in jsonl_lines(results):
        line = Fields(obj, f"{results}:{number}")
        prompt = line.messages("prompt")
        reply = line.text("completion")
        rubrics = line.children("rubrics")
        if not rubrics:
            line.fail("rubrics", "is empty: a conversation needs its criteria")
        prompt_ids = [item.text("prompt_id") for item in rubrics]
        if len(set(prompt_ids)) != 1:
            line.fail("rubrics", f"name more than one prompt_id ({prompt_ids[0]!r} and others)")
        verdicts = [item.verdict() for item in rubrics]
        conversations.append(
            ReadConversation(
                where=f"{results}:{number}",
                prompt_id=str(prompt_ids[0]),
                prompt=prompt,
                reply=ImportedReply("generated", reply, verdicts),
                criteria=[(None, float(item.number("points") or 0), None) for item in rubrics],
            )
        )
    if not conversations:
        raise ImportProblem(f"{results}: holds no conversations (the run stopped before its first one?)")
    description = folder / "description.md"
    lines = description_lines(read_text(description)) if description.exists() else {}
    stated = {key: value for key, (value, _) in lines.items()}
    score_line = lines["score"][1] if "score" in lines else None
    imported = ImportedFile(
        format=FORMAT,
        path=folder,
        conversations=conversations,
        model_test=stated.get("model evaluated") or "unknown",
        model_grader=stated.get("model grader") or "unknown",
        settings={
            "reasoning_test": _effort(stated.get("model evaluated reasoning effort")),
            "reasoning_grader": _effort(stated.get("model grader reasoning effort")),
        },
        stated_score=stated_number(stated.get("score"), f"{description}:{score_line}: Score"),
        stated=stated,
        dataset_named=stated.get("dataset"),
    )
    if "score" not in stated:
        imported.notes.append("description.md states no score: the run was likely cut short")
    return imported


def legacy_time(stated: dict[str, str]) -> float | None:
    """The script's Timestamp (``%Y-%m-%d_%H-%M-%S``, local time) as a moment, if it reads as one."""
    try:
        return time.mktime(time.strptime(stated.get("timestamp", ""), "%Y-%m-%d_%H-%M-%S"))
    except ValueError:
        return None
