"""A run answered by an engine of the user's own through batch files: the request files written,
and the engine's output files imported (`hbtui run --batch-files DIR`, `hbtui batch import`).

A run so made awaits its batch (a status of its own, holding no lease: no process drives it)
from the moment its plan and first request file are written. Each import is checked whole first,
as `hbtui import` checks a file: a line that names no request of the run, a custom_id twice, or
a line that is not an output line, is one line naming the file and line, and nothing is stored.
Then it takes the run (refused while another process drives it), stores each answer as a call's
answer is stored (the same reading of a 200, the same kinds of failure, the verdict cache), and
either finishes the run or writes the next request files: the grader's requests for the replies
it now holds, and whatever is still missing. An answer already stored is never replaced, so
importing a file twice changes nothing. A line that failed for want of an answer (a 5xx, an
expired batch, a verdict that did not parse) goes into the next files while it has attempts left
(MAX_ATTEMPTS, GRADER_PARSE_ATTEMPTS); a 4xx no retry cures is an error at once.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from hbtui.analysis.progress import Tally
from hbtui.client.chat import ModelQuirks, batch_line_result, request_body
from hbtui.client.wire import ChatError, ChatRequest
from hbtui.core.batch_files import (
    GENERATE_FILE,
    GRADE_FILE,
    MAX_BYTES,
    MAX_LINES,
    PLAN_KEY,
    BatchFiles,
    file_name,
    generation_id,
    grading_id,
)
from hbtui.core.calls import CHAT_API, GENERATION, GRADING
from hbtui.core.errors import RETRIED_KINDS, UNPARSEABLE
from hbtui.core.fidelity import describe_requests
from hbtui.core.grading import (
    Template,
    fill_criterion,
    graded_conversation,
    grader_messages,
    parse_verdict,
    verdict_format,
    with_conversation,
)
from hbtui.core.settings.config import Settings
from hbtui.core.verdict_cache import RequestKeys
from hbtui.core.verdicts import AWAITING_BATCH, ERROR, FAILED, GENERATED, MET, NOT_MET, PENDING
from hbtui.engine.batch_output import CheckedOutput, Imported, OutputLine
from hbtui.engine.run_finish import record_end, settle
from hbtui.store import RunRow, Store
from hbtui.store.work import ReplyResult, ResultBatch, VerdictResult, WorkItem

ROUTES = {CHAT_API: "/v1/chat/completions", "responses": "/v1/responses"}
# Lines that got no answer that counts: asked again in the next files while attempts are left.
RETRYABLE = RETRIED_KINDS | {UNPARSEABLE}


@dataclass(slots=True)
class Written:
    """The request files written: how many requests each stage has, and the files."""

    generate: int = 0
    grade: int = 0
    files: list[Path] = field(default_factory=list)


def batch_keys(settings: Settings, template: Template, batch: BatchFiles) -> RequestKeys:
    """The verdict cache's keys of a batch-files run: its label where a call's endpoint goes. A run
    through a provider's batch API asks the endpoint a call would: its keys are a call's."""
    if batch.online:
        return RequestKeys(settings, template)
    return RequestKeys(settings, template, endpoint=f"batch-files:{batch.label}")


def answered_by(settings: Settings, batch: BatchFiles) -> tuple[str, str]:
    """What the replies' and the verdicts' endpoint column names: the label of a batch-files run,
    the endpoints of a run through a provider's batch API."""
    if batch.online:
        test = settings.test_endpoints
        grader = settings.grader_endpoints
        return (test[0][0] if test else "") + " (batch)", (grader[0][0] if grader else "") + " (batch)"
    return f"batch-files:{batch.label}", f"batch-files:{batch.label}"


def generation_line(settings: Settings, keys: RequestKeys, batch: BatchFiles, item: WorkItem) -> dict:
    request = ChatRequest(
        settings.model_test or "",
        keys.sent_messages(item.prompt),
        settings.temperature_test,
        settings.max_tokens_test,
        settings.reasoning_test,
        None,
        GENERATION,
        api=settings.api_test,
    )
    return {
        "custom_id": generation_id(batch.token, item.position, item.repeat),
        "method": "POST",
        "url": ROUTES[settings.api_test],
        "body": request_body(request, ModelQuirks()),
    }


