"""The typed records a run keeps as JSON (hbtui.core.run_records) name exactly what is stored,
and the store reads its rows into records by column name, not position."""

from __future__ import annotations

import asyncio

from hbtui.core.dataset import load_jsonl
from hbtui.core.fidelity import describe_requests
from hbtui.core.run_records import MetaEvalReport, RequestsRecord, StoredSettings
from hbtui.core.settings.config import Settings
from hbtui.meta_eval.metrics import LabelledRow
from hbtui.meta_eval.summary import meta_eval_summary
from hbtui.services import plan_run
from hbtui.store import Store
from hbtui.store.rows import RUN_COLUMNS, RunRow, record_fields, run_from_row
from tests.conftest import make_record, write_jsonl


def test_the_stored_settings_record_names_every_setting_a_run_stores():
    assert set(StoredSettings.__annotations__) == set(Settings().public_dict())


def test_the_requests_record_names_every_key_describe_requests_writes():
    record = describe_requests(Settings(completions="ideal"), "builtin", "0" * 64, ["a deviation"])
    keys = set(RequestsRecord.__annotations__)
    assert set(record) <= keys
    assert keys - set(record) == {"limits"}  # added by the driver from its providers' limits


def test_the_meta_eval_report_record_names_every_key_of_the_report():
    rows = [LabelledRow((True, False), ("a", "b"), "cat", True), LabelledRow((False, False), ("a", "b"), "cat", None)]
    assert set(meta_eval_summary(rows)) == set(MetaEvalReport.__annotations__)


def test_a_run_is_read_by_column_name_not_by_position(tmp_path):
    """Each field of a run gets the column of its own name, wherever the column stands in what
    was selected: a column added in the middle shifts no other."""
    db = tmp_path / "db.sqlite"
    dataset = load_jsonl(write_jsonl(tmp_path / "data.jsonl", [make_record("p1", [("says hello", 5.0, [])])]))

    async def plan():
        async with await Store.open(db) as store:
            settings = Settings(
                base_url=("http://127.0.0.1:9/v1",),
                db_path=str(db),
                model_test="m",
                model_grader="g",
                temperature_grader=0.25,
            )
            run_id = await plan_run(store, settings, dataset, name="named")
            return await store._one_named(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))

    row = asyncio.run(plan())
    run = run_from_row(dict(reversed(list(row.items()))))
    assert (run.name, run.model_test, run.model_grader, run.dataset_name) == ("named", "m", "g", "data.jsonl")
    assert run.settings["temperature_grader"] == 0.25
    assert run.planned.records == 1
    assert run == run_from_row(row)


def test_the_run_columns_cover_every_stored_field_of_a_run():
    named = {part.rsplit(" AS ", 1)[-1].strip() for part in RUN_COLUMNS.split(",")}
    assert named == set(record_fields(RunRow)) - {"scored_so_far"}
