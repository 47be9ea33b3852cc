"""The headless commands as a user types them: a real process, the test server, a real database."""

import asyncio
import csv
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys

import pytest

from hbtui.render.report import render_runs
from hbtui.store import Store
from tests.support.synth import synthesize_run

SECRET = "fake-MARKER-7f3a9c1e5b2d4680aa11"


def clean_env(env_extra=None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BASE_URL", "API_KEY", "MODEL_TEST", "MODEL_GRADER")}
    env.update(env_extra or {})
    return env


def hbtui(*args, cwd, env_extra=None, check=False, timeout=120):
    result = subprocess.run(
        [sys.executable, "-m", "hbtui", *args],
        cwd=cwd,
        env=clean_env(env_extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def workdir(tmp_path, server):
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nAPI_KEY={SECRET}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n"
        "CONCURRENCY=4\n"
    )
    return tmp_path


def test_run_show_export_runs(workdir, small_dataset):
    result = hbtui("run", "--data", str(small_dataset), "--name", "cli-run", cwd=workdir, check=True)
    assert "run 1 cli-run" in result.stdout
    assert "score 0.6250" in result.stdout  # (0.5 + 1.0 + 0.375) / 3
    db = workdir / "runs" / "hbtui.sqlite"
    assert db.exists() and not stat.S_IMODE(db.stat().st_mode) & 0o077

    shown = json.loads(hbtui("show", "latest", "--json", cwd=workdir, check=True).stdout)
    assert shown["overall_score"] == pytest.approx(0.625)
    overall = shown["metrics"]["overall_score"]
    assert set(overall) == {"value", "n", "bootstrap_std", "ci95"} and overall["n"] == 3
    assert shown["metrics"]["theme:hedging"]["value"] == 0.5
    assert "axis:accuracy" in shown["metrics"]

    text = hbtui("show", "cli-run", cwd=workdir, check=True).stdout
    assert "theme" in text and "axis" in text and "conversation scores" in text

    out = workdir / "out.jsonl"
    hbtui("export", "1", "--format", "jsonl", "--out", str(out), cwd=workdir, check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["prompt_id"] for line in lines] == ["p1", "p2", "p3"]
    assert lines[0]["score"] == 0.5
    assert set(lines[0]) >= {"prompt_id", "example_tags", "prompt", "completion", "score", "rubrics"}
    assert [r["criteria_met"] for r in lines[0]["rubrics"]] == [True, False, True, True]
    assert all(r["explanation"] for r in lines[0]["rubrics"])

    out_csv = workdir / "out.csv"
    hbtui("export", "latest", "--format", "csv", "--out", str(out_csv), cwd=workdir, check=True)
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 8 and rows[0]["criteria_met"] == "true"

    listing = hbtui("runs", cwd=workdir, check=True).stdout
    assert "cli-run" in listing and "finished" in listing

    folders = [p for p in (workdir / "runs").iterdir() if p.is_dir()]
    assert len(folders) == 1 and folders[0].name.endswith("-cli-run")
    assert (folders[0] / "results.jsonl").read_text() == out.read_text()
    description = (folders[0] / "description.md").read_text()
    assert "test-model" in description and "0.6250" in description and "seed 0" in description

    # The key never lands in anything the app wrote.
    for path in workdir.rglob("*"):
        if path.is_file() and path.name != ".env":
            assert SECRET.encode() not in path.read_bytes(), path
            assert SECRET[-12:].encode() not in path.read_bytes(), path


def test_bad_inputs_are_one_line_errors(workdir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt_id": "x", "prompt": []}\n')
    result = hbtui("run", "--data", str(bad), cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"{bad}:1:" in result.stderr and "Traceback" not in result.stderr

    result = hbtui("run", "--data", str(bad), "--concurrency", "-3", cwd=workdir)
    assert result.returncode == 2 and "CONCURRENCY (command line)" in result.stderr

    result = hbtui("show", "nope", cwd=workdir)
    assert "no such database" in result.stderr or "no run" in result.stderr

    notdb = tmp_path / "not.sqlite"
    notdb.write_text("hello, I am not a database" * 100)
    result = hbtui("runs", "--db", str(notdb), cwd=workdir)
    assert result.returncode == 2 and "not an hbtui database" in result.stderr and "Traceback" not in result.stderr
    assert notdb.read_text().startswith("hello")


def test_resume_of_unknown_run_names_it(workdir, small_dataset):
    hbtui("run", "--data", str(small_dataset), "--name", "one", cwd=workdir, check=True)
    result = hbtui("resume", "two", cwd=workdir)
    assert result.returncode == 2 and "no run 'two'" in result.stderr
    db = workdir / "runs" / "hbtui.sqlite"
    ended = sqlite3.connect(db).execute("SELECT finished_at, status FROM runs").fetchone()
    result = hbtui("resume", "one", cwd=workdir, check=True)  # nothing missing: the run is left as it ended
    assert result.stdout.strip() == "run 1 is finished: nothing to resume"
    # Its end and duration are what it measured (a resume had moved them to the resume's time).
    assert sqlite3.connect(db).execute("SELECT finished_at, status FROM runs").fetchone() == ended


def test_a_bad_env_value_does_not_lock_the_user_out_of_browsing(workdir, small_dataset):
    hbtui("run", "--data", str(small_dataset), "--name", "kept", cwd=workdir, check=True)
    env = workdir / ".env"
    env.write_text(env.read_text() + "CONCURRENCY=abc\n")
    listing = hbtui("runs", cwd=workdir)
    assert listing.returncode == 0 and "kept" in listing.stdout
    assert "CONCURRENCY (.env:6): 'abc' is not a whole number; using the default" in listing.stderr
    run = hbtui("run", "--data", str(small_dataset), cwd=workdir)  # a run is never started on a guess
    assert run.returncode == 2 and "CONCURRENCY" in run.stderr


def test_a_resume_on_another_endpoint_and_model_records_them(tmp_path, small_dataset, server):
    (tmp_path / ".env").write_text(
        "BASE_URL=http://127.0.0.1:9/v1\nMODEL_TEST=typo-model\nMODEL_GRADER=grader-model\nMAX_ATTEMPTS=1\n"
    )
    failed = hbtui("run", "--data", str(small_dataset), "--name", "moved", cwd=tmp_path)
    assert failed.returncode == 1
    resumed = hbtui("resume", "moved", "--base-url", server.base_url, "--model-test", "test-model", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "settings changed for this resume:" in resumed.stdout + resumed.stderr
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        model, settings, folder = conn.execute("SELECT model_test, settings_json, folder FROM runs").fetchone()
    assert model == "test-model" and json.loads(settings)["base_url"] == server.base_url
    description = (tmp_path / folder / "description.md").read_text()  # the folder is kept relative to where hbtui ran
    assert f"model under test: test-model at {server.base_url}" in description


def test_failed_run_says_why_in_show(tmp_path, small_dataset):
    (tmp_path / ".env").write_text("BASE_URL=http://127.0.0.1:9/v1\nMODEL_TEST=m\nMODEL_GRADER=g\nMAX_ATTEMPTS=1\n")
    run = hbtui("run", "--data", str(small_dataset), cwd=tmp_path)
    assert run.returncode == 1 and "cannot reach http://127.0.0.1:9/v1" in run.stderr
    assert "a run keeps its endpoint; to move it: hbtui resume 1 --base-url URL" in run.stderr
    shown = hbtui("show", "latest", cwd=tmp_path, check=True).stdout
    assert "error: connection: cannot reach" in shown
    assert json.loads(hbtui("show", "latest", "--json", cwd=tmp_path, check=True).stdout)["run"]["error"]


def test_export_into_a_missing_folder_is_refused(workdir, small_dataset):
    hbtui("run", "--data", str(small_dataset), cwd=workdir, check=True)
    result = hbtui("export", "latest", "--out", str(workdir / "nowhere" / "x.csv"), "--format", "csv", cwd=workdir)
    assert result.returncode == 2 and "does not exist" in result.stderr
    assert not (workdir / "nowhere").exists()


def test_db_before_or_after_the_command(workdir, small_dataset):
    db = workdir / "elsewhere.sqlite"
    hbtui("run", "--data", str(small_dataset), "--db", str(db), "--name", "here", cwd=workdir, check=True)
    before = hbtui("--db", str(db), "runs", cwd=workdir, check=True).stdout
    after = hbtui("runs", "--db", str(db), cwd=workdir, check=True).stdout
    assert "here" in before and before == after


def test_the_runs_table_fits_a_terminal_and_keeps_names_apart(tmp_path):
    db = tmp_path / "runs.sqlite"
    names = [f"test-model-healthbench_hard_subset-20261130-0614{second:02d}" for second in (6, 7, 8)]

    async def make():
        async with await Store.open(db) as store:
            for name in names:
                await synthesize_run(store, conversations=5, name=name)
            return await store.list_runs()

    runs = asyncio.run(make())
    *table, said = render_runs(runs, 80).splitlines()
    assert all(len(line) <= 80 for line in [*table, said]), table
    assert said == "(created, grader, data left out at 80 columns; piped, the table keeps them)"
    assert table[0].split()[:6] == ["id", "name", "status", "score", "95%", "CI"]
    # Cut in the middle: the ends (the times) still tell the three runs apart.
    assert [line.split()[1][-6:] for line in table[1:]] == ["061408", "061407", "061406"]
    whole = render_runs(runs).splitlines()  # piped: nothing cut
    assert all(name in "\n".join(whole) for name in names) and "grader" in whole[0] and "data" in whole[0]


def test_a_paused_run_is_listed_as_paused(tmp_path):
    db = tmp_path / "runs.sqlite"

    async def make():
        async with await Store.open(db) as store:
            run_id = await synthesize_run(store, conversations=3, name="held")
            lease = await store.claim_run(run_id, f"{socket.gethostname()}:{os.getpid()}")  # a live process drives it
            await store.heartbeat(run_id, lease, {"paused": True})
            return await store.list_runs()

    (run,) = asyncio.run(make())
    assert run.shown_status() == "running"  # still driven: what decides whether it may be resumed
    assert run.status_label() == "paused"
    assert render_runs([run]).splitlines()[1].split()[2] == "paused"


def mode_of(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_written_over_become_owner_only(finished_run_db, capsys):
    from hbtui import cli
    from hbtui.render.export import write_run_folder

    runs_root = finished_run_db.parent
    for name in ("out.jsonl", "out.csv"):
        (runs_root / name).write_text("an old export, readable by all\n")
        (runs_root / name).chmod(0o644)
    for fmt in ("jsonl", "csv"):
        assert (
            cli.main(
                [
                    "export",
                    "latest",
                    "--format",
                    fmt,
                    "--out",
                    str(runs_root / f"out.{fmt}"),
                    "--db",
                    str(finished_run_db),
                    "--force",  # replacing a file is asked for
                ]
            )
            == 0
        )
    assert capsys.readouterr().err == ""
    for name in ("out.jsonl", "out.csv"):
        assert mode_of(runs_root / name) == 0o600 and "an old export" not in (runs_root / name).read_text()

    # A run finished again (resume, regrade) writes its folder over: the folder and its files too.
    folder = next(path for path in runs_root.iterdir() if path.is_dir())
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)

    async def rewrite():
        async with await Store.open(finished_run_db) as store:
            return await write_run_folder(store, (await store.list_runs())[0], runs_root)

    assert asyncio.run(rewrite()) == folder
    assert mode_of(folder) == 0o700
    assert {path.name: mode_of(path) for path in folder.iterdir()} == {"results.jsonl": 0o600, "description.md": 0o600}


def test_a_database_open_to_others_is_said_once_and_left_as_it_is(finished_run_db, capsys):
    from hbtui import cli

    finished_run_db.chmod(0o644)  # shared with a teammate, perhaps on purpose
    assert cli.main(["show", "latest", "--db", str(finished_run_db)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hbtui: warning:")]
    assert len(warnings) == 1 and f"database {finished_run_db} is open to other users (mode 0644)" in warnings[0]
    assert mode_of(finished_run_db) == 0o644
    finished_run_db.chmod(0o600)
    assert cli.main(["runs", "--db", str(finished_run_db)]) == 0
    assert capsys.readouterr().err == ""


def hbtui_read_one_line(*args, cwd) -> tuple[int, bytes, bytes]:
    """hbtui piped into a reader that stops after one line, as `| head -1` does: (exit status,
    the line, stderr)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "hbtui", *args], cwd=cwd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read()
    return process.wait(timeout=60), first, stderr


def test_runs_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path):
    db = tmp_path / "many.sqlite"

    async def make():
        async with await Store.open(db) as store:
            for number in range(600):  # about 100 kB of table: more than a pipe holds
                await synthesize_run(
                    store, conversations=1, criteria_per=1, seed=number, name=f"run-{number:04d}-{'long-name-' * 6}"
                )

    asyncio.run(make())
    code, first, stderr = hbtui_read_one_line("runs", "--db", str(db), cwd=tmp_path)
    assert code == 141  # 128 + SIGPIPE, as `cat` or `seq` in its place
    assert first.startswith(b"id ") and stderr == b""


def test_a_run_whose_output_reader_stops_early_still_finishes(workdir, small_dataset):
    code, first, stderr = hbtui_read_one_line("run", "--data", str(small_dataset), "--name", "unread", cwd=workdir)
    assert code == 0 and first.startswith(b"run 1 unread") and stderr == b""
    with sqlite3.connect(workdir / "runs" / "hbtui.sqlite") as conn:
        assert conn.execute("SELECT status FROM runs").fetchone() == ("finished",)


def test_a_run_that_skips_the_interpreters_teardown_loses_none_of_its_output(workdir, small_dataset):
    """`hbtui run` ends with os._exit (cli.entry): output Python still buffers (stdout into a
    pipe, without PYTHONUNBUFFERED) is written first, and the database was closed whole before."""
    # An empty PYTHONUNBUFFERED is an unset one (this machine sets it to 1).
    result = hbtui(
        "run", "--data", str(small_dataset), "--name", "buffered", cwd=workdir, env_extra={"PYTHONUNBUFFERED": ""}
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("run 1 buffered") and "score 0.6250" in result.stdout
    assert lines[-1].startswith("results: ")
    assert (workdir / lines[-1].removeprefix("results: ") / "results.jsonl").is_file()
    db = workdir / "runs" / "hbtui.sqlite"
    assert not db.with_name(f"{db.name}-wal").exists()  # closed, its log written back into the file


def test_a_command_imports_only_its_own_group(tmp_path):
    """`hbtui` imports a command's module when that command runs: a run's start never pays for
    what only `estimate`, `show` or `batch import` need. Here `hbtui runs` on an empty folder."""
    code = (
        "import json, sys; from hbtui import cli; code = cli.main(['runs', '--db', 'none.sqlite']);"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('hbtui.cli.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "hbtui.cli.reading" in loaded, done.stderr
    assert not {"hbtui.cli.runs", "hbtui.cli.estimate", "hbtui.cli.batch", "hbtui.cli.app"} & set(loaded), loaded
