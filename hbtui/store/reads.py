"""The store's queries: runs, progress, scoring inputs, and the pages the screens and exports read.

Longer than most modules (about 550 lines) because it holds the reads of the commands and the
browser, each one SQL query beside the row type it fills; the browser's own reads are in
browse_reads.py and search.py.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator

from hbtui.core.json_reading import read_json
from hbtui.core.numbering import conversation_label, criterion_label
from hbtui.core.run_kinds import IMPORTED, MODEL_RUN
from hbtui.core.scoring import ConversationInput, GradedCriterion
from hbtui.core.verdicts import FAILED, GENERATED, PENDING
from hbtui.store.rows import (
    ERROR,
    EXPORT_CONVERSATION_COLUMNS,
    EXPORT_VERDICT_COLUMNS,
    MET,
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    SUMMARY_FIELDS,
    ConversationDetail,
    ConversationFilter,
    ConversationSummary,
    ConversationTokens,
    ExportConversation,
    ExportVerdict,
    Progress,
    RunNotFound,
    RunRow,
    StoreError,
    VerdictRow,
    run_from_row,
    verdict_met,
)
from hbtui.store.search import SORTS
from hbtui.store.search_hits import StoreSearchHits
from hbtui.store.work import WORK_PAGE, CachedVerdict, WorkItem


def _of_run(run_id: int, positions: range | None, alias: str = "") -> tuple[str, tuple[int, ...]]:
    """A WHERE condition on a run's conversations (``alias``: their table's, dot included): every
    one, or those at ``positions`` in its plan; and its parameters."""
    if positions is None:
        return f"{alias}run_id = ?", (run_id,)
    return (
        f"{alias}run_id = ? AND {alias}position >= ? AND {alias}position < ?",
        (run_id, positions.start, positions.stop),
    )


@functools.lru_cache(maxsize=4096)
def parsed_tags(text: str) -> tuple[str, ...]:
    """A criterion's tags: the same few hundred JSON lists over and over (61,649 parses in a regrade)."""
    return tuple(json.loads(text))


def answered_by_model(answers: str, failure: str, unanswered_kinds: int) -> str:
    """A condition on the rows a model gave: an answer, or a failure of its own (a refusal), not
    a failure of one of the ``unanswered_kinds`` kinds given as parameters (no model reached)."""
    marks = ",".join("?" * unanswered_kinds)
    return f"(status IN ({answers}) OR (status = '{failure}' AND coalesce(error_kind, '') NOT IN ({marks})))"


