"""What a user reads of a finished run, frozen: `show`, `show --json`, `runs`, both exports and
the run folder (`results.jsonl`, `description.md`), byte for byte against tests/render/golden/.

They were frozen before the stored report became a typed object, so that the refactor under
them could not change a character of what users, their scripts and their spreadsheets read.

Regenerate only after a change meant to show to users, then read the diff before committing:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/render/test_golden.py

The runs are made by the real engine against the project's test server, whose replies and
verdicts are fixed by their text; the bootstrap is seeded. What still differs between two
makings of the same runs is normalised, and nothing else:
- wall-clock times (`runs`' created column, description.md's started and finished, the run
  folder's name, show --json's created_at and finished_at) become <TIME> and <STAMP>, and the
  runs' durations (show --json, description.md) <DURATION>;
- the temporary folder the runs live in becomes <TMP>, the test server's port <PORT>.
The `run` command's own progress lines are not frozen.

The runs cover: criteria worth negative points, met and not met (golden-main); a generation
refused as too long, whose criteria are skipped (golden-main); a regrade, every verdict from the
cache (golden-regrade); repeats with replies that differ between them, for worst-at-k, and a
length penalty (golden-repeats); every verdict unparseable, so an incomplete run with grading
errors and no score (golden-errors); and a price table, for the cost lines.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from hbtui import cli
from tests.conftest import make_record, small_records, user_folder, write_jsonl

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
RUNS = ("golden-main", "golden-regrade", "golden-repeats", "golden-errors")
PRICES = {"test-model": {"input": 2.0, "output": 8.0}, "grader-model": {"input": 0.5, "output": 1.5}}
REFUSED_PROMPT = "Please read my whole lab report and explain every value. " * 300  # ~17,000 characters
CONTEXT_CHARS = 12_000  # the others' grader prompts fit, the refused one's question does not


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    assert path.exists(), f"{path} is missing: make it with UPDATE_GOLDEN=1 (see this module's docstring)"
    assert text == path.read_bytes().decode("utf-8"), f"{name} differs from its golden file"


def normalised(text: str, folder: Path) -> str:
    text = text.replace(str(folder.resolve()), "<TMP>").replace(str(folder), "<TMP>")
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<PORT>", text)
    text = re.sub(r"\d{8}-\d{6}-", "<STAMP>-", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00", "<TIME>", text)  # show --json's times
    text = re.sub(r'"duration_seconds": [\d.]+', '"duration_seconds": "<DURATION>"', text)
    text = re.sub(r"duration: \d+(h \d+m|m \d+s|s) ", "duration: <DURATION> ", text)
    return re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})?", "<TIME>", text)


def write_prices(config_home: str) -> None:
    path = Path(config_home) / "hbtui" / "prices.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(PRICES))


def golden_records() -> list[dict]:
    """The suite's small records, one criterion the server's hash decides, and a fourth record
    whose question is too long to be answered."""
    records = small_records()
    # The server's hash decides this one (met, as it happens): not every verdict is forced.
    records[1]["rubrics"].append(
        {"criterion": "Says when to call for help", "points": 3, "tags": ["axis:completeness"]}
    )
    refused = make_record(
        "p4",
        [("[[MET]] Reads every value", 6, ["axis:accuracy"]), ("[[MET]] Invents a value", -4, ["axis:accuracy"])],
        theme="health_data_tasks",
        user=REFUSED_PROMPT,
    )
    return [*records, refused]


def repeated_records() -> list[dict]:
    # No marker: the server's hash of each (numbered, so different) reply decides its verdicts.
    return [
        make_record(
            f"r{i}",
            [(f"Covers point {k} of question {i}", 4 - k, [f"axis:a{k}"]) for k in range(3)]
            + [(f"Overstates risk {i}", -2, ["axis:a0"])],
            user=f"question {i}",
        )
        for i in range(3)
    ]


@pytest.fixture(scope="module")
def golden_folder(fake_server, tmp_path_factory) -> Path:
    """One user folder holding the three runs, made once for the module."""
    from tests.support.fake_server import DEFAULT_CONFIG

    folder = tmp_path_factory.mktemp("golden")
    config_home = tmp_path_factory.mktemp("golden-config")
    write_prices(str(config_home))
    data = write_jsonl(folder / "data.jsonl", golden_records())
    repeated = write_jsonl(folder / "repeated.jsonl", repeated_records())
    with pytest.MonkeyPatch.context() as mp:
        user_folder(folder, mp, fake_server)
        mp.setenv("XDG_CONFIG_HOME", str(config_home))
        mp.setenv("GRADER_TEMPLATE", "builtin")  # whether or not ../shared holds the reference's
        for key in ("LENGTH_PENALTY", "LENGTH_CENTRE", "CONCURRENCY"):
            mp.delenv(key, raising=False)
        try:
            fake_server.control(**{**DEFAULT_CONFIG, "context_chars": CONTEXT_CHARS})
            assert cli.main(["run", "--data", str(data), "--name", "golden-main"]) == cli.EXIT_OK
            fake_server.control(**DEFAULT_CONFIG)
            assert cli.main(["regrade", "golden-main", "--name", "golden-regrade"]) == cli.EXIT_OK
            # One call at a time: the numbered replies (and so their verdicts) come in plan order.
            fake_server.control(**{**DEFAULT_CONFIG, "numbered_replies": True})
            fake_server.reset_stats()
            repeats = ["--repeats", "2", "--concurrency", "1", "--length-penalty", "main", "--length-centre", "50"]
            assert cli.main(["run", "--data", str(repeated), "--name", "golden-repeats", *repeats]) == cli.EXIT_OK
            fake_server.control(**{**DEFAULT_CONFIG, "grader_format": "broken"})
            mp.setenv("GRADER_PARSE_ATTEMPTS", "1")
            errors = ["--data", str(data), "--name", "golden-errors", "--limit", "2"]
            assert cli.main(["run", *errors]) == cli.EXIT_INCOMPLETE
        finally:
            fake_server.control(**DEFAULT_CONFIG)
    return folder


@pytest.fixture
def in_golden_folder(golden_folder, monkeypatch, fake_server) -> Path:
    user_folder(golden_folder, monkeypatch, fake_server)
    write_prices(os.environ["XDG_CONFIG_HOME"])  # this test's own config home (conftest's)
    for key in ("LENGTH_PENALTY", "LENGTH_CENTRE", "GRADER_TEMPLATE", "GRADER_PARSE_ATTEMPTS"):
        monkeypatch.delenv(key, raising=False)
    return golden_folder


def printed(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert cli.main(argv) == cli.EXIT_OK
    return capsys.readouterr().out


def test_the_golden_runs_hold_what_they_are_meant_to_cover(golden_folder):
    """The goldens cover these cases only while the runs have them: checked here by their rows."""
    with sqlite3.connect(golden_folder / "runs" / "hbtui.sqlite") as conn:
        runs = dict(conn.execute("SELECT name, id FROM runs"))
        failed = conn.execute(
            "SELECT prompt_id, error_kind FROM conversations WHERE status = 'failed' AND run_id = ?",
            (runs["golden-main"],),
        ).fetchall()
        negative_met = conn.execute(
            "SELECT count(*) FROM verdicts WHERE run_id = ? AND points < 0 AND status = 'met'", (runs["golden-main"],)
        ).fetchone()[0]
        from_cache = conn.execute(
            "SELECT count(*) FROM verdicts WHERE run_id = ? AND from_cache = 1", (runs["golden-regrade"],)
        ).fetchone()[0]
        errors = conn.execute(
            "SELECT count(*) FROM verdicts WHERE run_id = ? AND status = 'error'", (runs["golden-errors"],)
        ).fetchone()[0]
        repeat_scores = conn.execute(
            "SELECT position, score FROM conversations WHERE run_id = ? ORDER BY position", (runs["golden-repeats"],)
        ).fetchall()
    assert sorted(runs) == sorted(RUNS)
    assert failed == [("p4", "context_length")]
    assert negative_met == 1
    assert from_cache > 0
    assert errors > 0
    assert len({score for _, score in repeat_scores}) > 1  # the repeats differ: worst-at-k is below the mean


@pytest.mark.parametrize("name", RUNS)
def test_show_text_is_golden(in_golden_folder, capsys, name):
    argv = ["show", name] + (["--length-penalty", "main", "--length-centre", "50"] if name == "golden-repeats" else [])
    check_golden(f"{name}/show.txt", normalised(printed(capsys, argv), in_golden_folder))


@pytest.mark.parametrize("name", RUNS)
def test_show_json_is_golden(in_golden_folder, capsys, name):
    argv = ["show", name, "--json"]
    argv += ["--length-penalty", "main", "--length-centre", "50"] if name == "golden-repeats" else []
    check_golden(f"{name}/show.json", normalised(printed(capsys, argv), in_golden_folder))


@pytest.mark.parametrize("name", RUNS)
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_exports_are_golden(in_golden_folder, capsys, name, fmt):
    out = in_golden_folder / f"export-{name}.{fmt}"
    said = printed(capsys, ["export", name, "--format", fmt, "--out", str(out)])
    check_golden(f"{name}/export.{fmt}", normalised(out.read_bytes().decode("utf-8"), in_golden_folder))
    check_golden(f"{name}/export-{fmt}.said", normalised(said, in_golden_folder))


@pytest.mark.parametrize("name", RUNS)
def test_the_run_folder_is_golden(in_golden_folder, name):
    with sqlite3.connect(in_golden_folder / "runs" / "hbtui.sqlite") as conn:
        (folder,) = conn.execute("SELECT folder FROM runs WHERE name = ?", (name,)).fetchone()
    folder = in_golden_folder / folder  # stored as the run found it: relative to the user's folder here
    assert folder.parent.resolve() == (in_golden_folder / "runs").resolve()
    check_golden(f"{name}/folder-name.txt", normalised(folder.name, in_golden_folder) + "\n")
    for file in ("results.jsonl", "description.md"):
        check_golden(f"{name}/{file}", normalised((folder / file).read_bytes().decode("utf-8"), in_golden_folder))


def test_runs_is_golden(in_golden_folder, capsys):
    check_golden("runs.txt", normalised(printed(capsys, ["runs"]), in_golden_folder))


@pytest.mark.parametrize("name", RUNS)
def test_the_stored_report_is_golden(in_golden_folder, name):
    """The report's JSON as the database holds it: what older versions read, byte for byte."""
    with sqlite3.connect(in_golden_folder / "runs" / "hbtui.sqlite") as conn:
        (stored,) = conn.execute("SELECT report_json FROM runs WHERE name = ?", (name,)).fetchone()
    check_golden(f"{name}/report_json.json", stored + "\n")


def test_answered_calls_count_refusals_and_unparseable_verdicts_as_answers(golden_folder, tmp_path):
    """What the models gave: golden-main's refused reply is an answer of a kind (4 replies and 9
    verdicts); golden-errors' unparseable verdicts came from the grader too, unlike one that
    never reached it."""
    import asyncio
    import shutil

    from hbtui.store import Store

    db = Path(shutil.copy(golden_folder / "runs" / "hbtui.sqlite", tmp_path / "copy.sqlite"))
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE verdicts SET error_kind = 'connection' WHERE idx = 0 AND run_id ="
            " (SELECT id FROM runs WHERE name = 'golden-errors')"
        )

    async def answered() -> dict[str, tuple[int, int]]:
        async with await Store.open(db, create=False) as store:
            return {run.name: await store.answered_calls(run.id) for run in await store.list_runs()}

    counts = asyncio.run(answered())
    assert counts["golden-main"] == (4, 9)
    assert counts["golden-errors"] == (2, 5 - 2)  # idx 0 of both conversations never reached the grader
