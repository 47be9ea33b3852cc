"""`hbtui meta-eval`: a grader judged against physicians' labels, end to end against the test
server, stored as a run of kind meta-eval, resumable, shown beside the physicians' range."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import hbtui
from hbtui import cli
from hbtui.core.grading import load_template
from hbtui.meta_eval.data import chosen, read_rows
from hbtui.meta_eval.grading import meta_grader_prompt
from hbtui.meta_eval.headless import drive_meta_eval
from hbtui.meta_eval.runner import MetaEvalDriver
from hbtui.meta_eval.summary import labelled_rows, meta_eval_summary
from hbtui.store import Store, schema
from tests.conftest import REFERENCE_EVAL, settings_for, user_folder
from tests.support.fake_server import expected_verdict
from tests.support.meta_rows import meta_rows, write_rows
from tests.support.old_schema import database_at, version_before
from tests.support.reference_modules import reference_modules


def db_rows(db: Path, sql: str, args=()) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def test_a_meta_eval_grades_every_row_as_asked_and_shows_the_graders_f1_beside_the_physicians(
    server, tmp_path, monkeypatch, capsys, reference_cache
):
    user_folder(tmp_path, monkeypatch, server)
    rows = meta_rows(60)
    data = write_rows(tmp_path / "meta.jsonl", rows)
    assert cli.main(["meta-eval", "--data", str(data), "--name", "audit", "--physician-labels-over", "5"]) == 0
    out = capsys.readouterr().out
    assert "grader F1" in out and "physicians' own F1" in out and "grader " in out
    db = tmp_path / "runs" / "hbtui.sqlite"
    assert db_rows(db, "SELECT kind, status, n_conversations FROM runs") == [("meta-eval", "finished", 60)]
    # Each stored verdict is the one the test server gives the prompt hbtui means to send.
    template = load_template("reference" if REFERENCE_EVAL.exists() else "builtin", reference_cache)
    stored = db_rows(db, "SELECT position, status, explanation FROM meta_eval_rows ORDER BY position")
    for (position, status, explanation), row in zip(stored, rows, strict=True):
        prompt = meta_grader_prompt(template, row["prompt"], row["completion"], row["rubric"])
        assert status == ("met" if expected_verdict(prompt) else "not_met"), position
        assert explanation
    # A conversation rated under three rubrics is stored once.
    assert db_rows(db, "SELECT count(*) FROM meta_eval_texts") == [(20,)]

    assert cli.main(["show", "audit", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["run"]["kind"] == "meta-eval"
    graded = [{**row, "grader": status == "met"} for row, (_, status, _) in zip(rows, stored, strict=True)]
    expected = meta_eval_summary(
        labelled_rows(
            [
                (
                    json.dumps(r["binary_labels"]),
                    json.dumps(r["anonymized_physician_ids"]),
                    r["category"],
                    "met" if r["grader"] else "not_met",
                )
                for r in graded
            ]
        ),
        labels_over=5,
    )
    assert document["meta_eval"] == json.loads(json.dumps(expected))
    assert document["meta_eval"]["physician_distribution"]["physicians"] == 8
    assert cli.main(["show", "audit", "--json", "--physician-labels-over", "1000"]) == 0
    assert json.loads(capsys.readouterr().out)["meta_eval"]["physician_distribution"]["physicians"] == 0

    assert cli.main(["runs"]) == 0
    listed = capsys.readouterr().out
    assert "F1 " in listed and "meta-eval runs: score is the grader's pairwise balanced F1" in listed


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("{not json", "invalid JSON"),
        ('{"prompt": [], "completion": "c"}', "prompt: is empty"),
        ("[1, 2]", "must be a JSON object"),
        (
            '{"prompt": [{"role": "user", "content": "a"}], "completion": "\\ud800", "rubric": "r", "category": "c",'
            ' "binary_labels": [true], "anonymized_physician_ids": ["p"]}',
            "completion: holds a lone surrogate",
        ),
    ],
)
def test_a_malformed_line_is_named_by_file_and_line_and_nothing_is_stored(
    server, tmp_path, monkeypatch, capsys, line, named
):
    user_folder(tmp_path, monkeypatch, server)
    good = [json.dumps(r) for r in meta_rows(5)]
    data = tmp_path / "meta.jsonl"
    data.write_text("\n".join([*good[:3], line, *good[3:]]) + "\n", encoding="utf-8")
    assert cli.main(["meta-eval", "--data", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hbtui: error: {data}:4: ") and named in err and "\n" not in err
    assert not (tmp_path / "runs" / "hbtui.sqlite").exists()
    assert server.stats()["grader"] == 0


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r.update(binary_labels=[True, "yes"], anonymized_physician_ids=["a", "b"]), "binary_labels[1]"),
        (
            lambda r: r.update(anonymized_physician_ids=r["anonymized_physician_ids"] + ["x"]),
            "anonymized_physician_ids",
        ),
        (lambda r: r.pop("rubric"), "rubric: missing"),
        (lambda r: r.update(category=3), "category: must be text"),
        (lambda r: r.update(binary_labels=[], anonymized_physician_ids=[]), "binary_labels: is empty"),
    ],
)
def test_each_bad_field_is_named(tmp_path, monkeypatch, capsys, change, named):
    monkeypatch.chdir(tmp_path)
    rows = meta_rows(3)
    change(rows[1])
    data = write_rows(tmp_path / "meta.jsonl", rows)
    assert (
        cli.main(
            ["meta-eval", "--data", str(data), "--model-grader", "g", "--grader-base-url", "http://127.0.0.1:9/v1"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"{data}:2: {named}" in err and err.count("\n") == 1


def test_the_rows_sampled_are_the_references_sample_in_its_order(tmp_path):
    rows = meta_rows(50, seed=3)
    data = write_rows(tmp_path / "meta.jsonl", rows)
    for seed in (0, 1, 42):
        theirs = random.Random(seed).sample(rows, 12)  # the reference: rng.sample(examples, n)
        picked = dict(read_rows(data, chosen(len(rows), 12, seed)))
        assert [picked[i].rubric for i in range(12)] == [r["rubric"] for r in theirs]
    assert chosen(50, 50, 0) == chosen(50, None, 0) == list(range(50))  # no sampling at or above the size


async def test_a_stopped_meta_eval_resumes_without_paying_again_for_the_rows_it_kept(server, tmp_path, monkeypatch):
    user_folder(tmp_path, monkeypatch, server)
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(240))
    settings = settings_for(server, tmp_path / "runs" / "hbtui.sqlite", concurrency=2, grader_concurrency=2)
    server.control(latency_ms=25)  # 240 rows, 2 at a time: 3 s, stopped after the first writes
    from hbtui.meta_eval.plan import plan_meta_eval

    async with await Store.open(settings.db_path) as store:
        run_id = await plan_meta_eval(store, settings, data, official=False, limit=None, seed=0, name="stop-me")
        run = await store.get_run(run_id)
        task: asyncio.Task | None = None
        stopping: list[bool] = []

        def stop_after_some(progress):
            # Once, as Ctrl-C does: the progress goes on being reported while the driver stops,
            # and a second cancel would interrupt its closing writes.
            if progress.done >= 20 and task is not None and not stopping:
                stopping.append(True)
                task.cancel()

        driver = MetaEvalDriver(store, run, settings, stop_after_some, backoff_base=0.01)
        task = asyncio.ensure_future(driver.execute())
        assert await task == "interrupted"
        kept = (await store.meta_eval_counts(run_id))["met"] + (await store.meta_eval_counts(run_id))["not_met"]
        assert 20 <= kept < 240
        assert (await store.get_run(run_id)).status == "interrupted"
    # Another grader would mix two graders in one F1: refused once rows have a verdict.
    from tests.cli.test_cli import hbtui

    refused = await asyncio.to_thread(hbtui, "resume", str(run_id), "--model-grader", "test-model", cwd=tmp_path)
    assert refused.returncode == 2 and "a resume may change how the grader is reached, not which" in refused.stderr
    asked_before = server.stats()["grader"]
    async with await Store.open(settings.db_path) as store:  # what `hbtui resume` does with a meta-eval
        assert await drive_meta_eval(store, await store.get_run(run_id), settings, lambda *a, **k: None) == 0
    assert server.stats()["grader"] - asked_before == 240 - kept
    assert db_rows(settings.db_path, "SELECT count(*) FROM meta_eval_rows WHERE status IN ('met', 'not_met')") == [
        (240,)
    ]
    assert db_rows(settings.db_path, "SELECT status FROM runs") == [("finished",)]


def test_compare_and_export_refuse_a_meta_eval_and_say_why_and_regrade_judges_the_same_rows_again(
    server, tmp_path, monkeypatch, capsys
):
    user_folder(tmp_path, monkeypatch, server)
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(9))
    assert cli.main(["meta-eval", "--data", str(data), "--name", "m"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", "m", "m"]) == 2
    assert "compared with itself" in capsys.readouterr().err
    assert cli.main(["export", "m", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "hbtui show 1 --json" in capsys.readouterr().err
    # Another prompt too: the test server's verdicts then differ between the two. Where the
    # reference's is not at hand (no ../shared, no network), a file of one's own is the other.
    if load_template_name() == "builtin":
        builtin = (Path(hbtui.__file__).parent / "templates" / "grader.txt").read_text(encoding="utf-8")
        other = str(tmp_path / "stricter.txt")
        Path(other).write_text("Judge strictly.\n\n" + builtin, encoding="utf-8")
    else:
        other = "builtin"
    assert cli.main(["regrade", "m", "--model-grader", "test-model", "--grader-template", other]) == 0
    db = tmp_path / "runs" / "hbtui.sqlite"
    assert db_rows(db, "SELECT kind, model_grader, source_run_id, status FROM runs WHERE id = 2") == [
        ("meta-eval", "test-model", 1, "finished")
    ]
    same = "SELECT position, line, text_id, rubric, labels FROM meta_eval_rows WHERE run_id = ? ORDER BY position"
    assert db_rows(db, same, (1,)) == db_rows(db, same, (2,))
    capsys.readouterr()
    # Two graders on the same rows: side by side, and how often they agree with each other.
    assert cli.main(["compare", "1", "2", "--json"]) == 0
    both = json.loads(capsys.readouterr().out)["meta_eval_comparison"]
    first, second = (json.loads(_show(n, capsys)) for n in ("1", "2"))
    assert both["rows"] == 9 and both["a"]["grader"] == "grader-model" and both["b"]["grader"] == "test-model"
    assert both["a"]["pairwise_model_f1_balanced"] == first["meta_eval"]["pairwise_model_f1_balanced"]
    assert both["b"]["pairwise_model_f1_balanced"] == second["meta_eval"]["pairwise_model_f1_balanced"]
    verdicts = "SELECT status FROM meta_eval_rows WHERE run_id = ? ORDER BY position"
    same_verdicts = sum(x == y for x, y in zip(db_rows(db, verdicts, (1,)), db_rows(db, verdicts, (2,))))
    assert both["graders_agree"] == pytest.approx(same_verdicts / 9) and same_verdicts < 9
    assert cli.main(["compare", "1", "2"]) == 0
    assert "the two graders give the same verdict on" in capsys.readouterr().out
    # A model run has no rows of a meta-eval: refused, saying why.
    assert cli.main(["run", "--data", str(write_model_records(tmp_path)), "--name", "model"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", "model", "m"]) == 2
    assert "has no HealthBench score to compare with a model run" in capsys.readouterr().err


def load_template_name() -> str:
    return os.environ.get("GRADER_TEMPLATE", "reference")


def _show(run: str, capsys) -> str:
    assert cli.main(["show", run, "--json"]) == 0
    return capsys.readouterr().out


def write_model_records(folder: Path) -> Path:
    from tests.conftest import small_records
    from tests.conftest import write_jsonl as write_records

    return write_records(folder / "small.jsonl", small_records())


def test_a_database_of_the_previous_schema_migrates_and_keeps_its_runs(tmp_path):
    db = database_at(tmp_path / "old.sqlite", version_before(schema.MIGRATE_ADD_META_EVAL_ROWS))

    async def read():
        async with await Store.open(db) as store:
            return [(r.name, r.kind, r.meta_eval) for r in await store.list_runs()]

    assert asyncio.run(read()) == [("old", "model", None)]
    assert db_rows(db, "PRAGMA user_version") == [(schema.SCHEMA_VERSION,)]
    assert db_rows(db, "SELECT count(*) FROM meta_eval_rows") == [(0,)]


needs_reference = pytest.mark.skipif(
    not REFERENCE_EVAL.exists(), reason=f"the reference's files are not at {REFERENCE_EVAL.parent} (../shared absent)"
)


@needs_reference
def test_with_the_reference_preset_the_requests_on_the_wire_are_the_references(server, tmp_path, monkeypatch, capsys):
    user_folder(tmp_path, monkeypatch, server)
    rows = meta_rows(12, seed=9)
    data = write_rows(tmp_path / "meta.jsonl", rows)
    server.control(capture_requests=True)
    assert cli.main(["meta-eval", "--data", str(data), "--preset", "reference", "--grader-concurrency", "1"]) == 0
    sent = [json.dumps(body["messages"]) for body in server.captured_requests()]

    theirs = []

    def sampler(messages):
        theirs.append(json.dumps([{"role": "system", "content": "You are a helpful assistant."}, *messages]))
        # Both verdicts, else the reference finds no balanced F1 to report.
        text = json.dumps({"explanation": "x", "criteria_met": len(theirs) % 2 == 0})
        return type("Answer", (), {"response_text": text, "actual_queried_message_list": messages})()

    with reference_modules(REFERENCE_EVAL.parent, "healthbench_eval", "healthbench_meta_eval") as (_, meta):
        evaluation = object.__new__(meta.HealthBenchMetaEval)
        evaluation.examples, evaluation.n_threads = rows, 1
        evaluation(sampler)
    assert sent == theirs
    assert "requests: reference-identical" in capsys.readouterr().out


@pytest.mark.slow
def test_a_meta_eval_of_a_thousand_rows_runs_end_to_end_as_a_process(server, tmp_path, monkeypatch):
    from tests.cli.test_cli import hbtui

    user_folder(tmp_path, monkeypatch, server)
    rows = meta_rows(1000, seed=11, physicians=20, labels=(1, 5))
    data = write_rows(tmp_path / "meta.jsonl", rows)
    done = hbtui("meta-eval", "--data", str(data), "--name", "thousand", "--physician-labels-over", "50", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "grader F1" in done.stdout and "physicians' own F1" in done.stdout
    db = tmp_path / "runs" / "hbtui.sqlite"
    counts = dict(db_rows(db, "SELECT status, count(*) FROM meta_eval_rows GROUP BY status"))
    assert counts["met"] + counts["not_met"] == 1000 and counts["met"] and counts["not_met"]
    assert server.stats()["grader"] == 1000
    shown = hbtui("show", "thousand", "--json", cwd=tmp_path)
    summary = json.loads(shown.stdout)["meta_eval"]
    assert summary["rows"] == summary["judged"] == 1000
    assert summary["physician_distribution"]["physicians"] == 20
    assert summary["pairwise_model_f1_balanced"] == db_rows(db, "SELECT score FROM runs")[0][0]


@pytest.mark.slow
async def test_planning_streams_the_file_rather_than_holding_it(tmp_path):
    import tracemalloc

    from hbtui.core.settings.config import Settings
    from hbtui.meta_eval.plan import plan_meta_eval

    rows = meta_rows(6000, seed=1)
    for number, row in enumerate(rows):
        row["completion"] = f"{number} " + "x" * 2000  # a real file's rows run to a few kB
    data = write_rows(tmp_path / "meta.jsonl", rows)
    del rows
    async with await Store.open(tmp_path / "hbtui.sqlite") as store:
        tracemalloc.start()
        try:
            run_id = await plan_meta_eval(
                store, Settings(model_grader="g"), data, official=False, limit=None, seed=0, name=None
            )
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert (await store.get_run(run_id)).n_conversations == 6000
    assert peak < data.stat().st_size / 2  # a few hundred rows at a time, never the file's 12 MB


@pytest.fixture
def meta_mirror(tmp_path, monkeypatch):
    """A local HTTP server holding a small meta-eval file under the official name, its sha256 pinned."""
    import hashlib
    import http.server
    import threading
    from functools import partial

    from hbtui.core.dataset import OfficialFile
    from hbtui.meta_eval import data as meta_data

    served = tmp_path / "served"
    served.mkdir()
    path = write_rows(served / meta_data.OFFICIAL.filename, meta_rows(9))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(meta_data, "OFFICIAL", OfficialFile(path.name, digest, 9))
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("HBTUI_DATA_URL", f"http://127.0.0.1:{httpd.server_address[1]}/")
    yield path
    httpd.shutdown()


def test_without_data_the_official_file_is_downloaded_once_checked_and_cached(
    server, meta_mirror, tmp_path, monkeypatch, capsys, reference_cache
):
    import shutil

    user_folder(tmp_path, monkeypatch, server)
    cache = tmp_path / "cache"
    shutil.copytree(reference_cache, cache)  # the reference's prompt, and no meta-eval file yet
    monkeypatch.setenv("HBTUI_CACHE", str(cache))
    assert cli.main(["meta-eval", "--name", "first"]) == 0
    captured = capsys.readouterr()
    assert f"downloading the official meta-eval file (136 MB), once: it is kept in {cache}" in captured.out
    assert (cache / meta_mirror.name).read_bytes() == meta_mirror.read_bytes()
    meta_mirror.write_text("changed upstream\n")  # a second run must not fetch again
    assert cli.main(["meta-eval", "--name", "second"]) == 0
    assert "downloading" not in capsys.readouterr().out
    db = tmp_path / "runs" / "hbtui.sqlite"
    assert db_rows(db, "SELECT name, dataset_name, dataset_path, n_conversations FROM runs ORDER BY id") == [
        ("first", "meta-eval", None, 9),
        ("second", "meta-eval", None, 9),
    ]
    (cache / meta_mirror.name).write_text("corrupted\n")  # a cached copy that fails its check is fetched again
    assert cli.main(["meta-eval", "--name", "third"]) == 2  # the mirror's copy changed: refused, not used
    assert "sha256" in capsys.readouterr().err
    assert not (cache / meta_mirror.name).exists()


def test_rows_the_grader_never_answered_in_shape_make_it_incomplete_and_regrade_errors_completes_it(
    server, tmp_path, monkeypatch, capsys
):
    user_folder(tmp_path, monkeypatch, server, extra="GRADER_PARSE_ATTEMPTS=1\n")
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(8))
    server.control(grader_format="broken")
    assert cli.main(["meta-eval", "--data", str(data), "--name", "m"]) == 3
    assert "8 rows got no verdict" in capsys.readouterr().err
    db = tmp_path / "runs" / "hbtui.sqlite"
    assert db_rows(db, "SELECT status, error_kind, count(*) FROM meta_eval_rows GROUP BY 1, 2") == [
        ("error", "unparseable", 8)
    ]
    assert cli.main(["resume", "m"]) == 3  # an answer without a verdict is an answer: not asked again
    server.control(grader_format="json")
    asked = server.stats()["grader"]
    assert cli.main(["regrade-errors", "m"]) == 0
    assert "retrying 8 rows that got no verdict" in capsys.readouterr().out
    assert server.stats()["grader"] - asked == 8
    assert db_rows(db, "SELECT status FROM runs") == [("finished",)]


async def test_cancel_from_another_process_ends_a_meta_eval_as_cancelled_and_it_resumes(server, tmp_path, monkeypatch):
    user_folder(tmp_path, monkeypatch, server)
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(200))
    settings = settings_for(server, tmp_path / "runs" / "hbtui.sqlite", concurrency=1, grader_concurrency=1)
    server.control(latency_ms=30)
    from hbtui.meta_eval.plan import plan_meta_eval

    async with await Store.open(settings.db_path) as store:
        run_id = await plan_meta_eval(store, settings, data, official=False, limit=None, seed=0, name="c")
        driver = MetaEvalDriver(store, await store.get_run(run_id), settings, backoff_base=0.01)
        task = asyncio.ensure_future(driver.execute())
        while (await store.meta_eval_counts(run_id))["met"] == 0:
            await asyncio.sleep(0.05)
        assert await asyncio.to_thread(cli.main, ["cancel", str(run_id)]) == 0  # as another process would
        assert await task == "cancelled"
        counts = await store.meta_eval_counts(run_id)
        assert counts["pending"] > 0
        assert (await store.get_run(run_id)).status == "cancelled"


async def test_verdicts_being_written_when_the_last_row_is_graded_are_kept(server, tmp_path, monkeypatch):
    """The writer was cancelled in the middle of a slow write at the end, and its batch lost."""
    from hbtui.meta_eval.plan import plan_meta_eval

    user_folder(tmp_path, monkeypatch, server)
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(30))
    settings = settings_for(server, tmp_path / "runs" / "hbtui.sqlite", concurrency=1, grader_concurrency=1)
    server.control(latency_ms=30)  # the rows take about a second, the first write starts at 0.5 s
    write = Store.write_meta_eval_results
    writes = []

    async def slow_first_write(self, run_id, lease, results):
        writes.append(len(results))
        if len(writes) == 1:
            await asyncio.sleep(1.0)  # a disk or a lock slow for a moment, while the last rows come in
        await write(self, run_id, lease, results)

    monkeypatch.setattr(Store, "write_meta_eval_results", slow_first_write)
    async with await Store.open(settings.db_path) as store:
        run_id = await plan_meta_eval(store, settings, data, official=False, limit=None, seed=0, name="w")
        status = await MetaEvalDriver(store, await store.get_run(run_id), settings, backoff_base=0.01).execute()
        counts = await store.meta_eval_counts(run_id)
    assert (status, counts["met"] + counts["not_met"], sum(writes)) == ("finished", 30, 30)


def test_ctrl_c_stops_a_meta_eval_as_interrupted(server, tmp_path, monkeypatch):
    """The one stop handler (hbtui.engine.stopping) for a meta-eval, as for a run: Ctrl-C saves
    what completed and leaves the run interrupted, resumable (exit 130)."""
    from tests.cli.test_cli import clean_env
    from tests.engine.test_run_control import wait_until

    user_folder(tmp_path, monkeypatch, server)
    data = write_rows(tmp_path / "meta.jsonl", meta_rows(400, seed=3, physicians=5, labels=(1, 3)))
    server.control(latency_ms=200)
    db = tmp_path / "runs" / "hbtui.sqlite"

    def graded() -> int:
        try:
            return db_rows(db, "SELECT count(*) FROM meta_eval_rows WHERE status IN ('met', 'not_met')")[0][0]
        except sqlite3.OperationalError:  # the database not made yet, or its tables
            return 0

    command = [sys.executable, "-m", "hbtui", "meta-eval", "--data", str(data), "--name", "once"]
    first = subprocess.Popen(
        command, cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wait_until(lambda: first.poll() is None and graded() > 0, "a row graded")
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130, (first.returncode, err)
    assert "stopping: saving what completed" in err and "continue with: hbtui resume 1" in err
    assert db_rows(db, "SELECT status FROM runs WHERE name = 'once'") == [("interrupted",)]
