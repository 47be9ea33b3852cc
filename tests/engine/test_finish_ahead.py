"""A run's report and results.jsonl are made while its calls go on (hbtui.engine.finish_ahead):
the same report, to the last bit, and the same file, to the last byte, as a finish that reads
the whole run from the database; made from the database instead where that could differ (a
review during the run). And the writer's count of what is committed, which the reads rely on,
never runs ahead of a commit. A real server, a real SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from hbtui.core import reviews as rv
from hbtui.core.dataset import load_jsonl
from hbtui.core.events import ConversationScored
from hbtui.engine.result_writer import ResultWriter
from hbtui.render import export
from hbtui.services import Engine, compute_report, plan_run, start_run
from hbtui.store import ConversationOutcome, ConversationScore, NothingToReview, Store
from hbtui.store.owners import this_owner
from tests.conftest import make_record, settings_for, write_jsonl

AXES = ("axis:accuracy", "axis:completeness", "axis:communication_quality")


def varied_records(count: int) -> list[dict]:
    """Records with what a finish has to carry: negative and fractional points (8.0 comes back
    from SQLite as 8), criteria with several tags or none, example tags beyond the theme, and a
    long prompt every few records, which the server refuses as too long (a conversation without
    a reply)."""
    records = []
    for n in range(count):
        criteria = [
            (f"Criterion {n}.{i} about the {['dose', 'referral', 'follow-up', 'risk'][i % 4]}", points, tags)
            for i, (points, tags) in enumerate(
                [
                    (5, [AXES[n % 3], "cluster:a"]),
                    (8.0, [AXES[(n + 1) % 3]]),
                    (2.5, []),
                    (-4, [AXES[n % 3], f"level:{n % 2}"]),
                    (3, [AXES[(n + 2) % 3], "cluster:a", "cluster:b"]),
                ][: 3 + n % 3]
            )
        ]
        user = "Is this rash serious? " * (400 if n % 7 == 3 else 1)
        extra = ["physician_agreed_category:enough-context"] if n % 2 else []
        records.append(
            make_record(f"p{n:03d}", criteria, theme=["hedging", "communication"][n % 2], user=user, extra_tags=extra)
        )
    return records


class WriteJsonlCalls:
    """How often results.jsonl is made from the database (the finish's own, not made ahead)."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        made_from_database = export.write_jsonl

        async def counted(*args, **kwargs):
            self.calls += 1
            return await made_from_database(*args, **kwargs)

        monkeypatch.setattr(export, "write_jsonl", counted)


async def finish_from_the_database(db: Path, run_id: int, out: Path):
    async with await Store.open(db) as store:
        run = await store.get_run(run_id)
        await export.write_jsonl(store, run_id, out)
        return run, await compute_report(store, run_id)


@pytest.mark.parametrize("head_start", [True, False], ids=["hbtui run", "planned, then driven"])
def test_a_run_finished_ahead_has_the_report_and_results_of_a_finish_from_the_database(
    server, tmp_path, monkeypatch, head_start
):
    server.control(
        reasoning_field=True,
        truncate_generation=True,
        context_chars=4000,
        faults={"bad_json": 0.08},  # unparseable verdicts: grading errors, the run incomplete
        seed=3,
    )
    data = write_jsonl(tmp_path / "varied.jsonl", varied_records(40))
    db = tmp_path / "runs" / "hbtui.sqlite"
    db.parent.mkdir()
    settings = settings_for(server, db, concurrency=6, grader_template="builtin", grader_parse_attempts=1)
    from_database = WriteJsonlCalls(monkeypatch)

    async def go():
        async with await Store.open(db) as store:
            dataset = load_jsonl(data)
            if head_start:
                run, head = await start_run(store, settings, dataset, this_owner(), repeats=2)
            else:
                run, head = await store.get_run(await plan_run(store, settings, dataset, repeats=2)), None
            engine = Engine(store, run, settings, backoff_base=0.01, head_start=head)
            status = await engine.execute()
            return run.id, status, engine.ahead

    run_id, status, ahead = asyncio.run(go())

    assert status == "incomplete"  # scored, with its refusals and grading errors said so
    assert ahead is not None and ahead.read_to == 80 and ahead.failed is None
    assert from_database.calls == 0  # results.jsonl was made during the calls
    run, report = asyncio.run(finish_from_the_database(db, run_id, tmp_path / "from-database.jsonl"))
    assert run.report == report  # every figure, bootstraps included
    made_ahead = (Path(run.folder) / "results.jsonl").read_bytes()
    assert made_ahead == (tmp_path / "from-database.jsonl").read_bytes()
    lines = [json.loads(line) for line in made_ahead.decode().splitlines()]
    assert [(line["prompt_id"], line["repeat"]) for line in lines] == [
        (f"p{n:03d}", repeat) for repeat in (0, 1) for n in range(40)
    ]
    # What the comparison covered: refusals, grading errors, reasoning, cut replies, NUMERIC points.
    assert any("generation_error" in line for line in lines)
    assert any("error" in item for line in lines for item in line["rubrics"])
    assert all(line.get("truncated") for line in lines if "generation_error" not in line)
    assert any(line.get("reasoning") for line in lines)
    assert {item["points"] for line in lines for item in line["rubrics"]} == {5, 8, 2.5, -4, 3}
    assert report.conversations.excluded and report.conversations.incomplete


def test_a_review_made_during_the_run_is_in_its_results(server, small_dataset, tmp_path, monkeypatch):
    """results.jsonl carries reviews, which the lines made during the calls do not: the finish
    makes it from the database then, and the report (the grader's) is still the one made ahead."""
    server.control(latency_ms=60)  # 24 conversations, 2 at a time: 0.8 s at least, the review lands well within
    db = tmp_path / "runs" / "hbtui.sqlite"
    db.parent.mkdir()
    settings = settings_for(server, db, concurrency=2, grader_template="builtin")
    from_database = WriteJsonlCalls(monkeypatch)

    async def go():
        async with await Store.open(db) as store:
            run, head = await start_run(store, settings, load_jsonl(small_dataset), this_owner(), repeats=8)
            scored: asyncio.Queue[int] = asyncio.Queue()

            class Scored:
                def on_event(self, event) -> None:
                    if isinstance(event, ConversationScored):
                        scored.put_nowait(event.conversation_id)

            engine = Engine(store, run, settings, [Scored()], backoff_base=0.01, head_start=head)
            running = asyncio.create_task(engine.execute())
            first = await scored.get()
            # The reviewer's flip of the first conversation's graded criterion, once stored, through
            # a connection of its own, as the app makes it (the engine's is inside its own writes).
            async with await Store.open(db) as reviewer:
                while True:
                    try:
                        await reviewer.add_review(first, 0, "alice", rv.FLIP)
                        break
                    except NothingToReview:  # its verdict not stored yet
                        await asyncio.sleep(0.02)
            return run.id, await running, engine.ahead

    run_id, status, ahead = asyncio.run(go())

    assert status == "finished"
    assert ahead is not None and ahead.read_to == 24
    assert from_database.calls == 1  # the run's folder
    run, report = asyncio.run(finish_from_the_database(db, run_id, tmp_path / "from-database.jsonl"))
    assert run.report == report
    made = (Path(run.folder) / "results.jsonl").read_bytes()
    assert made == (tmp_path / "from-database.jsonl").read_bytes()
    assert b'"review": {"reviewed_criteria_met"' in made


def test_the_writers_count_of_what_is_committed_waits_for_the_commit(tmp_path):
    """FinishAhead reads a conversation once the writer's ``committed`` passed it: a count that
    ran ahead of the commit would have it read rows still being written."""
    entered, release = asyncio.Event(), asyncio.Event()

    class SlowCommits(Store):
        async def write_batch(self, *args, **kwargs) -> None:
            entered.set()
            await release.wait()
            await super().write_batch(*args, **kwargs)

    async def go():
        async with await SlowCommits.open(tmp_path / "runs.sqlite") as store:
            writer = ResultWriter(
                store, 1, patience=5, max_unwritten=32, on_written=lambda: None, on_warning=lambda _: None
            )
            writer.put(ConversationScore(1, ConversationOutcome(None, 0, 0, 0)))
            handed_over = writer.queued
            writing = asyncio.create_task(writer.run())
            await entered.wait()
            during = writer.committed
            writer.put(ConversationScore(2, ConversationOutcome(None, 0, 0, 0)))  # joins the next batch
            release.set()
            await writer.close()
            await writing
            return handed_over, during, writer.committed, writer.queued

    handed_over, during, after, queued = asyncio.run(go())
    assert during < handed_over  # not committed while the transaction was still open
    assert after == queued == handed_over + 1
