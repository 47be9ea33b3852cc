"""`show --json` says what a run was (issue 13): models, endpoints without keys, the dataset and
its sha256, settings, times, duration, tokens and counts, in a document with a schema_version."""

from __future__ import annotations

import hashlib
import json

from hbtui import cli
from hbtui.core.redact import without_credentials
from tests.conftest import small_records, user_folder, write_jsonl

KEY = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz"


def shown(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert cli.main(["show", *argv, "--json"]) == cli.EXIT_OK
    return json.loads(capsys.readouterr().out)


def test_show_json_gives_the_runs_metadata_and_never_a_key(tmp_path, monkeypatch, server, capsys):
    user_folder(tmp_path, monkeypatch, server, f"API_KEY={KEY}\nGRADER_API_KEY={KEY}\n")
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    assert cli.main(["run", "--data", str(data), "--name", "described", "--repeats", "2"]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["show", "described", "--json"]) == cli.EXIT_OK
    printed = capsys.readouterr().out
    document = json.loads(printed)
    assert KEY not in printed and KEY[-4:] not in printed
    assert document["schema_version"] == 1 and list(document)[:2] == ["schema_version", "run"]
    run = document["run"]
    assert (run["id"], run["name"], run["status"]) == (1, "described", "finished")  # today's keys, where they were
    assert run["models"] == {"test": "test-model", "grader": "grader-model"}
    assert run["endpoints"] == {"test": server.base_url, "grader": server.base_url}
    assert run["dataset"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert run["dataset"]["path"] == str(data) and run["dataset"]["repeats"] == 2
    assert run["settings"]["concurrency"] == 4 and "api_key" not in run["settings"]
    assert run["created_at"].endswith("+00:00") and run["finished_at"] >= run["created_at"]
    assert run["duration_seconds"] >= 0
    assert run["counts"] == {
        "conversations": 6,
        "replies": 6,
        "without_reply": 0,
        "scored": 6,
        "criteria": document["criteria"]["positive"] + document["criteria"]["negative"],
        "graded": document["criteria"]["positive"] + document["criteria"]["negative"],
        "grading_errors": 0,
        "skipped": 0,
    }
    assert document["tokens"]["test"]["output_tokens"] > 0  # token usage, where it always was


def test_description_md_says_how_long_the_run_took(tmp_path, monkeypatch, server):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    assert cli.main(["run", "--data", str(data), "--name", "timed"]) == cli.EXIT_OK
    (description,) = (tmp_path / "runs").glob("*-timed/description.md")
    text = description.read_text()
    assert "- duration: " in text and "- tokens of the grader: " in text


def test_an_endpoint_is_shown_without_its_user_and_password():
    assert without_credentials("https://someone:hunter2@api.example/v1") == "https://api.example/v1"
    assert without_credentials("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert without_credentials(None) is None
