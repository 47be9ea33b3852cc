"""A small meta-eval against a real model behind llama.cpp's server (SmolLM2-135M-Instruct).

The model's verdicts are poor; this asserts the protocol and what is stored, never their quality.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from tests.e2e.test_llama_e2e import e2e_env, llama  # noqa: F401 (the module's server fixture)
from tests.support.meta_rows import meta_rows, write_rows

pytestmark = [pytest.mark.e2e]


def test_a_small_meta_eval_against_llama_server_stores_verdicts_beside_labels(llama, tmp_path):  # noqa: F811
    rows = meta_rows(4, seed=2, physicians=3, labels=(2, 3))
    for row in rows:  # short conversations: CPU inference of the grader prompt is the slow part
        row["prompt"] = [{"role": "user", "content": "My knee hurts after running. What should I do?"}]
    data = write_rows(tmp_path / "meta.jsonl", rows)
    db = tmp_path / "runs" / "e2e.sqlite"
    run = subprocess.run(
        [sys.executable, "-m", "hbtui", "meta-eval", "--data", str(data), "--db", str(db), "--name", "e2e-meta"],
        cwd=tmp_path,
        env=e2e_env(llama.base_url),
        capture_output=True,
        text=True,
        timeout=900,
    )
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT status, raw_output, prompt_tokens, labels FROM meta_eval_rows").fetchall()
        kind, status = conn.execute("SELECT kind, status FROM runs").fetchone()
    assert kind == "meta-eval" and len(stored) == 4
    # A verdict the tiny model never finished is a grading error: the run is then incomplete (exit 3).
    errors = sum(1 for s in stored if s[0] == "error")
    assert run.returncode == (3 if errors else 0), run.stderr
    assert status == ("incomplete" if errors else "finished")
    assert all(s[0] in ("met", "not_met", "error") and s[1] and s[2] for s in stored)
    shown = subprocess.run(
        [sys.executable, "-m", "hbtui", "show", "e2e-meta", "--json", "--db", str(db)],
        cwd=tmp_path,
        env=e2e_env(llama.base_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = json.loads(shown.stdout)["meta_eval"]
    assert summary["rows"] == 4 and summary["judged"] == 4 - errors
