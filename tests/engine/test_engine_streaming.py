"""What the engine holds does not grow with the run: the plan holds one conversation a record, the
work is read a page at a time, and the garbage collector is the entry points' to set."""

import asyncio
import gc
import json

import numpy as np
import pytest

from hbtui.core.dataset import load_jsonl, sample
from hbtui.core.scoring import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, bootstrap_means
from hbtui.engine import driver
from hbtui.services import Engine, plan_run
from hbtui.store import Store
from tests.conftest import make_record, offline_settings, run_engine, settings_for, write_jsonl


def records(tmp_path, count: int):
    return write_jsonl(
        tmp_path / "many.jsonl",
        [
            make_record(f"p{i}", [(f"[[MET]] c{i}-{j}", j + 1, ["axis:accuracy"]) for j in range(i % 3 + 1)])
            for i in range(count)
        ],
    )


def test_a_repeated_plan_is_the_sample_once_per_repeat_in_order(tmp_path):
    data = records(tmp_path, 9)
    dataset = load_jsonl(data)
    settings = offline_settings(
        base_url="http://127.0.0.1:9/v1", model_test="m", model_grader="g", db_path=str(tmp_path / "db.sqlite")
    )

    async def plan():
        async with await Store.open(settings.db_path) as store:
            run_id = await plan_run(store, settings, dataset, limit=4, seed=5, repeats=3)
            conversations = await store._all(
                "SELECT position, repeat, prompt_id, n_criteria, (SELECT count(*) FROM verdicts v WHERE v.conversation_id = c.id)"
                " FROM conversations c WHERE run_id = ? ORDER BY position",
                (run_id,),
            )
            return await store.get_run(run_id), conversations

    run, conversations = asyncio.run(plan())
    chosen = sample(dataset.records, 4, 5)
    assert [r.prompt_id for r in chosen] == [r.prompt_id for r in sample(list(dataset.records), 4, 5)]
    expected = [(i, i // 4, chosen[i % 4].prompt_id) for i in range(12)]
    assert [tuple(c[:3]) for c in conversations] == expected
    assert all(c[3] == c[4] == len(chosen[c[0] % 4].rubrics) for c in conversations)
    assert (run.n_conversations, run.n_criteria) == (12, 3 * sum(len(r.rubrics) for r in chosen))


def test_pending_work_comes_in_pages_that_cover_the_run_once_in_plan_order(tmp_path):
    data = records(tmp_path, 5)
    settings = offline_settings(
        base_url="http://127.0.0.1:9/v1", model_test="m", model_grader="g", db_path=str(tmp_path / "db.sqlite")
    )

    async def pages():
        async with await Store.open(settings.db_path) as store:
            run_id = await plan_run(store, settings, load_jsonl(data), repeats=2)
            seen, after = [], -1
            while page := await store.pending_work(run_id, after, 3):
                assert len(page) <= 3
                seen.append([item.position for item in page])
                after = page[-1].position
            return seen

    assert asyncio.run(pages()) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


@pytest.mark.parametrize(
    "head_start, pages",
    [
        # Planned, then driven: a first page of 2, then 5 of at most 3 (the last holds 1), then an empty one.
        (False, [2, 3, 3, 3, 3, 3, 3]),
        # Its first calls sent as it was planned: the first 5 from the plan in memory, then the other 10.
        (True, [3, 3, 3, 3, 3]),
    ],
)
def test_a_run_of_many_pages_is_driven_to_the_end_reading_a_page_at_a_time(
    server, tmp_path, monkeypatch, head_start, pages
):
    monkeypatch.setattr(driver, "FIRST_PAGE", 2)
    monkeypatch.setattr(driver, "WORK_PAGE", 3)
    asked = []
    pending_work = Store.pending_work

    async def counted(self, run_id, after=-1, limit=256):
        asked.append(limit)
        return await pending_work(self, run_id, after, limit)

    monkeypatch.setattr(Store, "pending_work", counted)
    db = tmp_path / "db.sqlite"
    run_id, status = asyncio.run(
        run_engine(settings_for(server, db, concurrency=2), records(tmp_path, 5), repeats=3, head_start=head_start)
    )
    assert status == "finished"
    assert asked == pages  # of 15 conversations

    async def stored():
        async with await Store.open(db) as store:
            return await store.progress(run_id), await store._all(
                "SELECT report_json FROM runs WHERE id = ?", (run_id,)
            )

    progress, [(report,)] = asyncio.run(stored())
    assert progress.conversations_generated == 15 and progress.criteria_graded == progress.criteria_total == 27
    assert json.loads(report)["conversations"]["scored"] == 15


def test_the_engine_leaves_the_collector_as_its_entry_point_set_it(server, tmp_path, small_dataset):
    """The app freezes its long-lived objects at start; a run it drives must not undo that."""
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0

        async def go():
            settings = settings_for(server, tmp_path / "db.sqlite")
            async with await Store.open(settings.db_path) as store:
                run = await store.get_run(await plan_run(store, settings, load_jsonl(small_dataset)))
                return await Engine(store, run, settings, backoff_base=0.01).execute()

        assert asyncio.run(go()) == "finished"
        assert gc.get_freeze_count() > frozen // 2  # some were freed since; an unfreeze leaves none
    finally:
        gc.unfreeze()


def test_the_bootstrap_draws_the_same_resamples_however_it_chunks_them():
    """Its chunks bound the report's memory; the numbers are those of one draw of every resample."""
    for size in (1, 737, 5167):
        values = np.random.default_rng(size).random(size)
        picks = np.random.default_rng(BOOTSTRAP_SEED).integers(0, size, size=(BOOTSTRAP_SAMPLES, size))
        assert np.array_equal(bootstrap_means(values), np.clip(values[picks].mean(axis=1), 0, 1))