def grading_lines(settings: Settings, template: Template, keys: RequestKeys, batch: BatchFiles, item: WorkItem):
    """The grader's requests of one conversation's criteria still pending, as the engine asks
    them (hbtui.core.grading.grade_as_configured)."""
    # The conversation rendered and put in the template once, for every criterion.
    conversation_filled = with_conversation(
        template, graded_conversation(keys.sent_messages(item.prompt), item.reply or "")
    )
    response_format = verdict_format(settings.grader_explanation_chars) if settings.grader_json_schema else None
    for idx, text, points in item.criteria:
        prompt = fill_criterion(template, conversation_filled, points, text)
        request = ChatRequest(
            settings.model_grader or "",
            grader_messages(prompt, settings.system_message_grader),
            settings.temperature_grader,
            settings.max_tokens_grader,
            settings.reasoning_grader,
            response_format,
            GRADING,
            api=settings.api_grader,
        )
        yield {
            "custom_id": grading_id(batch.token, item.position, item.repeat, idx),
            "method": "POST",
            "url": ROUTES[settings.api_grader],
            "body": request_body(request, ModelQuirks()),
        }


# Characters a reader may take for a line's end (Python's str.splitlines does) though JSON lets
# them stand raw inside a string: escaped, so that a request is one line to any reader. A record
# of the main subset holds a U+2028.
LINE_BREAKERS = (("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\x85", "\\u0085"))


def jsonl_line(value: dict) -> str:
    """One JSON line that no reader splits: the same JSON value, its line breakers escaped. (Looked
    for first: str.translate over 60,000 grader prompts took three times the whole import.)"""
    text = json.dumps(value, ensure_ascii=False)
    for raw, escaped in LINE_BREAKERS:
        if raw in text:
            text = text.replace(raw, escaped)
    return text


class _Files:
    """Request files of one stage, a new file past a provider's limits (lines, bytes)."""

    def __init__(self, folder: Path, base: str) -> None:
        self.folder, self.base = folder, base
        self.number, self.lines, self.bytes = 0, 0, 0
        self.handle: BinaryIO | None = None
        self.written: list[Path] = []
        self.requests: list[list[tuple[int, int]]] = []  # each file's (conversation id, idx; a reply -1)
        self.count = 0

    def add(self, line: dict, request: tuple[int, int] = (0, 0)) -> None:
        data = (jsonl_line(line) + "\n").encode()
        if self.handle is None or self.lines >= MAX_LINES or self.bytes + len(data) > MAX_BYTES:
            self._next()
        assert self.handle is not None
        self.handle.write(data)
        self.requests[-1].append(request)
        self.lines += 1
        self.bytes += len(data)
        self.count += 1

    def _next(self) -> None:
        self.close()
        self.number += 1
        path = self.folder / file_name(self.base, self.number)
        partial = path.with_name(path.name + ".partial")
        self.handle = open(partial, "wb")
        os.chmod(partial, 0o600)
        self.written.append(path)
        self.requests.append([])
        self.lines = self.bytes = 0

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            path = self.written[-1]
            os.replace(path.with_name(path.name + ".partial"), path)  # whole, or not there
            self.handle = None


def _remove_old(folder: Path, base: str) -> None:
    """Request files an earlier write left: the next write says what is still asked."""
    stem = base.removesuffix(".jsonl")
    for old in [folder / base, *folder.glob(f"{stem}-*.jsonl")]:
        if old.exists():
            old.unlink()


async def write_request_files(store: Store, run: RunRow, settings: Settings, template: Template) -> Written:
    """The run's requests still to answer, in its folder: the replies still missing into
    generate-requests.jsonl, the criteria of the replies it holds into grade-requests.jsonl."""
    batch = BatchFiles.of(run.plan)
    assert batch is not None
    batch.folder.mkdir(parents=True, exist_ok=True)
    keys = batch_keys(settings, template, batch)
    _remove_old(batch.folder, GENERATE_FILE)
    _remove_old(batch.folder, GRADE_FILE)
    generate, grade = _Files(batch.folder, GENERATE_FILE), _Files(batch.folder, GRADE_FILE)
    after = -1
    try:
        while page := await store.pending_work(run.id, after):
            for item in page:
                if item.reply is None:
                    generate.add(generation_line(settings, keys, batch, item))
                else:
                    for line in grading_lines(settings, template, keys, batch, item):
                        grade.add(line)
            after = page[-1].position
    finally:
        generate.close()
        grade.close()
    return Written(generate.count, grade.count, generate.written + grade.written)


