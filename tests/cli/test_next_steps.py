"""Every command hbtui prints as a next step runs as printed (issue 25, item 7): a user who
installed as the README says types `.venv/bin/hbtui ...` in a shell where `hbtui` alone is
`command not found`, so that is what the next step says."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import clean_env
from tests.conftest import user_folder
from tests.engine.test_reliability import many_records, wait_for_answers

SCRIPT = Path(sys.executable).parent / "hbtui"  # the console script pip installed beside this python


def shell_env() -> dict[str, str]:
    """The environment of a shell where the venv is not activated: no hbtui on PATH."""
    env = clean_env()
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "hbtui").exists()
    )
    return env


@pytest.mark.skipif(not SCRIPT.exists(), reason="hbtui's console script is not installed beside this python")
def test_the_resume_printed_after_ctrl_c_runs_as_printed(tmp_path, monkeypatch, server):
    folder = user_folder(tmp_path, monkeypatch, server)
    data = many_records(folder / "data.jsonl", 12)
    server.control(latency_ms=40)
    relative = os.path.relpath(SCRIPT, folder)  # as typed from the folder: ../.venv/bin/hbtui
    runner = subprocess.Popen(
        [relative, "run", "--data", str(data), "--name", "half"],
        cwd=folder,
        env=shell_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_answers(folder / "runs" / "hbtui.sqlite", 5, runner)
    finally:
        runner.send_signal(signal.SIGINT)
        _, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err
    printed = err.strip().splitlines()[-1].split("continue with: ", 1)[1]
    assert printed == f"{relative} resume 1"
    server.control(latency_ms=0)

    resumed = subprocess.run(
        printed, shell=True, cwd=folder, env=shell_env(), capture_output=True, text=True, timeout=120
    )

    assert resumed.returncode == 0, resumed.stderr
    assert "command not found" not in resumed.stderr
    # The same line, typed where `hbtui` alone is not found, would not have run.
    bare = subprocess.run(
        shlex.join(["hbtui", "resume", "1"]), shell=True, cwd=folder, env=shell_env(), capture_output=True, text=True
    )
    assert bare.returncode == 127


@pytest.mark.skipif(not SCRIPT.exists(), reason="hbtui's console script is not installed beside this python")
def test_the_resume_that_runs_and_pause_name_for_a_silent_driver_is_as_invoked(tmp_path, monkeypatch, server):
    """`hbtui runs` and `hbtui pause` on a run whose driver went silent name the resume that takes
    it over: as typed (`../.venv/bin/hbtui resume 1`), where `hbtui` alone is not found."""
    import sqlite3
    import time

    folder = user_folder(tmp_path, monkeypatch, server)
    data = many_records(folder / "data.jsonl", 2)
    relative = os.path.relpath(SCRIPT, folder)
    done = subprocess.run([relative, "run", "--data", str(data)], cwd=folder, env=shell_env(), capture_output=True)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(folder / "runs" / "hbtui.sqlite") as conn:  # driven elsewhere, silent for an hour
        conn.execute(
            "UPDATE runs SET status = 'running', owner = 'otherhost:123:1', heartbeat_at = ?", (time.time() - 3600,)
        )
    for command in (["runs"], ["pause", "1"]):
        shown = subprocess.run([relative, *command], cwd=folder, env=shell_env(), capture_output=True, text=True)
        assert f"{relative} resume 1" in shown.stdout + shown.stderr, shown.stdout + shown.stderr
