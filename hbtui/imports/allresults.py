"""simple-evals' ``*_allresults.json``: ``score``, ``metrics`` and, per conversation (repeats in
order, nothing else telling them apart), ``metadata.example_level_metadata[i]`` with its
``prompt_id``, the ``prompt`` as sent (the sampler's system message first), the ``completion``
and its ``rubric_items`` with verdicts. Example tags are not kept there: the dataset gives them."""

from __future__ import annotations

from pathlib import Path

from hbtui.imports.common import Fields, ImportedFile, ImportProblem, ReadConversation, json_value, read_text
from hbtui.store import ImportedReply

FORMAT = "simple-evals allresults"


def read_allresults(path: Path) -> ImportedFile:
    top = Fields(json_value(read_text(path), str(path)), str(path))
    stated_score = top.number("score", nullable=True)
    metadata = top.child("metadata", top.raw("metadata"))
    examples = metadata.children("example_level_metadata")
    if not examples:
        raise ImportProblem(f"{path}: metadata.example_level_metadata: is empty (no conversations)")
    conversations = []
    for example in examples:
        example.number("score", required=False, nullable=True)  # its own: hbtui scores it again
        items = example.children("rubric_items")
        completion = example.messages("completion")
        conversations.append(
            ReadConversation(
                where=f"{path}: {example.path}",
                prompt_id=str(example.text("prompt_id")),
                prompt=example.messages("prompt"),
                reply=ImportedReply("generated", completion[-1]["content"], [item.verdict() for item in items]),
                criteria=[
                    (item.text("criterion"), float(item.number("points") or 0), tuple(item.strings("tags")))
                    for item in items
                ],
            )
        )
    return ImportedFile(
        format=FORMAT,
        path=path,
        conversations=conversations,
        # What the reference's prompt was, so that a regrade of the import asks as the reference asked.
        settings={"grader_template": "reference"},
        stated_score=stated_score,
    )