class StoreReads(StoreSearchHits):
    async def _filter_where(self, run_id: int, flt: ConversationFilter | None) -> tuple[str, list]:
        """The filter's SQL; a search's conversations found once for its text (search_hits.py)."""
        if flt is not None and flt.text:
            return flt.where((await self.search_hits(run_id, flt.text)).conversations_json)
        return (flt or ConversationFilter()).where()

    """Reading a run: for reports, screens, exports and the engine's plan of what is left."""

    async def list_runs(self) -> list[RunRow]:
        runs = [run_from_row(r) for r in await self._all_named(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC")]
        without = [run.id for run in runs if run.report is None and run.meta_eval is None]
        if without:  # few: the runs stopped or going (conversations_by_score answers the count)
            marks = ",".join("?" * len(without))
            counted = dict(
                await self._all(
                    f"SELECT run_id, count(*) FROM conversations WHERE run_id IN ({marks}) AND score IS NOT NULL"
                    " GROUP BY run_id",
                    tuple(without),
                )
            )
            for run in runs:
                if run.id in counted:
                    run.scored_so_far = counted[run.id]
        return runs

    async def get_run(self, run_id: int) -> RunRow:
        row = await self._one_named(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise RunNotFound(f"no run with id {run_id} in {self.path}")
        return run_from_row(row)

    async def control(self, run_id: int) -> str | None:
        """What was last asked of a running run's driver: 'paused', 'cancelled', or None (run)."""
        row = await self._one("SELECT control FROM runs WHERE id = ?", (run_id,))
        return row[0] if row else None

    async def resolve_run(self, ref: str | int) -> RunRow:
        """A run by id, unique name, or ``latest``."""
        text = str(ref).strip()
        if text == "latest":
            row = await self._one_named(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC LIMIT 1")
            if row is None:
                raise RunNotFound(f"no runs in {self.path} yet")
            return run_from_row(row)
        row = await self._one_named(f"SELECT {RUN_COLUMNS} FROM runs WHERE name = ?", (text,))
        if row is None and text.isdigit():
            row = await self._one_named(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (int(text),))
        if row is None:
            raise RunNotFound(f"no run {text!r} in {self.path} (give an id, a name, or latest; see `hbtui runs`)")
        return run_from_row(row)

    async def pending_work(self, run_id: int, after: int = -1, limit: int = WORK_PAGE) -> list[WorkItem]:
        """Up to ``limit`` conversations past position ``after`` without a reply, or with verdicts
        still pending, in plan order: the engine reads a run's work a page at a time, so that
        what it holds does not grow with the run."""
        conversations = await self._all(
            "SELECT c.id, c.position, c.status, c.reply, c.record_id, c.repeat FROM conversations c"
            " WHERE c.run_id = ? AND c.position > ? AND c.status != 'failed'"
            " AND (c.status = 'pending' OR EXISTS (SELECT 1 FROM verdicts v WHERE v.conversation_id = c.id"
            " AND v.status = 'pending')) ORDER BY c.position LIMIT ?",
            (run_id, after, limit),
        )
        if not conversations:
            return []
        # Each record once a page, not once per repeat: a record holds its ideal completions too.
        records = {
            record_id: read_json(body)  # a third of json.loads' time, read a page at a time during the calls
            for record_id, body in await self._all(
                "SELECT id, body FROM records WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted({record_id for _, _, _, _, record_id, _ in conversations})),),
            )
        }
        verdicts: dict[int, list[tuple]] = {}
        for conv_id, idx, points, status in await self._all(
            "SELECT conversation_id, idx, points, status FROM verdicts"
            " WHERE conversation_id IN (SELECT value FROM json_each(?)) ORDER BY conversation_id, idx",
            (json.dumps([conv_id for conv_id, *_ in conversations]),),
        ):
            verdicts.setdefault(conv_id, []).append((idx, points, status))
        return [
            WorkItem.of(
                conv_id,
                position,
                repeat,
                records[record_id],
                reply if status == GENERATED else None,
                verdicts.get(conv_id, []),
            )
            for conv_id, position, status, reply, record_id, repeat in conversations
        ]

    async def scoring_inputs(self, run_id: int, positions: range | None = None) -> list[ConversationInput]:
        """Each conversation's scoring input in plan order; ``positions``: only those."""
        conversations_of, args = _of_run(run_id, positions)
        # A whole run's verdicts by their own run_id (its index), a stretch's through its conversations.
        verdicts_of = (
            "run_id = ?"
            if positions is None
            else f"conversation_id IN (SELECT id FROM conversations WHERE {conversations_of})"
        )
        conversations = await self._all(
            f"SELECT id, status, example_tags FROM conversations WHERE {conversations_of} ORDER BY position", args
        )
        criteria: dict[int, list[GradedCriterion]] = {}
        errors: dict[int, int] = {}
        for conv_id, points, tags, status in await self._all(
            f"SELECT conversation_id, points, tags, status FROM verdicts WHERE {verdicts_of}"
            " ORDER BY conversation_id, idx",
            args,
        ):
            criteria.setdefault(conv_id, []).append(GradedCriterion(points, parsed_tags(tags), verdict_met(status)))
            if status == ERROR:
                errors[conv_id] = errors.get(conv_id, 0) + 1
        return [
            ConversationInput(
                example_tags=json.loads(tags),
                criteria=criteria.get(conv_id, []),
                excluded=status == FAILED,
                errors=errors.get(conv_id, 0),
            )
            for conv_id, status, tags in conversations
        ]

    async def conversations_unsettled(self, run_id: int, positions: range) -> int:
        """Conversations at ``positions`` without their reply yet, or with their reply but not yet
        the summary that is written with their last verdict."""
        of_stretch, args = _of_run(run_id, positions)
        (count,) = await self._one(
            f"SELECT count(*) FROM conversations WHERE {of_stretch}"
            " AND (status = 'pending' OR (status = 'generated' AND n_met IS NULL))",
            args,
        )
        return count

    async def completion_groups(self, run_id: int) -> list[str | None]:
        """Each conversation's physicians' group in plan order (as ``scoring_inputs`` lists
        them): set where the reply is a record's own completion, None for a model's reply."""
        return [
            group
            for (group,) in await self._all(
                "SELECT completion_group FROM conversations WHERE run_id = ? ORDER BY position", (run_id,)
            )
        ]

    async def progress(self, run_id: int) -> Progress:
        conv = dict(
            await self._all("SELECT status, count(*) FROM conversations WHERE run_id = ? GROUP BY status", (run_id,))
        )
        scored = (
            await self._one("SELECT count(*) FROM conversations WHERE run_id = ? AND score IS NOT NULL", (run_id,))
        )[0]
        verdict_counts = dict(
            await self._all("SELECT status, count(*) FROM verdicts WHERE run_id = ? GROUP BY status", (run_id,))
        )
        # Criteria of a conversation that got no reply will never be graded: they are not work left.
        unreachable = (
            await self._one(
                "SELECT coalesce(sum(n_criteria), 0) FROM conversations WHERE run_id = ? AND status = 'failed'",
                (run_id,),
            )
        )[0]
        kinds: dict[str, int] = {}
        for kind, count in await self._all(
            "SELECT error_kind, count(*) FROM verdicts WHERE run_id = ? AND status = 'error' GROUP BY error_kind",
            (run_id,),
        ):
            kinds[kind or "unknown"] = kinds.get(kind or "unknown", 0) + count
        for kind, count in await self._all(
            "SELECT error_kind, count(*) FROM conversations WHERE run_id = ? AND status = 'failed' GROUP BY error_kind",
            (run_id,),
        ):
            key = f"reply {kind or 'unknown'}"
            kinds[key] = kinds.get(key, 0) + count
        test_tokens = await self._one(
            "SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM conversations"
            " WHERE run_id = ?",
            (run_id,),
        )
        grader_tokens = await self._one(
            "SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM verdicts WHERE run_id = ?",
            (run_id,),
        )
        total_conv = sum(conv.values())
        total_criteria = sum(verdict_counts.values())
        return Progress(
            conversations_total=total_conv,
            conversations_generated=conv.get("generated", 0),
            conversations_failed=conv.get("failed", 0),
            conversations_scored=scored,
            criteria_total=total_criteria,
            criteria_graded=total_criteria - verdict_counts.get(PENDING, 0),
            criteria_skipped=unreachable,
            criteria_met=verdict_counts.get(MET, 0),
            criteria_errors=verdict_counts.get(ERROR, 0),
            errors_by_kind=kinds,
            prompt_tokens_test=test_tokens[0],
            completion_tokens_test=test_tokens[1],
            prompt_tokens_grader=grader_tokens[0],
            completion_tokens_grader=grader_tokens[1],
        )

    async def cached_verdicts(self, keys: list[str]) -> dict[str, CachedVerdict]:
        """Entries of the verdict cache for these request keys."""
        # One statement, the keys as one JSON array: 60,000 keys in 500-key chunks cost a third of
        # a second of round trips.
        return (
            {
                key: CachedVerdict(*entry)
                for key, *entry in await self._all(
                    "SELECT key, status, explanation, raw_output, reasoning"
                    " FROM verdict_cache WHERE key IN (SELECT value FROM json_each(?))",
                    (json.dumps(keys),),
                )
            }
            if keys
            else {}
        )

    async def has_uncached_verdicts(self, run_id: int) -> bool:
        """Whether the run has verdicts to put in the cache under its requests' keys. An imported
        run has none: hbtui never sent its requests, so no key of hbtui's can name them, and a
        regrade with a grader of the same name must ask that grader, not take the file's verdicts."""
        return bool(
            await self._one(
                "SELECT 1 FROM verdicts v JOIN runs r ON r.id = v.run_id WHERE v.run_id = ? AND r.kind != ?"
                " AND v.status IN ('met', 'not_met') AND v.cache_key IS NULL LIMIT 1",
                (run_id, IMPORTED),
            )
        )

    async def graded_for_cache(self, run_id: int) -> list[tuple[int, list[dict], str, int, list[tuple]]]:
        """(conversation id, prompt, reply, repeat, [(idx, criterion, points)]) of the verdicts
        given but not in the cache yet, the criterion and points as the record writes them."""
        rows = await self._all(
            "SELECT c.id, r.body, c.reply, c.repeat, v.idx FROM verdicts v JOIN conversations c ON c.id = v.conversation_id"
            " JOIN records r ON r.id = c.record_id WHERE v.run_id = ? AND v.status IN ('met', 'not_met')"
            " AND v.cache_key IS NULL AND c.status = 'generated' ORDER BY c.id, v.idx",
            (run_id,),
        )
        out: list[tuple[int, list[dict], str, int, list[tuple]]] = []
        for conv_id, body, reply, repeat, idx in rows:
            if not out or out[-1][0] != conv_id:
                record = json.loads(body)
                out.append((conv_id, record["prompt"], reply, repeat, []))
                rubrics = record["rubrics"]
            out[-1][4].append((idx, rubrics[idx]["criterion"], rubrics[idx]["points"]))
        return out

    async def count_from_cache(self, run_id: int) -> int:
        return (await self._one("SELECT count(*) FROM verdicts WHERE run_id = ? AND from_cache = 1", (run_id,)))[0]

    async def answered_calls(self, run_id: int) -> tuple[int, int]:
        """(replies, verdicts) a model gave: answers, refusals included; not calls that failed to
        reach it or named a model it does not serve."""
        from hbtui.core.errors import FATAL_KINDS, TRANSIENT_KINDS

        unanswered = sorted(TRANSIENT_KINDS | FATAL_KINDS)
        reply_given = answered_by_model("'generated'", "failed", len(unanswered))
        verdict_given = answered_by_model("'met', 'not_met'", "error", len(unanswered))
        replies, verdicts = await self._one(
            f"SELECT (SELECT count(*) FROM conversations WHERE run_id = ? AND {reply_given}),"
            f" (SELECT count(*) FROM verdicts WHERE run_id = ? AND {verdict_given})",
            (run_id, *unanswered, run_id, *unanswered),
        )
        return replies, verdicts

    async def gaps(self, run_id: int, transient_kinds: set[str]) -> tuple[int, int]:
        """(conversations without a reply for a transient reason, conversations with a criterion
        whose grading failed): what keeps an ended run from being finished."""
        marks = ",".join("?" * len(transient_kinds))
        no_reply = (
            await self._one(
                f"SELECT count(*) FROM conversations WHERE run_id = ? AND status = 'failed' AND error_kind IN ({marks})",
                (run_id, *transient_kinds),
            )
        )[0]
        unfinished = (
            await self._one(
                "SELECT count(DISTINCT conversation_id) FROM verdicts WHERE run_id = ? AND status = 'error'", (run_id,)
            )
        )[0]
        return no_reply, unfinished

    async def recent_latencies(self, run_id: int, limit: int = 500) -> list[float]:
        rows = await self._all(
            "SELECT latency_ms FROM verdicts WHERE run_id = ? AND graded_at IS NOT NULL AND latency_ms IS NOT NULL"
            " ORDER BY graded_at DESC LIMIT ?",
            (run_id, limit),
        )
        return [r[0] for r in rows]

    async def calls_between(self, run_id: int, start: float, end: float) -> int:
        """Answers (replies and verdicts) stored after ``start`` up to ``end``: one query."""
        (count,) = await self._one(
            "SELECT (SELECT count(*) FROM verdicts WHERE run_id = ? AND graded_at > ? AND graded_at <= ?)"
            " + (SELECT count(*) FROM conversations WHERE run_id = ? AND generated_at > ? AND generated_at <= ?)",
            (run_id, start, end, run_id, start, end),
        )
        return count

    async def recent_errors(self, run_id: int, limit: int = 20) -> list[tuple[float, str, str]]:
        """(when, kind, message): the message names where, as the browser numbers it."""
        rows = await self._all(
            "SELECT v.graded_at, v.error_kind, v.error, c.position, c.repeat, v.idx FROM verdicts v"
            " JOIN conversations c ON c.id = v.conversation_id WHERE v.run_id = ? AND v.status = 'error'"
            " UNION ALL SELECT generated_at, error_kind, error, position, repeat, NULL FROM conversations"
            " WHERE run_id = ? AND status = 'failed' ORDER BY 1 DESC LIMIT ?",
            (run_id, run_id, limit),
        )
        plan = await self._one("SELECT json_extract(plan_json, '$.repeats') FROM runs WHERE id = ?", (run_id,))
        repeats = int((plan and plan[0]) or 1)
        errors = []
        for at, kind, error, position, repeat, idx in rows:
            if idx is None:
                message = f"{conversation_label(position, repeat, repeats)}: no reply: {error or ''}"
            else:
                message = f"{criterion_label(idx, position, repeat, repeats)}: {error or 'failed to grade'}"
            errors.append((at or 0.0, kind or "unknown", message))
        return errors

    async def conversation_scores(self, run_id: int) -> list[float]:
        return [
            r[0]
            for r in await self._all(
                "SELECT score FROM conversations WHERE run_id = ? AND score IS NOT NULL ORDER BY position", (run_id,)
            )
        ]

    async def themes(self, run_id: int) -> list[str]:
        return [
            r[0]
            for r in await self._all(
                "SELECT DISTINCT theme FROM conversations WHERE run_id = ? AND theme IS NOT NULL ORDER BY theme",
                (run_id,),
            )
        ]

    async def count_conversations(self, run_id: int, flt: ConversationFilter | None = None) -> int:
        where, args = await self._filter_where(run_id, flt)
        return (await self._one(f"SELECT count(*) FROM conversations WHERE run_id = ?{where}", (run_id, *args)))[0]

    async def conversation_page(
        self,
        run_id: int,
        flt: ConversationFilter | None = None,
        sort: str = "position",
        offset: int = 0,
        limit: int = 100,
    ) -> list[ConversationSummary]:
        where, args = await self._filter_where(run_id, flt)
        rows = await self._all(
            f"SELECT {SUMMARY_COLUMNS} FROM conversations WHERE run_id = ?{where} ORDER BY {SORTS[sort]}"
            " LIMIT ? OFFSET ?",
            (run_id, *args, limit, offset),
        )
        return [ConversationSummary(*r) for r in rows]

    async def conversation_ids(
        self, run_id: int, flt: ConversationFilter | None = None, sort: str = "position"
    ) -> list[int]:
        """Ids in list order, for next/previous conversation without reloading pages."""
        where, args = await self._filter_where(run_id, flt)
        return [
            r[0]
            for r in await self._all(
                f"SELECT id FROM conversations WHERE run_id = ?{where} ORDER BY {SORTS[sort]}", (run_id, *args)
            )
        ]

    async def conversation_detail(self, conversation_id: int) -> ConversationDetail:
        row = await self._one_named(
            f"SELECT {SUMMARY_COLUMNS}, example_tags, reply, reasoning, finish_reason, error, record_id"
            " FROM conversations WHERE id = ?",
            (conversation_id,),
        )
        if row is None:
            raise StoreError("that conversation is no longer in the database (its run was deleted or changed)")
        summary = ConversationSummary(**{name: row[name] for name in SUMMARY_FIELDS})
        (body,) = await self._one("SELECT body FROM records WHERE id = ?", (row["record_id"],))
        verdicts = [
            VerdictRow(
                idx, text, points, json.loads(tags), status, explanation, raw, vreason, verror, kind, attempts, latency
            )
            for idx, text, points, tags, status, explanation, raw, vreason, verror, kind, attempts, latency in await self._all(
                "SELECT idx, criterion, points, tags, status, explanation, raw_output, reasoning, error, error_kind,"
                " attempts, latency_ms FROM verdicts WHERE conversation_id = ? ORDER BY idx",
                (conversation_id,),
            )
        ]
        return ConversationDetail(
            summary=summary,
            prompt=json.loads(body)["prompt"],
            example_tags=json.loads(row["example_tags"]),
            reply=row["reply"],
            reasoning=row["reasoning"],
            finish_reason=row["finish_reason"],
            error=row["error"],
            verdicts=verdicts,
            tokens=await self.conversation_tokens(conversation_id),
        )

    async def export_rows(
        self, run_id: int, positions: range | None = None
    ) -> AsyncIterator[tuple[ExportConversation, list[ExportVerdict]]]:
        """Conversations with their verdicts in plan order, one at a time (an export never holds a
        run whole): two cursors read side by side, conversations and verdicts in the same order,
        rather than one query per conversation (5,000 of them took a second of round trips).
        ``positions``: only the conversations at those plan positions."""
        conversations_of, args = _of_run(run_id, positions, "c.")
        verdicts_of = "v.run_id = ?" if positions is None else conversations_of
        conversations = await self.db.execute(
            f"SELECT {EXPORT_CONVERSATION_COLUMNS} FROM conversations c"
            f" JOIN records r ON r.id = c.record_id WHERE {conversations_of} ORDER BY c.position",
            args,
        )
        verdicts = await self.db.execute(
            f"SELECT {EXPORT_VERDICT_COLUMNS} FROM verdicts v JOIN conversations c ON c.id = v.conversation_id"
            f" WHERE {verdicts_of} ORDER BY c.position, v.idx",
            args,
        )
        try:
            pending: list[ExportVerdict] = []
            while rows := await conversations.fetchmany(500):
                for row in rows:
                    conversation = ExportConversation._make(row)
                    mine = []
                    while True:
                        if not pending:
                            pending = [ExportVerdict._make(v) for v in await verdicts.fetchmany(2000)][::-1]
                            if not pending:
                                break
                        if pending[-1].conversation_id != conversation.id:
                            break
                        mine.append(pending.pop())
                    yield conversation, mine
        finally:
            await conversations.close()
            await verdicts.close()

    async def repeat_outcomes(self, run_id: int) -> list[tuple[int, int, float | None]]:
        """(position, repeat, score) of every conversation: worst-at-k groups a prompt's repeats."""
        return [
            tuple(r)
            for r in await self._all(
                "SELECT position, repeat, score FROM conversations WHERE run_id = ? ORDER BY position", (run_id,)
            )
        ]

    async def scored_reply_lengths(self, run_id: int) -> list[tuple[float, int]]:
        """(score, characters of the reply as graded) of each scored conversation. Counted here
        rather than by SQLite's length(), which stops at a NUL character."""
        return [
            (score, len(reply or ""))
            for score, reply in await self._all(
                "SELECT score, reply FROM conversations WHERE run_id = ? AND score IS NOT NULL ORDER BY position",
                (run_id,),
            )
        ]

    async def usage_history(
        self, model: str, grader: bool, runs: int = 20, per_run: int = 400
    ) -> list[tuple[str, list[tuple]]]:
        """What earlier runs of ``model`` (as the grader, or as the model under test) measured,
        for an estimate: the newest ``runs`` runs of the model that made calls, each as (its
        settings' JSON, up to ``per_run`` samples). A sample of the model under test is one
        reply: (record body, reply characters, prompt tokens, completion tokens, latency ms,
        attempts). A sample of the grader is one conversation's verdicts: (record body, reply
        characters, verdicts, characters of their criteria as the template writes them ("[points]
        text"), prompt tokens, completion tokens, mean latency ms, attempts). Tokens add up over a
        request's attempts: the attempts say how many requests they were spent on."""
        column = "model_grader" if grader else "model_test"
        found = await self._all(
            f"SELECT id, settings_json FROM runs WHERE {column} = ? AND kind = ? ORDER BY id DESC LIMIT ?",
            (model, MODEL_RUN, runs),
        )
        history = []
        for run_id, settings_json in found:
            if grader:
                samples = await self._all(
                    "SELECT rec.body, length(c.reply), count(*),"
                    " sum(length(v.criterion) + length(v.points) + 3), sum(v.prompt_tokens),"
                    " sum(coalesce(v.completion_tokens, 0)), avg(v.latency_ms), sum(max(v.attempts, 1))"
                    " FROM verdicts v JOIN conversations c ON c.id = v.conversation_id"
                    " JOIN records rec ON rec.id = c.record_id"
                    " WHERE v.run_id = ? AND v.prompt_tokens > 0 GROUP BY v.conversation_id LIMIT ?",
                    (run_id, per_run),
                )
            else:
                samples = await self._all(
                    "SELECT rec.body, length(c.reply), c.prompt_tokens, coalesce(c.completion_tokens, 0), c.latency_ms,"
                    " max(c.attempts, 1)"
                    " FROM conversations c JOIN records rec ON rec.id = c.record_id"
                    " WHERE c.run_id = ? AND c.prompt_tokens > 0 LIMIT ?",
                    (run_id, per_run),
                )
            if samples:
                history.append((settings_json, samples))
        return history

    async def batch_targets(
        self, run_id: int
    ) -> tuple[dict[tuple[int, int], tuple[int, str, int]], dict[tuple[int, int], str]]:
        """What a batch output file's lines may answer in a run: (position, repeat) -> (conversation
        id, reply status, criteria), and (conversation id, idx) -> the verdict's status."""
        conversations = {
            (position, repeat): (conversation_id, status, n_criteria)
            for conversation_id, position, repeat, status, n_criteria in await self._all(
                "SELECT id, position, repeat, status, n_criteria FROM conversations WHERE run_id = ?", (run_id,)
            )
        }
        verdicts = {
            (conversation_id, idx): status
            for conversation_id, idx, status in await self._all(
                "SELECT conversation_id, idx, status FROM verdicts WHERE run_id = ?", (run_id,)
            )
        }
        return conversations, verdicts

    async def graded_conversations(self, conversation_ids: list[int]) -> dict[int, tuple[int, str | None, dict]]:
        """Conversation id -> (repeat, reply, record parsed): what a verdict's request was made of."""
        rows = await self._all(
            "SELECT c.id, c.repeat, c.reply, r.body FROM conversations c JOIN records r ON r.id = c.record_id"
            " WHERE c.id IN (SELECT value FROM json_each(?))",
            (json.dumps(conversation_ids),),
        )
        return {conversation_id: (repeat, reply, json.loads(body)) for conversation_id, repeat, reply, body in rows}

    async def reply_lengths(self, run_id: int) -> dict[int, int]:
        """Characters of each scored conversation's reply as graded, by conversation id (counted
        as ``scored_reply_lengths`` counts them)."""
        return {
            conversation_id: len(reply or "")
            for conversation_id, reply in await self._all(
                "SELECT id, reply FROM conversations WHERE run_id = ? AND score IS NOT NULL", (run_id,)
            )
        }

    async def conversation_tokens(self, conversation_id: int) -> ConversationTokens:
        reply = await self._one(
            "SELECT coalesce(prompt_tokens, 0), coalesce(completion_tokens, 0) FROM conversations WHERE id = ?",
            (conversation_id,),
        )
        verdicts = await self._all(
            "SELECT idx, coalesce(prompt_tokens, 0), coalesce(completion_tokens, 0) FROM verdicts"
            " WHERE conversation_id = ?",
            (conversation_id,),
        )
        return ConversationTokens(tuple(reply) if reply else (0, 0), {idx: (p, c) for idx, p, c in verdicts})

    async def comparison_conversations(self, run_id: int) -> list[tuple]:
        """A run's conversations as a comparison pairs them, in plan order: id, position, repeat,
        prompt_id, record sha256, theme, example_tags, status, score, completion (which of the
        record's own completions is the reply; None for a model's reply)."""
        return await self._all(
            "SELECT c.id, c.position, c.repeat, c.prompt_id, r.sha256, c.theme, c.example_tags, c.status, c.score,"
            " c.completion FROM conversations c JOIN records r ON r.id = c.record_id WHERE c.run_id = ?"
            " ORDER BY c.position",
            (run_id,),
        )

    async def comparison_verdicts(self, run_id: int) -> list[tuple]:
        """A run's verdicts as a comparison reads them, in rubric order: conversation_id, idx,
        criterion, points, tags, status."""
        return await self._all(
            "SELECT conversation_id, idx, criterion, points, tags, status FROM verdicts WHERE run_id = ?"
            " ORDER BY conversation_id, idx",
            (run_id,),
        )
