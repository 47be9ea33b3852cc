"""`hbtui run --batch-files DIR` and `hbtui batch import`: a run answered by an engine of the
user's own through batch files, round trip through a stand-in engine (tests/support/batch_engine.py,
which writes its output as vLLM's run-batch does) against the project's test server, and a real
SQLite file. No endpoint is configured for the run: hbtui calls none."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys

import pytest

from hbtui import cli
from tests.conftest import small_records, user_folder, write_jsonl
from tests.support.batch_engine import answer_file
from tests.support.batch_runs import rows, shown_json, verdicts_by_request


@pytest.fixture
def offline(tmp_path, monkeypatch, server):
    """A user's folder whose .env names the models and no endpoint, and the data file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("MODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    for key in ("BASE_URL", "API_KEY", "MODEL_TEST", "MODEL_GRADER", "HBTUI_DB"):
        monkeypatch.delenv(key, raising=False)
    write_jsonl(tmp_path / "data.jsonl", small_records())
    return tmp_path


def test_a_run_through_batch_files_scores_as_a_run_of_calls(offline, server, capsys, monkeypatch):
    db = offline / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", "data.jsonl", "--repeats", "2", "--batch-files", "files", "--name", "off"]) == 0
    out = capsys.readouterr().out
    assert "run 1 awaits its batch: 6 replies to generate in" in out and "hbtui batch import 1 OUTPUT_FILE" in out
    assert server.stats()["requests"] == 0  # nothing was called
    requests = [json.loads(line) for line in (offline / "files" / "generate-requests.jsonl").read_text().splitlines()]
    assert len(requests) == 6 and all(r["method"] == "POST" and r["url"] == "/v1/chat/completions" for r in requests)
    assert {r["body"]["model"] for r in requests} == {"test-model"} and not (
        offline / "files/grade-requests.jsonl"
    ).exists()
    assert rows(db, "SELECT status FROM runs") == [("awaiting batch",)]
    assert cli.main(["runs"]) == 0 and "awaiting batch" in capsys.readouterr().out
    assert cli.main(["show", "off"]) == 0
    assert "run 1 awaits the answers to its batch files" in capsys.readouterr().out
    for command in (["resume", "off"], ["regrade-errors", "off"]):
        assert cli.main(command) == 2
        assert "awaits the answers to its batch files" in capsys.readouterr().err

    answer_file(offline / "files/generate-requests.jsonl", offline / "generated.jsonl", server.root_url)
    assert cli.main(["batch", "import", "off", "generated.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "6 replies and 0 verdicts stored" in out and "16 criteria to grade" in out
    assert not (offline / "files/generate-requests.jsonl").exists()  # nothing of it is still asked
    # The same file again changes nothing, and says so; so do its lines in another file.
    before = rows(db, "SELECT id, status, reply, prompt_tokens FROM conversations ORDER BY id")
    assert cli.main(["batch", "import", "off", "generated.jsonl"]) == 0
    assert "imported already (the same file): nothing changed" in capsys.readouterr().out
    lines = (offline / "generated.jsonl").read_text().splitlines()
    (offline / "again.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    assert cli.main(["batch", "import", "off", "again.jsonl"]) == 0
    assert "6 lines were answered by an earlier import" in capsys.readouterr().out
    assert rows(db, "SELECT id, status, reply, prompt_tokens FROM conversations ORDER BY id") == before

    answer_file(offline / "files/grade-requests.jsonl", offline / "graded.jsonl", server.root_url)
    assert cli.main(["batch", "import", "off", "graded.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "16 verdicts stored" in out and "run 1 off (finished)" in out and "answered through batch files" in out
    assert rows(db, "SELECT status FROM runs WHERE name = 'off'") == [("finished",)]
    assert not list((offline / "files").glob("*.jsonl"))  # nothing of them is asked any more
    assert cli.main(["resume", "off"]) == 2 and "is finished" in capsys.readouterr().err
    # Batch answers enter the verdict cache, under the label in place of an endpoint.
    assert rows(db, "SELECT count(*) FROM verdict_cache") == [(16,)]

    # The same records by calls, on the same server: the same verdicts and every metric equal.
    user_folder(offline, monkeypatch, server)
    assert cli.main(["run", "--data", "data.jsonl", "--repeats", "2", "--name", "calls"]) == 0
    assert verdicts_by_request(db, "off") == verdicts_by_request(db, "calls")
    shown = shown_json(cli, capsys, "off", "calls")
    assert shown["off"]["metrics"] == shown["calls"]["metrics"]
    assert shown["off"]["tokens"]["grader"]["input_tokens"] == shown["calls"]["tokens"]["grader"]["input_tokens"]


def test_an_engine_that_writes_a_line_separator_raw_inside_a_reply_is_read_line_by_line(offline, server, capsys):
    """vLLM writes its output as JSON that keeps non-ASCII raw: a reply may hold a U+2028, which
    is not the line's end."""
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "files", "--name", "sep"]) == 0
    answer_file(offline / "files/generate-requests.jsonl", offline / "generated.jsonl", server.root_url)
    lines = [json.loads(line) for line in (offline / "generated.jsonl").read_text().splitlines()]
    for line in lines:
        line["response"]["body"]["choices"][0]["message"]["content"] += " one\u2028two\u2029three"
    (offline / "raw.jsonl").write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    assert "\u2028" in (offline / "raw.jsonl").read_text()
    capsys.readouterr()
    assert cli.main(["batch", "import", "sep", "raw.jsonl"]) == 0
    assert "3 replies and 0 verdicts stored" in capsys.readouterr().out
    assert all(
        reply.endswith("one\u2028two\u2029three")
        for (reply,) in rows(offline / "runs/hbtui.sqlite", "SELECT reply FROM conversations")
    )


def test_failed_lines_come_back_in_the_next_files_and_a_refusal_is_an_answer(offline, server, capsys):
    """Lines answered 5xx (in an error file of their own, as OpenAI's batch API writes them) are
    asked again in the next request files; a reply refused as too long for the context is an
    answer, not asked again."""
    db = offline / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "files"]) == 0
    server.control(faults={"server_error": 1.0})
    answer_file(
        offline / "files/generate-requests.jsonl",
        offline / "out1.jsonl",
        server.root_url,
        errors=offline / "err1.jsonl",
    )
    assert cli.main(["batch", "import", "1", "out1.jsonl"]) == 2  # nothing answered 200: an empty output
    assert "holds no output line" in capsys.readouterr().err
    assert cli.main(["batch", "import", "1", "err1.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "3 lines that got no answer asked again" in out and "3 replies to generate" in out
    assert rows(db, "SELECT DISTINCT status, attempts FROM conversations") == [("pending", 1)]
    # The same error file again spends no attempt.
    assert cli.main(["batch", "import", "1", "err1.jsonl"]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert rows(db, "SELECT DISTINCT status, attempts FROM conversations") == [("pending", 1)]
    server.control(faults={}, context_chars=33)  # p1's question (36 characters) is longer than this context
    answer_file(offline / "files/generate-requests.jsonl", offline / "out2.jsonl", server.root_url)
    assert cli.main(["batch", "import", "1", "out2.jsonl"]) == 0
    assert "1 failure kept (no attempt left, or a refusal)" in capsys.readouterr().out
    failed = rows(db, "SELECT prompt_id, status, error_kind, attempts FROM conversations WHERE status = 'failed'")
    assert failed == [("p1", "failed", "context_length", 2)]
    server.control(context_chars=None)
    answer_file(offline / "files/grade-requests.jsonl", offline / "out3.jsonl", server.root_url)
    assert cli.main(["batch", "import", "1", "out3.jsonl"]) == 0
    assert rows(db, "SELECT status FROM runs") == [("finished",)]  # a refusal is an answer


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda lines: [*lines, "{not json"], ":4: not a JSON line"),
        (lambda lines: [*lines, lines[0]], ":4: custom_id 'hbtui-"),
        (lambda lines: [lines[0].replace("-p0-", "-p99-"), *lines[1:]], ":1: custom_id 'hbtui-"),
        (lambda lines: [re.sub(r'"hbtui-[0-9a-f]{8}-', '"hbtui-deadbeef-', lines[0]), *lines[1:]], ":1: custom_id"),
        (
            lambda lines: [json.dumps({"custom_id": json.loads(lines[0])["custom_id"]}), *lines[1:]],
            ":1: neither a response",
        ),
    ],
)
def test_a_file_that_is_not_this_runs_output_is_one_line_and_nothing_is_stored(offline, server, capsys, change, says):
    db = offline / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "files"]) == 0
    answer_file(offline / "files/generate-requests.jsonl", offline / "out.jsonl", server.root_url, shuffle=None)
    lines = (offline / "out.jsonl").read_text().splitlines()
    (offline / "bad.jsonl").write_text("\n".join(change(lines)) + "\n")
    capsys.readouterr()
    code = cli.main(["batch", "import", "1", "bad.jsonl"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"bad.jsonl{says}" in err, err
    assert rows(db, "SELECT DISTINCT status FROM conversations") == [("pending",)]
    assert rows(db, "SELECT status, owner FROM runs") == [("awaiting batch", None)]


def test_another_runs_output_and_a_run_being_driven_are_refused(offline, server, capsys):
    db = offline / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "a"]) == 0
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "b"]) == 0
    answer_file(offline / "b/generate-requests.jsonl", offline / "b-out.jsonl", server.root_url)
    capsys.readouterr()
    assert cli.main(["batch", "import", "1", "b-out.jsonl"]) == 2
    assert "names no request of this run" in capsys.readouterr().err
    # Another live process of this host drives run 2: its owner, as it records itself.
    driver = "from hbtui.store.owners import this_owner; print(this_owner(), flush=True); import time; time.sleep(60)"
    other = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    try:
        owner = other.stdout.readline().strip() if other.stdout else ""
        with sqlite3.connect(db) as conn:
            conn.execute(
                "UPDATE runs SET status = 'running', owner = ?, heartbeat_at = strftime('%s') WHERE id = 2", (owner,)
            )
        assert cli.main(["batch", "import", "2", "b-out.jsonl"]) == 2
        assert "run 2" in capsys.readouterr().err
    finally:
        other.kill()
        other.wait()
    assert rows(db, "SELECT DISTINCT status FROM conversations WHERE run_id = 2") == [("pending",)]


