"""A run planned: the records chosen exactly as the reference samples them, and the run (or a
regrade of one) created in the database with every conversation and criterion pending."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hbtui.core.completion_groups import replied_by_of
from hbtui.core.completions import Completion, plan_completions
from hbtui.core.dataset import Dataset, Record, sample
from hbtui.core.errors import TRANSIENT_KINDS
from hbtui.core.fidelity import describe_requests
from hbtui.core.grading import load_template
from hbtui.core.json_reading import read_json
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.core.verdict_cache import RequestKeys
from hbtui.core.verdicts import FINISHED, INCOMPLETE, RUNNING
from hbtui.engine.run_settings import settings_for_run
from hbtui.store import PENDING, PlannedConversation, RunClaim, RunRow, Store, WorkItem
from hbtui.store.work import WORK_PAGE, stored_points


def preview_of(record: Record) -> str:
    text = record.prompt[-1]["content"]
    return " ".join(text.split())[:200]


def default_run_name(settings: Settings, dataset_name: str) -> str:
    model = (settings.model_test or "model").split("/")[-1]
    return f"{model}-{Path(dataset_name).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a run, or None: a run is referred to by id, name or `latest`,
    so a name that reads as one of the others would point at another run."""
    if not name.strip():
        return "is empty"
    if name.strip().isdigit():
        return "is all digits, which reads as a run id"
    if name.strip() == "latest":
        return "means the newest run"
    return None


def check_run_name(name: str | None) -> None:
    if name is not None and (problem := run_name_problem(name)):
        raise SettingsError(f"--name {name!r}: {problem}; choose another name")


def _check_run(settings: Settings, repeats: int, name: str | None, endpoints: bool = True) -> None:
    settings.require_models(endpoints)
    if repeats < 1:
        raise SettingsError(f"--repeats {repeats}: must be at least 1")
    check_run_name(name)


async def plan_run(
    store: Store,
    settings: Settings,
    dataset: Dataset,
    *,
    limit: int | None = None,
    seed: int = 0,
    repeats: int = 1,
    name: str | None = None,
    endpoints: bool = True,
) -> int:
    """Choose the records (exactly as the reference samples them) and create the run.
    ``endpoints`` False: a run answered through batch files, which needs none."""
    _check_run(settings, repeats, name, endpoints)
    if settings.completions:
        return await _plan_completions_run(store, settings, dataset, limit, seed, repeats, name)
    planned = _model_run_plan(dataset, limit, seed)
    return await store.create_run(**_model_run(settings, dataset, planned, limit, seed, repeats, name))


def _model_run_plan(dataset: Dataset, limit: int | None, seed: int) -> list[PlannedConversation]:
    # One planned conversation a record: the store repeats them (the reference repeats the whole
    # sampled list, examples * n_repeats), so the plan does not grow with --repeats.
    return [
        planned_conversation(position, record) for position, record in enumerate(sample(dataset.records, limit, seed))
    ]


def _model_run(
    settings: Settings,
    dataset: Dataset,
    planned: list[PlannedConversation],
    limit: int | None,
    seed: int,
    repeats: int,
    name: str | None,
) -> dict[str, Any]:
    """What create_run is given for a run of the model under test."""
    return dict(
        name=name,
        name_base=default_run_name(settings, dataset.name),
        dataset_name=dataset.name,
        dataset_path=str(dataset.path),
        dataset_sha256=dataset.sha256,
        model_test=settings.model_test or "",  # require_models(): both are set
        model_grader=settings.model_grader or "",
        settings=settings.public_dict(),
        plan={"limit": limit, "seed": seed, "repeats": repeats, "records": len(planned)},
        conversations=planned,
        repeats=repeats,
    )


@dataclass(eq=False)
class HeadStart:
    """A run whose first calls go out while its plan is still being stored.

    The run was created driven by this process, under its lease, in a transaction that is still
    writing the conversations and criteria: no other process can see the run, let alone take it
    over, until ``stored`` is done. Its first page of work is here, built from the plan in
    memory; everything else the driver reads or writes waits for ``stored``. A process that dies
    first leaves nothing behind but the calls it had in flight, as a crash at any time does.
    """

    lease: str
    items: list[WorkItem]  # the first conversations, in plan order, each still to generate
    stored: asyncio.Task[int]  # the plan's transaction; its result is the run's id


