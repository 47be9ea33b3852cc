"""Renaming and deleting a run from the command line (issue 13): the same path as the app's
runs list (hbtui.services). A delete is refused while the run is driven or a regrade reuses
its replies, removes every row of it (and its folder when asked), and gives the space back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hbtui import cli
from hbtui.store.owners import this_owner
from tests.conftest import small_records, user_folder, write_jsonl


@pytest.fixture
def two_runs(tmp_path, monkeypatch, server) -> Path:
    """A run (1, "first") and its regrade (2, "again"), in a user's folder."""
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", small_records() * 1)
    assert cli.main(["run", "--data", str(data), "--name", "first"]) == cli.EXIT_OK
    assert cli.main(["regrade", "first", "--name", "again"]) == cli.EXIT_OK
    return tmp_path / "runs" / "hbtui.sqlite"


def rows_of(db: Path, run_id: int) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table} WHERE {column} = ?", (run_id,)).fetchone()[0]
            for table, column in (("runs", "id"), ("conversations", "run_id"), ("verdicts", "run_id"))
        }


def said(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_rename_gives_a_run_a_new_unique_name_and_refuses_one_that_reads_as_another_run(two_runs, capsys):
    code, out, _ = said(capsys, "rename", "1", "baseline")
    assert code == cli.EXIT_OK and out.strip() == "run 1 renamed from 'first' to 'baseline'"
    assert said(capsys, "show", "baseline")[0] == cli.EXIT_OK
    for name, why in (("42", "all digits"), ("latest", "newest run"), ("again", "exists already")):
        code, _, err = said(capsys, "rename", "baseline", name)
        assert code == cli.EXIT_USAGE and err.count("\n") == 1 and why in err, err


def test_delete_asks_for_yes_and_refuses_a_run_whose_replies_a_regrade_uses(two_runs, capsys):
    code, _, err = said(capsys, "delete", "first")
    assert code == cli.EXIT_USAGE and "add --yes" in err and rows_of(two_runs, 1)["runs"] == 1
    code, _, err = said(capsys, "delete", "first", "--yes")
    assert code == cli.EXIT_USAGE and err.count("\n") == 1
    assert "run 1's replies are graded again by run 2 (again)" in err and rows_of(two_runs, 1)["runs"] == 1


def test_delete_refuses_a_run_being_driven(two_runs, capsys):
    with sqlite3.connect(two_runs) as conn:
        conn.execute("UPDATE runs SET status = 'running', owner = ? WHERE id = 2", (this_owner(),))
    code, _, err = said(capsys, "delete", "again", "--yes")
    assert code == cli.EXIT_USAGE and "run 2 is being driven by" in err and "cancel it first" in err
    assert rows_of(two_runs, 2)["conversations"] > 0


def test_delete_removes_every_row_the_folder_when_asked_and_reclaims_the_space(two_runs, capsys):
    with sqlite3.connect(two_runs) as conn:
        folders = dict(conn.execute("SELECT id, folder FROM runs"))
    assert all(Path(folder).is_dir() for folder in folders.values())
    kept_file = Path(folders[1]) / "my-notes.txt"
    code, out, _ = said(capsys, "delete", "again", "--yes")  # the regrade: its folder stays
    assert code == cli.EXIT_OK and out.startswith("run 2 (again) deleted: 3 conversations")
    assert "kept" in out and Path(folders[2]).is_dir()
    kept_file.write_text("mine")
    code, out, _ = said(capsys, "delete", "first", "--yes", "--folder")
    assert code == cli.EXIT_OK and "holds files hbtui did not write" in out and "the database went from" in out
    assert kept_file.exists() and not (Path(folders[1]) / "results.jsonl").exists()
    assert rows_of(two_runs, 1) == {"runs": 0, "conversations": 0, "verdicts": 0}
    with sqlite3.connect(two_runs) as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0  # no run holds them
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0  # VACUUM gave the pages back
        assert conn.execute("SELECT count(*) FROM verdict_cache").fetchone()[0] > 0  # belongs to no run
    assert "no runs yet" in said(capsys, "runs")[1]