def test_a_file_past_a_providers_line_limit_is_split(offline, server, capsys, monkeypatch):
    import hbtui.engine.batch_files as batch_files

    monkeypatch.setattr(batch_files, "MAX_LINES", 2)
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "files"]) == 0
    names = sorted(path.name for path in (offline / "files").iterdir())
    assert names == ["generate-requests-2.jsonl", "generate-requests.jsonl"]
    for number, name in enumerate(names):
        answer_file(offline / "files" / name, offline / f"out{number}.jsonl", server.root_url)
    capsys.readouterr()
    assert cli.main(["batch", "import", "1", "out0.jsonl"]) == 0
    assert "2 replies to generate and 2 criteria to grade" in capsys.readouterr().out  # out0: the 1 of file 2
    assert cli.main(["batch", "import", "1", "out1.jsonl"]) == 0
    graded = sorted(path.name for path in (offline / "files").iterdir())
    assert graded == [
        "grade-requests-2.jsonl",
        "grade-requests-3.jsonl",
        "grade-requests-4.jsonl",
        "grade-requests.jsonl",
    ]


async def test_the_app_shows_a_run_awaiting_its_batch_and_what_to_do(offline, server):
    """The runs list and the run's summary say it awaits its batch, with the command; `c` (continue)
    says the same instead of starting a driver that would call no one."""
    from textual.widgets import DataTable, Static

    from tests.support.browse import open_run
    from tests.support.browser_harness import browser_app

    command = ["run", "--data", "data.jsonl", "--batch-files", "files"]
    assert await asyncio.to_thread(cli.main, command) == 0  # its own event loop, in a thread of its own
    app = browser_app(offline / "runs" / "hbtui.sqlite")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        assert any("awaiting batch" in str(cell) for cell in table.get_row_at(0))
        notices: list[str] = []
        app.notify = lambda message, **_: notices.append(str(message))  # type: ignore[method-assign]
        app.screen.say = lambda message, **_: notices.append(str(message))  # type: ignore[attr-defined]
        await pilot.press("c")
        await pilot.pause()
        assert any("hbtui batch import 1 OUTPUT_FILE" in notice for notice in notices), notices
        screen = await open_run(pilot, 1)
        summary = str(screen.query_one("#run-summary", Static).render())
        assert "Status awaiting batch" in summary and "hbtui batch import 1 OUTPUT_FILE" in summary
        assert str(offline / "files") in " ".join(summary.split())
    # The monitor of it says so too, where a stopped run's reason goes, not that it ended.
    from hbtui.store import Store
    from hbtui.tui.monitor_data import view_from_store

    async with await Store.open(offline / "runs" / "hbtui.sqlite") as store:
        view = await view_from_store(store, 1)
    assert view.status == "awaiting batch" and "hbtui batch import 1 OUTPUT_FILE" in (view.error or "")


