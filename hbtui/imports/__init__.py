"""`hbtui import PATH`: another harness's results (or hbtui's own, from another machine) as a run
of kind imported, scored by hbtui's scoring, its file's own stated score kept beside it.

The file is read and checked whole, and joined with the dataset, before the database is touched;
the run is then written in one transaction. A bad file leaves the database as it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from hbtui.core.dataset import Dataset, Record, parse_record
from hbtui.core.numbering import criterion_number
from hbtui.core.settings.config import Settings
from hbtui.core.verdicts import GENERATED
from hbtui.imports.allresults import read_allresults
from hbtui.imports.common import ImportedFile, ImportProblem, ReadConversation, jsonl_lines
from hbtui.imports.hbtui_files import read_hbtui
from hbtui.imports.legacy import FORMAT as LEGACY
from hbtui.imports.legacy import legacy_time, read_legacy
from hbtui.store import PlannedConversation, Store

__all__ = ["ImportProblem", "ImportSummary", "import_run", "read_import"]


def read_import(path: Path) -> ImportedFile:
    """Which format ``path`` holds, read: a folder of results.jsonl (the single-script harness's
    when its criteria lack their text, hbtui's otherwise), a *.json allresults file, or a JSONL
    export."""
    if path.is_dir():
        results = path / "results.jsonl"
        if not results.exists():
            raise ImportProblem(f"{path}: a folder without results.jsonl: not a run folder")
        lines = jsonl_lines(results)
        first = lines[0][1] if lines else None
        is_hbtui = isinstance(first, dict) and "prompt_id" in first
        return read_hbtui(path) if is_hbtui else read_legacy(path)
    if not path.exists():
        raise ImportProblem(f"{path}: no such file or folder")
    if path.suffix == ".json":
        return read_allresults(path)
    return read_hbtui(path)


def _preview(prompt: tuple[dict, ...] | list[dict]) -> str:
    return " ".join(str(prompt[-1]["content"]).split())[:200]


def _without_system(conv: ReadConversation, record: Record | None) -> tuple[list[dict], str | None]:
    """The prompt without what the sampler put before the record's messages, and that system
    message. With the record, exactly what precedes its prompt; without, a leading system message."""
    prompt = conv.prompt or []
    if record is not None:
        own = list(record.prompt)
        if len(prompt) < len(own) or prompt[len(prompt) - len(own) :] != own:
            raise ImportProblem(f"{conv.where}: prompt: does not end with the messages of prompt_id {conv.prompt_id}")
        added = prompt[: len(prompt) - len(own)]
        if any(m.get("role") != "system" for m in added):
            raise ImportProblem(f"{conv.where}: prompt: holds messages before the record's that are not system")
        return own, added[0]["content"] if added else None
    if len(prompt) > 1 and prompt[0].get("role") == "system":
        return prompt[1:], prompt[0]["content"]
    return prompt, None


def _joined(read: ImportedFile, dataset: Dataset | None) -> tuple[list[PlannedConversation], str | None]:
    """The conversations as the store plans them: with the dataset, its records (criterion texts,
    tags, themes, and the very line, so that comparisons pair the import with runs of that
    file); without, records made from what the file holds."""
    records = {r.prompt_id: r for r in dataset.records} if dataset else {}
    seen: dict[str, int] = {}
    planned = []
    system_message = None
    strip = read.format.startswith("simple-evals")
    for position, conv in enumerate(read.conversations):
        record = records.get(conv.prompt_id)
        if dataset is not None and record is None:
            raise ImportProblem(f"{conv.where}: prompt_id {conv.prompt_id!r} is not in --dataset {dataset.path}")
        prompt = conv.prompt or []
        if strip:
            prompt, system_message = _without_system(conv, record)
        if record is not None:
            _check_criteria(conv, record, dataset)
        else:
            record = _made_record(read, conv, prompt, position)
        repeat = conv.repeat if conv.repeat is not None else seen.get(conv.prompt_id, 0)
        seen[conv.prompt_id] = seen.get(conv.prompt_id, 0) + 1
        planned.append(
            PlannedConversation(
                position=position,
                repeat=repeat,
                prompt_id=record.prompt_id,
                record_body=record.raw,
                record_sha256=hashlib.sha256(record.raw.encode()).hexdigest(),
                theme=record.theme,
                example_tags=record.example_tags,
                preview=_preview(record.prompt),
                criteria=[(c.criterion, c.points, c.tags) for c in record.rubrics],
                imported=conv.reply,
            )
        )
    return planned, system_message


def _check_criteria(conv: ReadConversation, record: Record, dataset: Dataset | None) -> None:
    if conv.reply.status != GENERATED and not conv.reply.verdicts:
        return  # no reply, no verdicts: nothing to join
    where = f"{conv.where}: rubrics"
    if len(conv.criteria) != len(record.rubrics):
        raise ImportProblem(
            f"{where}: {len(conv.criteria)} criteria, but prompt_id {conv.prompt_id!r} has"
            f" {len(record.rubrics)} in --dataset {dataset.path if dataset else ''}: another version of the file?"
        )
    for i, ((text, points, _), criterion) in enumerate(zip(conv.criteria, record.rubrics)):
        if points != criterion.points or (text is not None and text != criterion.criterion):
            raise ImportProblem(
                f"{where}[{i}]: differs from criterion {criterion_number(i)} of prompt_id {conv.prompt_id!r} in --dataset"
                f" ({'points' if points != criterion.points else 'criterion'}): another version of the file?"
            )


def _made_record(read: ImportedFile, conv: ReadConversation, prompt: list[dict], position: int) -> Record:
    if any(text is None for text, _, _ in conv.criteria):
        raise ImportProblem(f"{read.path}: the {read.format}'s files keep no criterion text: give --dataset PATH")
    body = json.dumps(
        {
            "prompt": prompt,
            "rubrics": [{"criterion": t, "points": p, "tags": list(tags or ())} for t, p, tags in conv.criteria],
            "example_tags": conv.example_tags or [],
            "prompt_id": conv.prompt_id,
        },
        ensure_ascii=False,
    )
    try:
        return parse_record(Path(conv.where.split(":")[0]), position + 1, body)
    except ValueError as exc:
        raise ImportProblem(f"{conv.where}: {str(exc).split(': ', 1)[-1]}") from None


@dataclass(frozen=True, slots=True)
class ImportSummary:
    run_id: int
    conversations: int
    score: float | None
    stated_score: float | None
    format: str


async def import_run(
    store: Store, read: ImportedFile, dataset: Dataset | None, settings: Settings, name: str | None = None
) -> ImportSummary:
    """``read`` joined with ``dataset`` and written as one imported run, scored by hbtui."""
    from hbtui.engine.run_finish import compute_report
    from hbtui.engine.run_plan import check_run_name

    check_run_name(name)
    if read.format == LEGACY and dataset is None:
        raise ImportProblem(
            f"{read.path}: the {LEGACY}'s results keep no criterion text or tags: give the dataset it ran on"
            f" with --dataset PATH{f' (its description names {read.dataset_named})' if read.dataset_named else ''}"
        )
    planned, system_message = _joined(read, dataset)
    run_settings = {
        **settings.public_dict(),
        "model_test": read.model_test,
        "model_grader": read.model_grader,
        **read.settings,
        **({"system_message_test": system_message} if system_message is not None else {}),
    }
    run_id = await store.import_run(
        name=name,
        name_base=f"{read.path.stem or read.path.name}-imported",
        dataset_name=dataset.name if dataset else (read.dataset_named or read.path.name),
        dataset_path=str(dataset.path) if dataset else None,
        dataset_sha256=dataset.sha256 if dataset else "",
        model_test=read.model_test,
        model_grader=read.model_grader,
        settings=run_settings,
        plan={
            "limit": None,
            "seed": None,
            "repeats": max(c.repeat for c in planned) + 1,
            "records": len({c.prompt_id for c in planned}),
        },
        conversations=planned,
        imported={
            "format": read.format,
            "path": str(read.path.resolve()),
            "stated_score": read.stated_score,
            "stated": read.stated,
            "notes": read.notes,
        },
        report_of=lambda run_id: compute_report(store, run_id),
        created_at=legacy_time(read.stated) if read.format == LEGACY else None,
    )
    run = await store.get_run(run_id)
    return ImportSummary(run_id, len(planned), run.score, read.stated_score, read.format)
