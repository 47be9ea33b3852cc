"""`hbtui run --batch`: a run through the endpoint's batch API, against the project's test server,
whose batches validate, run, finalize, shuffle their output, fail lines, expire, refuse and cancel
as a provider's do (tests/support/fake_batches.py), with a real SQLite file.

The run submits each request once, whatever kills it (a SIGKILL after the upload, after the
batch's creation, while it runs, while its output is read), and its verdicts equal a run of calls
on the same deterministic server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from hbtui import cli
from tests.conftest import MAIN_SUBSET, make_record, needs_shared, small_records, user_folder, write_jsonl
from tests.support.batch_runs import (
    batch_env,
    ctrl_c,
    left_awaiting,
    rows,
    shown_json,
    start_batch_run,
    state_of,
    submitted,
    verdicts_by_request,
    wait_while_running,
)

FAST = {"validating_s": 0.05, "finalizing_s": 0.05}


def provider(server) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, trust_env=False, timeout=10)


def batches_at(server, db: Path) -> list[dict]:
    """The batches the server holds of the runs in ``db`` (the session's server holds others')."""
    uuids = {json.loads(plan).get("batch_api", {}).get("uuid") for (plan,) in rows(db, "SELECT plan_json FROM runs")}
    with provider(server) as http:
        found = http.get("/batches", params={"limit": "100"}).json()["data"]
    return [batch for batch in found if batch["metadata"].get("hbtui_run") in uuids]


def submitted_ids(server, db: Path) -> Counter:
    """How many times each custom_id was submitted in a batch, across the batches of ``db``'s runs."""
    counts: Counter = Counter()
    with httpx.Client(base_url=server.root_url, trust_env=False, timeout=10) as http:
        for batch in batches_at(server, db):
            text = http.get(f"/__batch_inputs/{batch['id']}").text
            counts.update(json.loads(line)["custom_id"] for line in text.splitlines() if line.strip())
    return counts


def prices_in(folder: Path, monkeypatch, table: dict) -> None:
    config = folder / "config" / "hbtui"
    config.mkdir(parents=True, exist_ok=True)
    (config / "prices.json").write_text(json.dumps(table))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / "config"))


@pytest.fixture
def batch_user(tmp_path, monkeypatch, server):
    server.control(batch=FAST)
    write_jsonl(tmp_path / "data.jsonl", small_records())
    return user_folder(tmp_path, monkeypatch, server, extra="BATCH_POLL=0.1\n")


def test_a_batch_run_scores_as_a_run_of_calls_at_the_batch_price(batch_user, server, capsys, monkeypatch):
    db = batch_user / "runs" / "hbtui.sqlite"
    price = {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}
    prices_in(batch_user, monkeypatch, {"test-model": price, "grader-model": price})
    assert cli.main(["run", "--data", "data.jsonl", "--repeats", "2", "--batch", "--name", "viabatch"]) == 0
    out = capsys.readouterr().out
    assert "through the batch API" in out and "batch 1 (generation, 6 requests)" in out
    assert "batch 2 (grading, 16 requests)" in out and "run 1 viabatch (finished)" in out
    assert "at the batch price" in out
    batches = batches_at(server, db)
    assert len(batches) == 2 and all(b["status"] == "completed" for b in batches)
    run_uuid = json.loads(rows(db, "SELECT plan_json FROM runs")[0][0])["batch_api"]["uuid"]
    assert sorted(b["metadata"]["hbtui_submission"] for b in batches) == ["1", "2"]
    assert {b["metadata"]["hbtui_run"] for b in batches} == {run_uuid} and len(run_uuid) == 32
    assert set(submitted_ids(server, db).values()) == {1}
    assert rows(db, "SELECT state, stage, lines FROM batch_submissions ORDER BY number") == [
        ("imported", "generation", 6),
        ("imported", "grading", 16),
    ]
    assert not list((db.parent / "batches").rglob("*"))  # stored: no file is kept, nor its folder
    with provider(server) as http:  # nor at the provider: its input, output and error files
        held = {f["id"] for f in http.get("/files").json()["data"]}
    assert not held & {b[key] for b in batches for key in ("input_file_id", "output_file_id")}
    assert server.stats()["requests"] == 22  # each line once, answered by the server's own routes

    # The same records by calls: the same verdicts, every metric equal.
    assert cli.main(["run", "--data", "data.jsonl", "--repeats", "2", "--batch", "false", "--name", "calls"]) == 0
    assert verdicts_by_request(db, "viabatch") == verdicts_by_request(db, "calls")
    shown = shown_json(cli, capsys, "viabatch", "calls")
    assert shown["viabatch"]["metrics"] == shown["calls"]["metrics"]
    assert [b["batch_status"] for b in shown["viabatch"]["batches"]] == ["completed", "completed"]
    assert "batches" not in shown["calls"]
    assert cli.main(["show", "viabatch"]) == 0
    assert "2 batches stored" in capsys.readouterr().out