def test_an_incomplete_batch_files_run_asks_what_failed_again_through_new_files(offline, server, capsys):
    """No attempt left (MAX_ATTEMPTS 1) and every reply refused with a 5xx: the run ends
    incomplete; regrade-errors writes what failed into new request files, and the run finishes."""
    db = offline / "runs" / "hbtui.sqlite"
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "files", "--max-attempts", "1"]) == 0
    server.control(faults={"server_error": 1.0})
    answer_file(offline / "files/generate-requests.jsonl", offline / "out1.jsonl", server.root_url)
    capsys.readouterr()
    assert cli.main(["batch", "import", "1", "out1.jsonl"]) == 3  # incomplete
    assert "3 failures kept" in capsys.readouterr().out
    assert rows(db, "SELECT status FROM runs") == [("incomplete",)]
    assert cli.main(["resume", "1"]) == 2 and "regrade-errors 1 writes what failed" in capsys.readouterr().err
    assert cli.main(["regrade-errors", "1"]) == 0
    assert "3 replies to generate" in capsys.readouterr().out
    assert rows(db, "SELECT status FROM runs") == [("awaiting batch",)]
    server.control(faults={})
    answer_file(offline / "files/generate-requests.jsonl", offline / "out2.jsonl", server.root_url)
    assert cli.main(["batch", "import", "1", "out2.jsonl"]) == 0
    answer_file(offline / "files/grade-requests.jsonl", offline / "out3.jsonl", server.root_url)
    assert cli.main(["batch", "import", "1", "out3.jsonl"]) == 0
    assert rows(db, "SELECT status FROM runs") == [("finished",)]


def test_a_grader_line_for_a_conversation_without_a_reply_is_refused(offline, server, capsys):
    assert cli.main(["run", "--data", "data.jsonl", "--batch-files", "files"]) == 0
    answer_file(offline / "files/generate-requests.jsonl", offline / "out.jsonl", server.root_url, shuffle=None)
    first = json.loads((offline / "out.jsonl").read_text().splitlines()[0])
    first["custom_id"] += "-c0"  # its grader was never asked: the conversation has no reply yet
    (offline / "bad.jsonl").write_text(json.dumps(first) + "\n")
    capsys.readouterr()
    assert cli.main(["batch", "import", "1", "bad.jsonl"]) == 2
    assert "bad.jsonl:1: custom_id" in capsys.readouterr().err
