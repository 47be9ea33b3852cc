"""A meta-eval run's rows: stored in one transaction, graded a batch at a time (each batch fenced
by the driver's lease, as a model run's results are), and read back for the metrics and screens."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hbtui.core.errors import TRANSIENT_KINDS
from hbtui.core.run_kinds import META_EVAL
from hbtui.core.run_records import MetaEvalReport
from hbtui.core.verdicts import ERROR, MET, NOT_MET, PENDING
from hbtui.store.rows import select_list, verdict_met
from hbtui.store.writes import StoreWrites

INSERT_CHUNK = 500  # rows read, parsed and inserted at a time: what a 29,511-row file holds in memory at once


class PlannedMetaRow(Protocol):
    """What the store needs of a row to grade (hbtui.meta_eval.data.MetaRow), read-only."""

    @property
    def line(self) -> int: ...
    @property
    def prompt(self) -> tuple[dict, ...]: ...
    @property
    def completion(self) -> str: ...
    @property
    def rubric(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def labels(self) -> tuple[bool, ...]: ...
    @property
    def physician_ids(self) -> tuple[str, ...]: ...
    @property
    def prompt_id(self) -> str | None: ...
    @property
    def completion_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class MetaEvalWork:
    row_id: int
    position: int
    prompt: list[dict]
    completion: str
    rubric: str


@dataclass(frozen=True, slots=True)
class MetaEvalResult:
    """A row's grading: MET or NOT_MET with the grader's explanation, or ERROR with why."""

    row_id: int
    status: str
    explanation: str | None = None
    raw_output: str | None = None
    reasoning: str | None = None
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    graded_at: float = 0.0


@dataclass(frozen=True, slots=True)
class MetaEvalRowView:
    """One row as the screens and `show` present it: the grader's verdict beside the physicians'."""

    row_id: int
    position: int
    line: int
    prompt: list[dict]
    completion: str
    rubric: str
    category: str
    labels: tuple[bool, ...]
    physician_ids: tuple[str, ...]
    status: str
    explanation: str | None
    error: str | None

    @property
    def grader(self) -> bool | None:
        return verdict_met(self.status)


VIEW_COLUMNS = select_list(
    MetaEvalRowView, "r", {"row_id": "r.id", "prompt": "t.prompt_json", "completion": "t.completion"}
)
WORK_COLUMNS = select_list(
    MetaEvalWork, "r", {"row_id": "r.id", "prompt": "t.prompt_json", "completion": "t.completion"}
)


# The physicians who said met, of a row's labels (JSON true is 1 to json_each).
MET_LABELS = "(SELECT count(*) FROM json_each(r.labels) WHERE json_each.value = 1)"


def _view(row: dict[str, Any]) -> MetaEvalRowView:
    """A row read by name (VIEW_COLUMNS); the JSON columns decoded."""
    return MetaEvalRowView(
        **{
            **row,
            "prompt": json.loads(row["prompt"]),
            "labels": tuple(json.loads(row["labels"])),
            "physician_ids": tuple(json.loads(row["physician_ids"])),
        }
    )


def _text_key(prompt: Sequence[dict], completion: str) -> tuple[str, str]:
    body = json.dumps(list(prompt), ensure_ascii=False)
    return hashlib.sha256(json.dumps([body, completion]).encode("utf-8", "surrogatepass")).hexdigest(), body


class StoreMetaEval(StoreWrites):
    """The writes and reads of meta-eval runs, beside a model run's."""

    async def create_meta_eval_run(
        self,
        *,
        name: str | None,
        name_base: str,
        dataset_name: str,
        dataset_path: str | None,
        dataset_sha256: str,
        model_grader: str,
        settings: dict,
        plan: dict,
        chunks: AsyncIterable[Sequence[tuple[int, PlannedMetaRow]]],
    ) -> int:
        """The run and every row (given a chunk at a time, as they are read), in one
        transaction: a file that fails halfway (a bad line found late, a full disk) leaves
        nothing behind."""
        db = self.db
        async with self._transaction():
            name = await self._free_name(name, name_base)
            cursor = await db.execute(
                "INSERT INTO runs (name, status, created_at, dataset_name, dataset_path, dataset_sha256, model_test,"
                " model_grader, settings_json, plan_json, n_conversations, n_criteria, kind)"
                " VALUES (?, 'pending', ?, ?, ?, ?, '', ?, ?, ?, 0, 0, ?)",
                (
                    name,
                    time.time(),
                    dataset_name,
                    dataset_path,
                    dataset_sha256,
                    model_grader,
                    json.dumps(settings),
                    json.dumps(plan),
                    META_EVAL,
                ),
            )
            run_id = cursor.lastrowid
            assert run_id is not None
            count = 0
            async for chunk in chunks:
                count += await self._insert_meta_rows(run_id, chunk)
            await db.execute("UPDATE runs SET n_conversations = ?, n_criteria = ? WHERE id = ?", (count, count, run_id))
        return run_id

    async def _insert_meta_rows(self, run_id: int, chunk: Sequence[tuple[int, PlannedMetaRow]]) -> int:
        if not chunk:
            return 0
        db = self.db
        keys = [_text_key(row.prompt, row.completion) for _, row in chunk]
        await db.executemany(
            "INSERT OR IGNORE INTO meta_eval_texts (sha256, prompt_json, completion) VALUES (?, ?, ?)",
            [(key, body, row.completion) for (key, body), (_, row) in zip(keys, chunk)],
        )
        ids = dict(
            await self._all(
                "SELECT sha256, id FROM meta_eval_texts WHERE sha256 IN (SELECT value FROM json_each(?))",
                (json.dumps([key for key, _ in keys]),),
            )
        )
        await db.executemany(
            "INSERT INTO meta_eval_rows (run_id, position, line, text_id, rubric, category, labels, physician_ids,"
            " prompt_id, completion_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    position,
                    row.line,
                    ids[key],
                    row.rubric,
                    row.category,
                    json.dumps(list(row.labels)),
                    json.dumps(list(row.physician_ids)),
                    row.prompt_id,
                    row.completion_id,
                )
                for (key, _), (position, row) in zip(keys, chunk)
            ],
        )
        return len(chunk)

    async def reset_meta_eval_failures(self, run_id: int, kinds: Iterable[str] | None = TRANSIENT_KINDS) -> int:
        """Rows whose grading failed for one of ``kinds`` (by default: got no answer, work still
        missing) become pending again; ``None``: every failed row (regrade-errors)."""
        kinds = list(kinds) if kinds is not None else None
        which = "" if kinds is None else f" AND error_kind IN ({','.join('?' * len(kinds))})"
        cursor = await self.db.execute(
            f"UPDATE meta_eval_rows SET status = '{PENDING}', error = NULL, error_kind = NULL"
            f" WHERE run_id = ? AND status = '{ERROR}'{which}",
            (run_id, *(kinds or ())),
        )
        await self.db.commit()
        return cursor.rowcount

    async def meta_eval_work(self, run_id: int) -> list[MetaEvalWork]:
        """The rows still to grade, in the order the reference grades them."""
        rows = await self._all_named(
            f"SELECT {WORK_COLUMNS} FROM meta_eval_rows r"
            f" JOIN meta_eval_texts t ON t.id = r.text_id WHERE r.run_id = ? AND r.status = '{PENDING}'"
            " ORDER BY r.position",
            (run_id,),
        )
        return [MetaEvalWork(**{**row, "prompt": json.loads(row["prompt"])}) for row in rows]

    async def write_meta_eval_results(self, run_id: int, lease: str, results: Sequence[MetaEvalResult]) -> None:
        """One batch, on condition that ``lease`` still holds the run (else RunTakenOver)."""
        async with self._transaction():
            await self._fence(run_id, lease)
            await self.db.executemany(
                "UPDATE meta_eval_rows SET status = ?, explanation = ?, raw_output = ?, reasoning = ?, error = ?,"
                " error_kind = ?, attempts = attempts + ?, latency_ms = ?,"
                " prompt_tokens = coalesce(prompt_tokens, 0) + coalesce(?, 0),"
                " completion_tokens = coalesce(completion_tokens, 0) + coalesce(?, 0), graded_at = ?"
                " WHERE id = ? AND run_id = ?",
                [
                    (
                        r.status,
                        r.explanation,
                        r.raw_output,
                        r.reasoning,
                        r.error,
                        r.error_kind,
                        r.attempts,
                        r.latency_ms,
                        r.prompt_tokens,
                        r.completion_tokens,
                        r.graded_at,
                        r.row_id,
                        run_id,
                    )
                    for r in results
                ],
            )

    async def meta_eval_counts(self, run_id: int) -> dict[str, int]:
        """Rows by status (pending, met, not_met, error), and tokens spent."""
        counts = {PENDING: 0, MET: 0, NOT_MET: 0, ERROR: 0}
        for status, count in await self._all(
            "SELECT status, count(*) FROM meta_eval_rows WHERE run_id = ? GROUP BY status", (run_id,)
        ):
            counts[status] = count
        return counts

    async def meta_eval_labels(self, run_id: int) -> list[tuple[str, str, str, str]]:
        """(labels JSON, physician ids JSON, category, status) of every row, in order: the metrics' input."""
        return await self._all(
            "SELECT labels, physician_ids, category, status FROM meta_eval_rows WHERE run_id = ? ORDER BY position",
            (run_id,),
        )

    async def meta_eval_rows(
        self, run_id: int, offset: int = 0, limit: int = 100, *, disagreements_only: bool = False
    ) -> list[MetaEvalRowView]:
        """A page of rows in order; ``disagreements_only``: those whose verdict goes against
        the physicians' majority (a tie is no majority)."""
        against = (
            f" AND ((r.status = '{MET}' AND 2 * {MET_LABELS} < json_array_length(r.labels))"
            f" OR (r.status = '{NOT_MET}' AND 2 * {MET_LABELS} > json_array_length(r.labels)))"
            if disagreements_only
            else ""
        )
        rows = await self._all_named(
            f"SELECT {VIEW_COLUMNS} FROM meta_eval_rows r JOIN meta_eval_texts t ON t.id = r.text_id"
            f" WHERE r.run_id = ?{against} ORDER BY r.position LIMIT ? OFFSET ?",
            (run_id, limit, offset),
        )
        return [_view(r) for r in rows]

    async def finish_meta_eval(
        self, run_id: int, status: str, *, lease: str, summary: MetaEvalReport | None, error: str | None = None
    ) -> None:
        """The run's end with its report; only while ``lease`` still holds it."""
        async with self._transaction():
            await self._fence(run_id, lease)
            await self.db.execute(
                "UPDATE runs SET status = ?, error = ?, finished_at = ?, meta_eval_json = coalesce(?, meta_eval_json),"
                " score = coalesce(?, score), owner = NULL, lease = NULL, heartbeat_at = NULL WHERE id = ?",
                (
                    status,
                    error,
                    time.time(),
                    json.dumps(summary) if summary is not None else None,
                    summary.get("pairwise_model_f1_balanced") if summary else None,
                    run_id,
                ),
            )

    async def create_meta_eval_regrade(
        self, source_id: int, *, name: str | None, name_base: str, model_grader: str, settings: dict
    ) -> int:
        """A new meta-eval of the same rows (the same conversations, rubrics and physicians'
        labels, in the same order) for another grader, linked to its source."""
        db = self.db
        async with self._transaction():
            name = await self._free_name(name, name_base)
            run_id = await self._insert_regrade_run(source_id, name, model_grader, settings, kind=None, model_test="")
            await db.execute(
                "INSERT INTO meta_eval_rows (run_id, position, line, text_id, rubric, category, labels,"
                " physician_ids, prompt_id, completion_id) SELECT ?, position, line, text_id, rubric, category,"
                " labels, physician_ids, prompt_id, completion_id FROM meta_eval_rows WHERE run_id = ?",
                (run_id, source_id),
            )
        return run_id

    async def meta_eval_pairing(self, run_id: int) -> list[tuple[str, str, str, str, str]]:
        """(key, labels, physician ids, category, status) of each row; the key is the same for the
        same row in any meta-eval (its conversation and completion, line and rubric)."""
        return await self._all(
            "SELECT text_id || ':' || line || ':' || rubric, labels, physician_ids, category, status"
            " FROM meta_eval_rows WHERE run_id = ? ORDER BY position",
            (run_id,),
        )
