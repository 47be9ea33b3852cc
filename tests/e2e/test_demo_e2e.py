"""`hbtui demo` end to end: the installed llama-server answers and grades, the score is printed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import MAIN_SUBSET, needs_shared
from tests.e2e.llama import llama_paths

pytestmark = [pytest.mark.e2e, needs_shared]


def test_hbtui_demo_headless_runs_two_records_and_prints_a_score(tmp_path, reference_cache):
    if llama_paths() is None:
        pytest.skip("llama-server and SmolLM2 are not built: run scripts/build_llama_server.sh")
    # The session's HBTUI_CACHE holds the reference prompt; HBTUI_LLAMA_CACHE the installed model.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_"))}
    assert env["HBTUI_CACHE"] == str(reference_cache) and env.get("HBTUI_LLAMA_CACHE")
    demo = subprocess.run(
        [sys.executable, "-m", "hbtui", "demo", "--headless", "--limit", "2", "--data", str(MAIN_SUBSET)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert demo.returncode in (0, 3), demo.stderr  # 3: a verdict the tiny model never finished
    assert "score " in demo.stdout and "results: runs/" in demo.stdout
    assert "its scores mean nothing" in demo.stdout
    with sqlite3.connect(tmp_path / "runs" / "demo.sqlite") as conn:
        name, status, settings = conn.execute("SELECT name, status, settings_json FROM runs").fetchone()
        replies = conn.execute("SELECT count(*) FROM conversations WHERE status = 'generated'").fetchone()[0]
    assert name.startswith("demo-") and status in ("finished", "incomplete") and replies == 2
    assert json.loads(settings)["grader_template"] == "reference"  # the default prompt, as any run
    assert not (tmp_path / "runs" / "hbtui.sqlite").exists()  # never among real results