async def start_batch_files(
    store: Store, run_id: int, settings: Settings, template: Template, folder: Path, label: str
) -> Written:
    """A run just planned made a batch-files run: its folder, label and token recorded, its
    request files written, and the run left awaiting their answers."""
    batch = BatchFiles(folder.resolve(), label, secrets.token_hex(4))
    await store.set_plan_entry(run_id, PLAN_KEY, batch.as_plan())
    run = await store.get_run(run_id)
    written = await write_request_files(store, run, settings, template)
    requests = describe_requests(settings, template.name, template.sha256, {f"answered through batch files ({label})"})
    await store.finish_run(run_id, AWAITING_BATCH, requests=requests)
    return written


def run_settings(run: RunRow, current: Settings) -> Settings:
    """The settings a batch-files run was made with (no endpoint, no key: none is called), with
    this machine's database and cache."""
    stored: dict[str, Any] = {key: value for key, value in run.settings.items() if key in Settings.__dataclass_fields__}
    stored.update(api_key=None, grader_api_key=None, db_path=current.db_path, cache_dir=current.cache_dir)
    return Settings(**stored)


STORE_CHUNK = 5_000  # output lines stored a transaction at a time: the file is never held whole


async def store_output(
    store: Store,
    run: RunRow,
    settings: Settings,
    template: Template,
    checked: CheckedOutput,
    lease: str,
    batch: BatchFiles | None = None,
) -> Imported:
    """Store what a checked output file answers of ``run`` (taken by the caller under ``lease``):
    only requests still unanswered, so that a file imported twice changes nothing (nor a file
    imported again after a process died halfway through it)."""
    batch = batch or BatchFiles.of(run.plan)
    assert batch is not None
    done = Imported()
    lines = checked.read()
    while chunk := list(islice(lines, STORE_CHUNK)):
        await _store_lines(store, run, settings, template, checked, lease, batch, chunk, done)
    return done


async def _store_lines(
    store: Store,
    run: RunRow,
    settings: Settings,
    template: Template,
    checked: CheckedOutput,
    lease: str,
    batch: BatchFiles,
    lines: list[OutputLine],
    done: Imported,
) -> None:
    reply_endpoint, verdict_endpoint = answered_by(settings, batch)
    conversations, verdicts = checked.conversations, checked.verdicts
    now = time.time()
    replies: list[ReplyResult] = []
    graded: list[OutputLine] = []
    for line in lines:
        conversation_id, status, _ = conversations[(line.position, line.repeat)]
        if line.idx is None:
            if status != PENDING:
                done.already += 1
                continue
            replies.append(_reply(conversation_id, line, settings, reply_endpoint, now))
        elif verdicts.get((conversation_id, line.idx)) != PENDING or status != GENERATED:
            done.already += 1
        else:
            graded.append(line)
    keys = batch_keys(settings, template, batch)
    needed = sorted({conversations[(line.position, line.repeat)][0] for line in graded})
    held = await store.graded_conversations(needed) if needed else {}
    results: list[VerdictResult] = []
    digests: dict[int, str] = {}  # a conversation's, once for all its criteria
    for line in graded:
        conversation_id = conversations[(line.position, line.repeat)][0]
        repeat, reply, record = held[conversation_id]
        if conversation_id not in digests:
            digests[conversation_id] = keys.digest(record["prompt"], reply or "")
        idx = line.idx if line.idx is not None else -1  # a grading line: it names its criterion
        rubric = record["rubrics"][idx]
        criterion = [(idx, rubric["criterion"], rubric["points"])]
        key = keys.keys(digests[conversation_id], repeat, criterion)[idx]
        results.append(_verdict(conversation_id, line, settings, verdict_endpoint, key, now))
    for reply_result in replies:
        if reply_result.status == GENERATED:
            done.replies += 1
        elif reply_result.error_kind in RETRYABLE:
            done.no_answer += 1
        else:
            done.failed += 1
    for result in results:
        if result.status in (MET, NOT_MET):
            done.verdicts += 1
        elif result.error_kind in RETRYABLE:
            done.no_answer += 1
        else:
            done.failed += 1
    await store.write_batch(ResultBatch(replies=replies, verdicts=results), run_id=run.id, lease=lease)


