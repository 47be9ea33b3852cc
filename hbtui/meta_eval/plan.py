"""A meta-eval planned: its grader required, its requests described, its rows stored. No call is
made here (the runner makes them), so the app plans one without reaching the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from itertools import islice
from pathlib import Path
from typing import cast

from hbtui.core.dataset import sha256_file
from hbtui.core.fidelity import describe_requests
from hbtui.core.grading import Template
from hbtui.core.run_records import RequestsRecord
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.meta_eval import data as meta_data
from hbtui.meta_eval.data import NAME, MetaRow, check_file, chosen, read_rows
from hbtui.meta_eval.metrics import MIN_PHYSICIAN_LABELS
from hbtui.store import INSERT_CHUNK, Store


def require_grader(settings: Settings) -> None:
    """A meta-eval needs the grader's endpoint and model only (no model under test)."""
    if not settings.model_grader:
        raise SettingsError("MODEL_GRADER is not set (put it in .env, the environment, or --model-grader)")
    if not settings.effective_grader_base_url:
        raise SettingsError("BASE_URL (or GRADER_BASE_URL) is not set (put it in .env, the environment, or a flag)")


def meta_requests(settings: Settings, template: Template) -> RequestsRecord:
    """What the run's grader requests are, and how they differ from the reference's (as a model
    run's are described: a meta-eval calls no model under test, so only the grader's part)."""
    record: Mapping[str, object] = describe_requests(settings, template.name, template.sha256, tested=False)
    return cast("RequestsRecord", {key: record[key] for key in GRADER_REQUEST_KEYS})


GRADER_REQUEST_KEYS = (
    "grader_template",
    "system_message_grader",
    "temperature_grader",
    "max_tokens_grader",
    "api_grader",
    "model_grader",
    "differences",
    "deviations",
    "reference_identical",
    "reference_commit",
)


async def plan_meta_eval(
    store: Store,
    settings: Settings,
    path: Path,
    *,
    official: bool,
    limit: int | None,
    seed: int,
    name: str | None,
    labels_over: int = MIN_PHYSICIAN_LABELS,
    count: int | None = None,
) -> int:
    """The run and its rows, stored whole or not at all. The file is checked line by line first
    (off the event loop: 136 MB of JSON) unless the caller did (``count``: its rows)."""
    if count is None:
        count = await asyncio.to_thread(check_file, path)
    indices = chosen(count, limit, seed)
    digest = meta_data.OFFICIAL.sha256 if official else await asyncio.to_thread(sha256_file, path)
    return await store.create_meta_eval_run(
        name=name,
        name_base=NAME,
        dataset_name=NAME if official else path.name,
        dataset_path=None if official else str(path.resolve()),
        dataset_sha256=digest,
        model_grader=settings.model_grader or "",
        settings=settings.public_dict(),
        plan={"limit": limit, "seed": seed, "rows_in_file": count, "labels_over": labels_over},
        chunks=_chunks(path, indices),
    )


async def _chunks(path: Path, indices: list[int]) -> AsyncIterator[list[tuple[int, MetaRow]]]:
    """The chosen rows a few thousand at a time, read and parsed off the event loop: the file
    is never held whole, nor its rows all at once."""
    rows = read_rows(path, indices)
    while chunk := await asyncio.to_thread(lambda: list(islice(rows, INSERT_CHUNK))):
        yield chunk
