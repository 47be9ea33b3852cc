"""Where the database cannot be written: read commands still read it, and say why, never
"not an hbtui database"; the app on a fresh clone makes its database only when a run starts."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from tests.conftest import offline_settings
from tests.support.tui import wait_for

# Root writes through any mode bits, so as root the folder is made read-only the way a
# read-only disk is: a read-only bind mount, in a mount namespace of the command's own.
READ_ONLY_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'


def hbtui_in_read_only_folder(folder: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "hbtui", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("BASE_URL", "API_KEY", "MODEL_TEST", "MODEL_GRADER")}
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return subprocess.run(command, cwd=folder.parent, env=env, capture_output=True, text=True, timeout=60)
        finally:
            folder.chmod(0o700)
    if not shutil.which("unshare"):
        pytest.skip("running as root without unshare: no way to make a folder read-only")
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c", READ_ONLY_MOUNT, str(folder), *command],
        cwd=folder.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "mount:" in result.stderr or "unshare:" in result.stderr:
        pytest.skip(f"cannot mount read-only here: {result.stderr.strip()}")
    return result


@pytest.fixture
def copied_run(finished_run_db, tmp_path) -> Path:
    """A finished run's database alone in a folder of its own, closed cleanly (no -wal)."""
    folder = tmp_path / "shared-folder"
    folder.mkdir()
    shutil.copy(finished_run_db, folder / "hbtui.sqlite")
    return folder / "hbtui.sqlite"


def test_read_commands_read_a_database_in_a_read_only_folder(copied_run):
    folder = copied_run.parent
    listing = hbtui_in_read_only_folder(folder, "runs", "--db", str(copied_run))
    assert listing.returncode == 0, listing.stderr
    assert "small-run" in listing.stdout and "finished" in listing.stdout
    shown = hbtui_in_read_only_folder(folder, "show", "latest", "--db", str(copied_run))
    assert shown.returncode == 0 and "0.625" in shown.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["hbtui.sqlite"]


def test_read_commands_read_the_newest_commits_left_in_a_wal_file(copied_run):
    folder = copied_run.parent
    # A process killed mid-run leaves its last commits in the -wal file, beside a read-only folder.
    script = (
        "import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_autocheckpoint=0');"
        "c.execute(\"UPDATE runs SET name = 'renamed-in-wal'\"); c.commit(); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", script, str(copied_run)], check=True)
    assert Path(f"{copied_run}-wal").stat().st_size > 0
    listing = hbtui_in_read_only_folder(folder, "runs", "--db", str(copied_run))
    assert listing.returncode == 0, listing.stderr
    assert "renamed-in-wal" in listing.stdout


def test_a_run_into_a_read_only_folder_says_the_folder_is_read_only(copied_run, small_dataset):
    folder = copied_run.parent
    result = hbtui_in_read_only_folder(
        folder,
        "run",
        "--db",
        str(copied_run),
        "--data",
        str(small_dataset),
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model-test",
        "m",
        "--model-grader",
        "g",
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"hbtui: error: {copied_run}: the folder {folder} is read-only")
    assert result.stderr.count("\n") == 1 and "not an hbtui database" not in result.stderr


def make_app(db: Path) -> HBTuiApp:
    return HBTuiApp(settings=offline_settings(db_path=str(db)), env_file=None)


async def test_the_app_on_a_fresh_clone_writes_no_database_until_a_run_starts(tmp_path):
    db = tmp_path / "runs" / "hbtui.sqlite"
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the configuration screen")
        await pilot.pause()
    assert not (tmp_path / "runs").exists()  # a run configured there creates it: test_tui_app


async def test_the_app_leaves_an_empty_file_as_it_is(tmp_path):
    db = tmp_path / "hbtui.sqlite"
    db.write_bytes(b"")
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the configuration screen")
    assert db.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["hbtui.sqlite"]


@pytest.mark.parametrize("name, problem", [("3", "all digits"), ("latest", "newest run"), (" 12 ", "all digits")])
async def test_the_configuration_screen_refuses_a_name_that_reads_as_a_reference(tmp_path, name, problem):
    app = make_app(tmp_path / "hbtui.sqlite")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen))
        app.screen.query_one("#field-run_name", Input).value = name
        await pilot.pause()
        message = app.screen.query_one("#message-run_name", Static)
        assert problem in str(message.render()) and message.display
        app.screen.query_one("#field-run_name", Input).value = "my-run"
        await pilot.pause()
        assert not message.display


def test_an_old_schema_in_a_read_only_folder_is_named_not_misread(tmp_path):
    from hbtui.store import schema

    folder = tmp_path / "old"
    folder.mkdir()
    db = folder / "v1.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(schema.SCHEMA_V1)
        conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 1")
    result = hbtui_in_read_only_folder(folder, "runs", "--db", str(db))
    assert result.returncode == 2 and "schema version 1 needs an upgrade" in result.stderr
    assert result.stderr.count("\n") == 1