def test_an_output_is_stored_a_chunk_at_a_time_with_the_same_verdicts(batch_user, server, capsys, monkeypatch):
    from hbtui.engine import batch_files

    db = batch_user / "runs" / "hbtui.sqlite"
    monkeypatch.setattr(batch_files, "STORE_CHUNK", 3)  # 16 grading lines: six transactions
    assert cli.main(["run", "--data", "data.jsonl", "--repeats", "2", "--batch", "--name", "chunked"]) == 0
    assert "16 verdicts stored" in capsys.readouterr().out
    monkeypatch.setattr(batch_files, "STORE_CHUNK", 5_000)
    assert cli.main(["run", "--data", "data.jsonl", "--repeats", "2", "--batch", "--name", "whole"]) == 0
    assert verdicts_by_request(db, "chunked") == verdicts_by_request(db, "whole")


def test_without_batch_prices_a_batch_run_says_its_price_is_unknown(batch_user, server, capsys, monkeypatch):
    prices_in(batch_user, monkeypatch, {"grader-model": {"input": 2.0, "output": 8.0}})
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--name", "b"]) == 0
    out = capsys.readouterr().out
    assert out.count("(batch price unknown)") == 2 and "cost" not in out.split("tokens", 1)[1]


def test_verdicts_the_cache_holds_are_stored_never_submitted(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", "data.jsonl", "--name", "calls"]) == 0  # the cache learns 8 verdicts
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--reuse-verdicts", "--name", "cached"]) == 0
    out = capsys.readouterr().out
    assert "run 2 cached (finished)" in out and "grading" not in out
    assert rows(db, "SELECT stage FROM batch_submissions") == [("generation",)]  # no grading batch
    assert rows(
        db,
        "SELECT count(*) FROM verdicts v JOIN runs r ON r.id = v.run_id WHERE r.name = 'cached' AND v.from_cache = 1",
    ) == [(8,)]
    assert verdicts_by_request(db, "cached") == verdicts_by_request(db, "calls")


def test_a_line_separator_in_a_record_stays_inside_its_request_line(batch_user, server, capsys):
    """A record of the main subset holds a raw U+2028, which JSON allows in a string and a reader
    that splits lines as Python's str.splitlines does (the test server's validator) takes for a
    line's end: each request must be one line to any reader."""
    db = batch_user / "runs" / "hbtui.sqlite"
    record = make_record("sep", [("says hello", 5, [])], user="First line\u2028second\u2029third\x85fourth")
    write_jsonl(batch_user / "sep.jsonl", [record])
    assert cli.main(["run", "--data", "sep.jsonl", "--batch", "--name", "sep"]) == 0
    assert "run 1 sep (finished)" in capsys.readouterr().out
    assert rows(db, "SELECT count(*) FROM batch_submissions") == [(2,)]


def test_a_regrade_of_a_batch_run_has_batches_of_its_own(batch_user, server, capsys):
    """A regrade copies its source's plan but never its batches: its own UUID at the provider, its
    own folder, so that no resume or cancel of it finds the source's batches (or another's)."""
    db = batch_user / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--name", "src"]) == 0
    server.control(quota_exhausted=True)  # the regrade stops after its upload
    assert cli.main(["regrade", "src", "--temperature-grader", "0.5", "--name", "again"]) == 1
    plans = {name: json.loads(plan)["batch_api"] for name, plan in rows(db, "SELECT name, plan_json FROM runs")}
    assert plans["again"]["uuid"] != plans["src"]["uuid"] and plans["again"]["folder"] != plans["src"]["folder"]
    server.control(quota_exhausted=False)
    assert cli.main(["resume", "again"]) == 0
    assert "run 2 again (finished)" in capsys.readouterr().out
    submissions = rows(db, "SELECT run_id, batch_id FROM batch_submissions ORDER BY id")
    ids = [batch_id for _, batch_id in submissions]
    assert len(ids) == len(set(ids)) == 3  # the source's two, the regrade's one: none adopted
    assert [b["metadata"]["hbtui_run"] for b in batches_at(server, db)].count(plans["again"]["uuid"]) == 1
    # A regrade of a batch run by calls, when asked.
    server.reset_stats()
    assert cli.main(["regrade", "src", "--batch", "false", "--no-cache", "--name", "bycalls"]) == 0
    assert server.stats()["requests"] == 8 and len(batches_at(server, db)) == 3


def test_lines_that_failed_come_back_in_a_later_batch(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    # The replies are answered; then the first two grader lines fail (a 500, a 503): transient, so
    # they go into a later batch, once, and the run finishes with every verdict.
    server.control(script=["ok", "ok", "ok", "server_error", "server_error"])
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--name", "f"]) == 0
    out = capsys.readouterr().out
    assert "2 lines without an answer" in out and "run 1 f (finished)" in out
    stages = rows(db, "SELECT stage, lines, state FROM batch_submissions ORDER BY number")
    assert stages == [("generation", 3, "imported"), ("grading", 8, "imported"), ("grading", 2, "imported")]
    counts = submitted_ids(server, db)
    assert sorted(counts.values()) == [1] * 9 + [2] * 2  # the two failed lines, submitted again once
    assert rows(db, "SELECT count(*) FROM verdicts WHERE status IN ('pending', 'error')") == [(0,)]
    assert rows(db, "SELECT sum(attempts) FROM verdicts") == [(10,)]


def test_an_expired_batch_keeps_what_it_answered_and_asks_the_rest_again(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(batch={**FAST, "expire_after_s": 0.5, "concurrency": 1}, latency_ms=120)
    # Lines that never ran come back up to MAX_ATTEMPTS, verdicts too (GRADER_PARSE_ATTEMPTS is
    # for a verdict that did not parse): 1 would leave them failed.
    command = ["run", "--data", "data.jsonl", "--batch", "--max-attempts", "20", "--grader-parse-attempts", "1"]
    assert cli.main([*command, "--name", "x"]) == 0
    out = capsys.readouterr().out
    assert "expired" in out and "run 1 x (finished)" in out
    states = rows(db, "SELECT batch_status FROM batch_submissions ORDER BY number")
    assert ("expired",) in states and states[-1] == ("completed",)
    counts = submitted_ids(server, db)
    # Each request answered exactly once: those a batch answered before it expired never again.
    answered_once = len(counts)
    assert answered_once == 11 and max(counts.values()) > 1
    assert rows(db, "SELECT count(*) FROM verdicts WHERE status IN ('met', 'not_met')") == [(8,)]


def test_a_batch_refused_at_validation_is_an_error_at_once_not_another_window(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(batch={**FAST, "fail_validation": "This model does not support the batch API."})
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--name", "v"]) == 3
    captured = capsys.readouterr()
    assert "failed" in captured.out and "incomplete" in captured.err
    assert len(batches_at(server, db)) == 1  # not submitted again
    errors = rows(db, "SELECT error_kind, error FROM conversations")
    assert {kind for kind, _ in errors} == {"client_error"}
    assert "failed (invalid_request: This model does not support the batch API." in captured.out
    assert cli.main(["show", "v"]) == 0
    assert "batch 1 (generation, 3 requests): failed (invalid_request: This model" in capsys.readouterr().out
    assert all("does not support the batch API" in error for _, error in errors)
    # regrade-errors asks them again, in a new batch.
    server.control(batch=FAST)
    assert cli.main(["regrade-errors", "v"]) == 0
    assert rows(db, "SELECT status FROM runs") == [("finished",)]
    assert len(batches_at(server, db)) == 3


def test_too_many_batches_enqueued_waits_for_earlier_ones(batch_user, server, capsys, monkeypatch):
    from hbtui.engine import batch_files

    db = batch_user / "runs" / "hbtui.sqlite"
    monkeypatch.setattr(batch_files, "MAX_LINES", 2)  # three replies: two files, two batches
    server.control(batch={**FAST, "max_enqueued": 1, "validating_s": 0.3})
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--name", "q"]) == 0
    out = capsys.readouterr().out
    assert "the provider holds as many batches as it takes" in out and "run 1 q (finished)" in out
    assert set(submitted_ids(server, db).values()) == {1}


def test_out_of_quota_stops_the_run_at_once(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(quota_exhausted=True)
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--name", "o"]) == 1
    err = capsys.readouterr().err
    assert "out of quota at the batch API" in err and "hbtui resume 1" in err
    assert rows(db, "SELECT status FROM runs") == [("failed",)]
    assert batches_at(server, db) == []
    # Its file was uploaded, its batch refused: no batch of it at the provider, so it goes on by
    # calls when asked (the provider asked first).
    server.control(quota_exhausted=False)
    assert cli.main(["resume", "o", "--batch", "false"]) == 0
    assert rows(db, "SELECT status FROM runs") == [("finished",)]
    assert "batch API" not in rows(db, "SELECT requests_json FROM runs")[0][0]  # answered by calls


def test_an_endpoint_without_a_batch_api_stops_the_run_saying_so(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    assert cli.main(["check", "--batch"]) == 0
    assert f"ok   batch API at {server.base_url}: answers" in capsys.readouterr().out
    server.control(batch={**FAST, "absent": True})  # as llama.cpp's server answers /v1/files
    assert cli.main(["check", "--batch"]) == 1
    assert "FAIL batch API at" in capsys.readouterr().out
    server.reset_stats()  # the check's pings
    assert cli.main(["run", "--data", "data.jsonl", "--batch", "--name", "n"]) == 1
    err = capsys.readouterr().err
    assert "the endpoint has no batch API here" in err and "fix the cause" not in err
    assert rows(db, "SELECT status FROM runs") == [("failed",)]
    assert server.stats()["requests"] == 0
    # As the message says: the run goes on by calls, the requests it had written freed.
    assert "resume 1 --batch false goes on by calls" in err
    assert cli.main(["resume", "n", "--batch", "false"]) == 0
    assert rows(db, "SELECT status FROM runs") == [("finished",)]
    assert server.stats()["requests"] == 11  # each request once, by calls
    assert "batch_api" not in rows(db, "SELECT plan_json FROM runs")[0][0]
    assert cli.main(["regrade", "n", "--batch", "--no-cache", "--name", "again"]) == 1  # no batch API
    assert "no batch API here" in capsys.readouterr().err


def test_a_key_the_batch_api_refuses_stops_the_run_and_never_shows_the_key(tmp_path, monkeypatch, capsys):
    """The run made with the right key (stopped after its upload: out of quota), then resumed with
    a key the provider refuses: the batch API's 401 stops it at once, and the key is in nothing."""
    from tests.support.server_process import FakeServer

    db = tmp_path / "runs" / "hbtui.sqlite"
    with FakeServer(api_key="sk-right-key-456", config={"batch": FAST, "quota_exhausted": True}) as guarded:
        write_jsonl(tmp_path / "data.jsonl", small_records())
        user_folder(tmp_path, monkeypatch, guarded, extra="API_KEY=sk-right-key-456\nBATCH=true\n")
        assert cli.main(["run", "--data", "data.jsonl", "--name", "k"]) == 1
        guarded.control(quota_exhausted=False)
        user_folder(tmp_path, monkeypatch, guarded, extra="API_KEY=sk-wrong-key-123\nBATCH=true\n")
        capsys.readouterr()
        assert cli.main(["resume", "k"]) == 1
    err = capsys.readouterr().err
    assert "failed: GET" in err and "/batches: Incorrect API key provided" in err  # at once, not looked at again
    assert rows(db, "SELECT status FROM runs") == [("failed",)]
    stored = "\n".join(str(row) for row in rows(db, "SELECT error, requests_json, settings_json FROM runs"))
    assert "sk-wrong-key-123" not in err + stored and "sk-right-key-456" not in err + stored


def kill_when(process: subprocess.Popen, ready) -> None:
    wait_while_running(process, ready)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)


def files_at(server) -> int:
    with provider(server) as http:
        return len([f for f in http.get("/files").json()["data"] if f["purpose"] == "batch"])


# Where the process dies: the server holds its answer there (the work done, the answer not yet
# sent), and the test kills the process at that moment.
KILL_POINTS = {
    "after_upload": ({"hold_upload_s": 30}, lambda server, db, files: files_at(server) > files),
    "after_creation": (
        {"hold_create_s": 30},
        lambda server, db, files: (
            any(state == "uploaded" for _, state, _ in state_of(db)) and len(batches_at(server, db)) >= 1
        ),
    ),
    "while_it_runs": (
        {"validating_s": 1.5},
        lambda server, db, files: any(state == "submitted" for _, state, _ in state_of(db)),
    ),
    "while_its_output_is_stored": (
        {"hold_content_s": 30},
        lambda server, db, files: any(status == "completed" for _, _, status in state_of(db)),
    ),
}


@needs_shared
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_sigkill_at_each_step_of_a_submission_then_resume_submits_each_request_once(point, server, tmp_path):
    """30 records: killed at one step of the first batch's submission, resumed, finished; every
    request was submitted in exactly one batch, and the verdicts equal a run of calls'."""
    db = tmp_path / "hbtui.sqlite"
    env = batch_env(server, db, BATCH_POLL="0.1")
    data = ["--data", str(MAIN_SUBSET), "--limit", "30", "--seed", "3"]
    hold, ready = KILL_POINTS[point]
    server.control(batch={**FAST, **hold})
    files = files_at(server)
    process = start_batch_run(tmp_path, env, "killed", *data)
    kill_when(process, lambda: ready(server, db, files))
    assert process.returncode == -signal.SIGKILL
    server.control(batch=FAST)  # the provider answers at once from now on
    resumed = subprocess.run(
        [sys.executable, "-m", "hbtui", "resume", "killed"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert rows(db, "SELECT status FROM runs WHERE name = 'killed'") == [("finished",)]
    counts = submitted_ids(server, db)
    assert counts and set(counts.values()) == {1}, counts.most_common(3)  # each request in one batch
    numbers = sorted(int(b["metadata"]["hbtui_submission"]) for b in batches_at(server, db))
    assert numbers == sorted(set(numbers))  # no submission made twice
    assert rows(db, "SELECT count(*) FROM batch_submissions WHERE state != 'imported'") == [(0,)]

    plain = subprocess.run(
        [sys.executable, "-m", "hbtui", "run", *data, "--name", "calls"],
        env={**env, "BATCH": "false"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert plain.returncode == 0, plain.stderr
    assert verdicts_by_request(db, "killed") == verdicts_by_request(db, "calls")
    assert len(verdicts_by_request(db, "calls")) > 200


def test_cancel_cancels_the_batches_at_the_provider_and_resume_finishes(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(batch={**FAST, "validating_s": 30})
    process = start_batch_run(batch_user, dict(os.environ, HBTUI_DB=str(db)), "c")
    wait_while_running(process, lambda: submitted(db))
    # A second process does not look at the same batches: both would store, both would finish.
    assert cli.main(["resume", "c"]) == 2
    assert "batches are looked at by" in capsys.readouterr().err
    assert cli.main(["cancel", "c"]) == 0
    assert "1 batch cancelled at the provider" in capsys.readouterr().out
    out, _err = process.communicate(timeout=30)
    assert "was cancelled" in out and process.returncode == 130
    deadline = time.monotonic() + 10
    while batches_at(server, db)[0]["status"] != "cancelled":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert rows(db, "SELECT status FROM runs") == [("cancelled",)]
    server.control(batch=FAST)
    assert cli.main(["resume", "c"]) == 0
    assert rows(db, "SELECT status FROM runs") == [("finished",)]
    assert cli.main(["pause", "c"]) == 2


def test_a_cancel_that_cannot_reach_the_provider_cancels_nothing(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(batch={**FAST, "validating_s": 30})
    left_awaiting(batch_user, dict(os.environ, HBTUI_DB=str(db)), "u")
    server.control(batch={**FAST, "validating_s": 30, "absent": True})  # the batch API gone meanwhile
    assert cli.main(["cancel", "u"]) == 1
    assert "run 1 is not cancelled: try again when the provider answers" in capsys.readouterr().err
    assert rows(db, "SELECT status FROM runs") == [("awaiting batch",)]
    assert cli.main(["delete", "u", "--yes"]) == 2  # its batch may still run: billed
    server.control(batch={**FAST, "validating_s": 30})
    assert cli.main(["cancel", "u"]) == 0
    assert rows(db, "SELECT status FROM runs") == [("cancelled",)]


def test_stopped_before_its_batch_reached_the_provider_a_run_is_interrupted(batch_user, server):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(batch={**FAST, "hold_upload_s": 30})
    files = files_at(server)
    process = start_batch_run(batch_user, dict(os.environ, HBTUI_DB=str(db)), "i")
    wait_while_running(process, lambda: files_at(server) > files)
    err = ctrl_c(process)
    assert "go on at the provider" not in err and "resume 1" in err
    assert rows(db, "SELECT status FROM runs") == [("interrupted",)]
    server.control(batch=FAST)
    resumed = subprocess.run(
        [sys.executable, "-m", "hbtui", "resume", "i"], env=dict(os.environ, HBTUI_DB=str(db)), cwd=batch_user
    )
    assert resumed.returncode == 0 and rows(db, "SELECT status FROM runs") == [("finished",)]


def test_a_batch_made_but_not_yet_recorded_keeps_its_run_from_delete(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(batch={**FAST, "hold_create_s": 30, "validating_s": 30})
    process = start_batch_run(batch_user, dict(os.environ, HBTUI_DB=str(db)), "h")
    wait_while_running(
        process, lambda: ("uploaded" in {state for _, state, _ in state_of(db)}) and bool(batches_at(server, db))
    )
    ctrl_c(process)  # while the batch's creation is unanswered
    assert rows(db, "SELECT status FROM runs") == [("interrupted",)]
    assert cli.main(["delete", "h", "--yes"]) == 2
    assert cli.main(["cancel", "h"]) == 0  # it finds the batch by its metadata, and cancels it
    assert "1 batch cancelled at the provider" in capsys.readouterr().out
    assert cli.main(["delete", "h", "--yes"]) == 0


def test_a_run_awaiting_its_batches_is_not_deleted_until_they_are_cancelled(batch_user, server, capsys):
    db = batch_user / "runs" / "hbtui.sqlite"
    server.control(batch={**FAST, "validating_s": 30})
    left_awaiting(batch_user, dict(os.environ, HBTUI_DB=str(db)), "d")
    capsys.readouterr()
    assert cli.main(["show", "d", "--json"]) == 0  # awaiting: its requests known, not ended
    shown = json.loads(capsys.readouterr().out)
    assert shown["requests"]["grader_template"] and shown["run"]["finished_at"] is None
    assert shown["batches"][0]["batch_status"] == "validating"
    assert shown["batch_look"]["looking"] is False and shown["batch_look"]["looked_at"] > 0
    assert cli.main(["show", "d"]) == 0
    assert "no process looks at them now" in capsys.readouterr().out
    assert cli.main(["runs"]) == 0
    assert "run 1: 1 batch at the provider: 1 validating" in capsys.readouterr().out
    assert cli.main(["delete", "d", "--yes"]) == 2
    assert "has batches at the provider: cancel them first (hbtui cancel 1)" in capsys.readouterr().err
    assert cli.main(["cancel", "d"]) == 0
    assert cli.main(["delete", "d", "--yes"]) == 0
    assert rows(db, "SELECT count(*) FROM batch_submissions") == [(0,)]