async def start_run(
    store: Store,
    settings: Settings,
    dataset: Dataset,
    owner: str,
    *,
    limit: int | None = None,
    seed: int = 0,
    repeats: int = 1,
    name: str | None = None,
) -> tuple[RunRow, HeadStart | None]:
    """The run `hbtui run` drives, and its head start. A run of the model under test is created
    with its first calls free to go before its plan is stored: at the main subset's size the plan
    takes a fifth of a second to write, which the first calls' wait for their answers hides. A run
    of the records' own completions has its replies from the start: planned, then driven."""
    if settings.completions:
        run_id = await plan_run(store, settings, dataset, limit=limit, seed=seed, repeats=repeats, name=name)
        return await store.get_run(run_id), None
    _check_run(settings, repeats, name)
    planned = _model_run_plan(dataset, limit, seed)
    template = load_template(settings.grader_template, settings.cache_dir)
    claim = RunClaim(owner, secrets.token_hex(16), describe_requests(settings, template.name, template.sha256))
    created: asyncio.Future[tuple[RunRow, int]] = asyncio.get_running_loop().create_future()

    async def on_created(run_id: int, first_id: int) -> None:
        created.set_result((await store.get_run(run_id), first_id))  # this transaction's own row

    stored = asyncio.create_task(
        store.create_run(
            **_model_run(settings, dataset, planned, limit, seed, repeats, name), claim=claim, on_created=on_created
        ),
        name="hbtui-plan",
    )
    await asyncio.wait((created, stored), return_when=asyncio.FIRST_COMPLETED)
    if not created.done():
        await stored  # it failed before the run existed: its error
    run, first_id = created.result()
    items = [
        WorkItem.of(
            first_id + c.position,
            c.position,
            0,
            read_json(c.record_body),
            None,
            [(idx, stored_points(points), PENDING) for idx, (_, points, _) in enumerate(c.criteria)],
        )
        for c in planned[:WORK_PAGE]
    ]
    return run, HeadStart(claim.lease, items, stored)  # the run as the creating transaction sees it


def planned_conversation(position: int, record: Record, completion: Completion | None = None) -> PlannedConversation:
    return PlannedConversation(
        position=position,
        repeat=0,
        prompt_id=record.prompt_id,
        record_body=record.raw,
        record_sha256=hashlib.sha256(record.raw.encode()).hexdigest(),
        theme=record.theme,
        example_tags=record.example_tags,
        preview=preview_of(record),
        criteria=[(c.criterion, c.points, c.tags) for c in record.rubrics],
        completion_text=completion.text if completion else None,
        completion_group=completion.group if completion else None,
        completion=completion.label if completion else None,
    )


async def _plan_completions_run(
    store: Store, settings: Settings, dataset: Dataset, limit: int | None, seed: int, repeats: int, name: str | None
) -> int:
    """A run whose replies are the records' own completions (hbtui.core.completions), stored as its
    replies from the start: the engine only grades them. Where a model's name would stand, the
    run says whose completions these are."""
    chosen = plan_completions(dataset, settings.completions or "", limit, seed)
    replied_by = replied_by_of(settings)
    return await store.create_run(
        name=name,
        name_base=f"{chosen.mode}-completions-{Path(dataset.name).stem}-{time.strftime('%Y%m%d-%H%M%S')}",
        dataset_name=dataset.name,
        dataset_path=str(dataset.path),
        dataset_sha256=dataset.sha256,
        model_test=replied_by,
        model_grader=settings.model_grader or "",
        settings=settings.public_dict(),
        plan={"limit": limit, "seed": seed, "repeats": repeats, "records": len(chosen.chosen), **chosen.as_plan()},
        conversations=[
            planned_conversation(position, completion.record, completion)
            for position, completion in enumerate(chosen.chosen)
        ],
        repeats=repeats,
    )


async def plan_regrade(store: Store, source: RunRow, settings: Settings, name: str | None = None) -> int:
    """A new run, linked to ``source``, that grades its replies again with ``settings``' grader."""
    check_run_name(name)
    status = source.shown_status()
    if status == RUNNING:
        raise SettingsError(f"run {source.id} is still running; regrade it once it has stopped")
    if status not in (FINISHED, INCOMPLETE):
        # Its conversations without a reply yet would be left without one, and the regrade would
        # score a part of the run as if it were the whole.
        raise SettingsError(
            f"run {source.id} is {status}, its replies not all there: finish it first"
            f" (hbtui resume {source.id}), then regrade it"
        )
    if not (await store.progress(source.id)).conversations_generated:
        raise SettingsError(f"run {source.id} has no replies to grade again (it got none)")
    settings.require_models()
    model = (settings.model_grader or "grader").split("/")[-1]
    await seed_cache(store, source, settings.cache_dir)
    return await store.create_regrade(
        source.id,
        name=name,
        name_base=f"{source.name}-regrade-{model}",
        model_grader=settings.model_grader or "",
        settings=settings.public_dict(),
        unanswered_kinds=sorted(TRANSIENT_KINDS),
    )


async def seed_cache(store: Store, run: RunRow, cache_dir: str) -> int:
    """Put ``run``'s verdicts in the cache under the keys of its own requests, where they are not
    yet (a run made before the cache existed): a regrade with the same grader then asks nothing."""
    if not await store.has_uncached_verdicts(run.id):
        return 0
    settings = replace(settings_for_run(run, Settings(db_path=store.path.as_posix())), cache_dir=cache_dir)
    try:
        template = load_template(settings.grader_template, settings.cache_dir)
    except Exception:  # noqa: BLE001 - its prompt cannot be had (a file since moved): nothing to seed
        return 0
    keys = RequestKeys(settings, template)
    rows = []
    for conversation_id, prompt, reply, repeat, verdicts in await store.graded_for_cache(run.id):
        rows += [
            (key, conversation_id, idx) for idx, key in keys.keys(keys.digest(prompt, reply), repeat, verdicts).items()
        ]
    return await store.seed_cache(rows)
