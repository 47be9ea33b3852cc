"""Text from models and datasets is data: exports keep it exactly, terminal output defuses it."""

import asyncio
import csv
import json
import subprocess
import sys
import time

from hbtui.dataset import load_jsonl
from hbtui.engine import compute_report, plan_run
from hbtui.export import write_csv, write_jsonl
from hbtui.store import Store
from tests.conftest import make_record, settings_for, write_jsonl as write_records

HOSTILE = (
    "[bold red]not bold[/bold red] [link=https://evil.example]click[/link] "
    "\x1b[31mred\x1b[0m \x1b]52;c;ZXZpbA==\x07 \x1b]0;title\x07 "
    "שלום עולם مرحبا 👩‍⚕️🩺 " + "x" * 5000
)


async def hostile_run(db, data):
    from hbtui.config import Settings

    settings = Settings(base_url="http://127.0.0.1:9/v1", model_test="m[bold]", model_grader="g", db_path=str(db))
    async with await Store.open(db) as store:
        run_id = await plan_run(store, settings, load_jsonl(data), name="evil \x1b[31m[bold]name")
        rows = await store.pending_work(run_id)
        item = rows[0]
        now = time.time()
        await store.write_batch(
            replies=[("generated", HOSTILE, "think " + HOSTILE, "stop", None, None, 1, 5.0, 3, 4, now,
                      item.conversation_id)],
            verdicts=[("met", HOSTILE, json.dumps({"explanation": HOSTILE, "criteria_met": True}), None, None, None,
                       1, 5.0, 3, 4, now, item.conversation_id, 0)],
        )
        await store.refresh_summaries(run_id)
        await store.finish_run(run_id, "finished", report=await compute_report(store, run_id))
        return run_id


def test_exports_keep_text_exactly(tmp_path):
    data = write_records(tmp_path / "d.jsonl", [make_record("evil", [(HOSTILE, 5, ["axis:accuracy"])], user=HOSTILE)])
    db = tmp_path / "db.sqlite"
    run_id = asyncio.run(hostile_run(db, data))

    async def export():
        async with await Store.open(db) as store:
            await write_jsonl(store, run_id, tmp_path / "out.jsonl")
            await write_csv(store, run_id, tmp_path / "out.csv")

    asyncio.run(export())
    line = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert line["completion"] == HOSTILE
    assert line["prompt"][0]["content"] == HOSTILE
    assert line["rubrics"][0]["criterion"] == HOSTILE and line["rubrics"][0]["explanation"] == HOSTILE
    assert line["reasoning"] == "think " + HOSTILE
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert row["criterion"] == HOSTILE and row["explanation"] == HOSTILE


def test_terminal_output_shows_escapes_as_text(tmp_path):
    data = write_records(tmp_path / "d.jsonl", [make_record("evil", [(HOSTILE, 5, [])], user=HOSTILE)])
    db = tmp_path / "db.sqlite"
    asyncio.run(hostile_run(db, data))
    for args in (["runs"], ["show", "latest"]):
        out = subprocess.run([sys.executable, "-m", "hbtui", *args, "--db", str(db)], capture_output=True,
                             text=True, check=True).stdout
        assert "\x1b" not in out and "\x07" not in out
        assert "␛[31m[bold]name" in out