def _reply(conversation_id: int, line: OutputLine, settings: Settings, endpoint: str, now: float) -> ReplyResult:
    if line.status is None:  # never ran: an expired or cancelled batch's line
        return ReplyResult(conversation_id, FAILED, now, error=line.error, error_kind=line.error_kind, attempts=1)
    try:
        answer = batch_line_result(line.status, line.body, api=settings.api_test, json_schema=False, attempts=1)
    except ChatError as exc:
        return ReplyResult(conversation_id, FAILED, now, error=exc.message, error_kind=exc.kind, attempts=1)
    return ReplyResult(
        conversation_id,
        GENERATED,
        now,
        reply=answer.content,
        reasoning=answer.reasoning,
        finish_reason=answer.finish_reason,
        attempts=1,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        endpoint=endpoint,
    )


def _verdict(
    conversation_id: int, line: OutputLine, settings: Settings, endpoint: str, key: str, now: float
) -> VerdictResult:
    assert line.idx is not None
    if line.status is None:
        return VerdictResult(
            ERROR, conversation_id, line.idx, error=line.error, error_kind=line.error_kind, attempts=1, graded_at=now
        )
    try:
        answer = batch_line_result(
            line.status, line.body, api=settings.api_grader, json_schema=settings.grader_json_schema, attempts=1
        )
    except ChatError as exc:
        return VerdictResult(
            ERROR, conversation_id, line.idx, error=exc.message, error_kind=exc.kind, attempts=1, graded_at=now
        )
    verdict = parse_verdict(answer.content)
    return VerdictResult(
        ERROR if verdict is None else MET if verdict.criteria_met else NOT_MET,
        conversation_id,
        line.idx,
        None if verdict is None else key,
        None if verdict is None else verdict.explanation,
        answer.content,
        answer.reasoning,
        error="no verdict in the grader's answer" if verdict is None else None,
        error_kind=UNPARSEABLE if verdict is None else None,
        attempts=1,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        graded_at=now,
        endpoint=endpoint,
    )


async def after_import(
    store: Store, run: RunRow, settings: Settings, template: Template, lease: str, sha256: str
) -> tuple[Written | None, int]:
    """The run's next step once an import is stored: the file recorded as imported; the lines
    that got no answer back in its queue while they have attempts left (how many: the second
    value); then the next request files (the run awaits them again), or, with nothing left to
    ask, its end and its request files gone (None)."""
    batch = BatchFiles.of(run.plan)
    assert batch is not None
    await store.set_plan_entry(run.id, PLAN_KEY, replace(batch, imported=(*batch.imported, sha256)).as_plan())
    replies, verdicts = await store.reset_batch_failures(
        run.id, RETRYABLE, settings.max_attempts, settings.grader_parse_attempts
    )
    await store.refresh_summaries(run.id)
    left = Tally.from_progress(await store.progress(run.id))
    if left.conversations_left or left.criteria_left:
        written = await write_request_files(store, await store.get_run(run.id), settings, template)
        await store.finish_run(run.id, AWAITING_BATCH, lease=lease)
        return written, replies + verdicts
    _remove_old(batch.folder, GENERATE_FILE)  # all answered: nothing of them is asked any more
    _remove_old(batch.folder, GRADE_FILE)
    settled = await settle(store, run)
    await record_end(
        store,
        run.id,
        settled,
        lease=lease,
        requests=run.requests or describe_requests(settings, template.name, template.sha256),
        runs_root=Path(settings.db_path).parent,
    )
    return None, replies + verdicts
