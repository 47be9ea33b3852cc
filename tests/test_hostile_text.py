"""Text from models and datasets is data: exports keep it exactly, terminal output defuses it."""

import asyncio
import csv
import json
import re
import subprocess
import sys
import time

import pytest

from hbtui import cli
from hbtui.dataset import load_jsonl
from hbtui.export import write_csv, write_jsonl
from hbtui.services import compute_report, plan_run
from hbtui.store import ReplyResult, ResultBatch, Store, VerdictResult
from hbtui.text import visible_controls
from tests.conftest import make_record, offline_settings
from tests.conftest import write_jsonl as write_records

HOSTILE = (
    "[bold red]not bold[/bold red] [link=https://evil.example]click[/link] "
    "\x1b[31mred\x1b[0m \x1b]52;c;ZXZpbA==\x07 \x1b]0;title\x07 "
    "שלום עולם مرحبا 👩‍⚕️🩺 " + "x" * 5000
)


async def hostile_run(db, data):

    settings = offline_settings(
        base_url="http://127.0.0.1:9/v1", model_test="m[bold]", model_grader="g", db_path=str(db)
    )
    async with await Store.open(db) as store:
        run_id = await plan_run(store, settings, load_jsonl(data), name="evil \x1b[31m[bold]name")
        rows = await store.pending_work(run_id)
        item = rows[0]
        now = time.time()
        await store.write_batch(
            ResultBatch(
                replies=[
                    ReplyResult(
                        item.conversation_id,
                        "generated",
                        now,
                        reply=HOSTILE,
                        reasoning="think " + HOSTILE,
                        finish_reason="stop",
                        attempts=1,
                        latency_ms=5.0,
                        prompt_tokens=3,
                        completion_tokens=4,
                    )
                ],
                verdicts=[
                    VerdictResult(
                        "met",
                        item.conversation_id,
                        0,
                        explanation=HOSTILE,
                        raw_output=json.dumps({"explanation": HOSTILE, "criteria_met": True}),
                        attempts=1,
                        latency_ms=5.0,
                        prompt_tokens=3,
                        completion_tokens=4,
                        graded_at=now,
                    )
                ],
            )
        )
        await store.refresh_summaries(run_id)
        await store.finish_run(run_id, "finished", report=await compute_report(store, run_id))
        return run_id


def test_jsonl_keeps_text_exactly_and_csv_shows_its_controls(tmp_path):
    data = write_records(tmp_path / "d.jsonl", [make_record("evil", [(HOSTILE, 5, ["axis:accuracy"])], user=HOSTILE)])
    db = tmp_path / "db.sqlite"
    run_id = asyncio.run(hostile_run(db, data))

    async def export():
        async with await Store.open(db) as store:
            await write_jsonl(store, run_id, tmp_path / "out.jsonl")
            await write_csv(store, run_id, tmp_path / "out.csv")

    asyncio.run(export())
    line = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert line["completion"] == HOSTILE
    assert line["prompt"][0]["content"] == HOSTILE
    assert line["rubrics"][0]["criterion"] == HOSTILE and line["rubrics"][0]["explanation"] == HOSTILE
    assert line["reasoning"] == "think " + HOSTILE
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    # A CSV is read in terminals (`column -s, -t`, `less`) as much as in spreadsheets.
    assert row["criterion"] == visible_controls(HOSTILE) and row["explanation"] == visible_controls(HOSTILE)


def test_terminal_output_shows_escapes_as_text(tmp_path):
    data = write_records(tmp_path / "d.jsonl", [make_record("evil", [(HOSTILE, 5, [])], user=HOSTILE)])
    db = tmp_path / "db.sqlite"
    asyncio.run(hostile_run(db, data))
    for args in (["runs"], ["show", "latest"]):
        out = subprocess.run(
            [sys.executable, "-m", "hbtui", *args, "--db", str(db)], capture_output=True, text=True, check=True
        ).stdout
        assert "\x1b" not in out and "\x07" not in out
        assert "␛[31m[bold]name" in out


# A crafted dataset: every name it gives hbtui to print carries the sequences that, obeyed by a
# terminal, write the clipboard (OSC 52), set the window title, clear the screen, ring the bell.
OSC52 = "\x1b]52;c;ZXZpbA==\x07"
TITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J\x1b[H"
EVIL_THEME = f"care{OSC52}{CLEAR}"
EVIL_AXIS = f"accuracy{TITLE}\x9b2J"  # \x9b: the one-character CSI of C1
EVIL_ID = f"p{CLEAR}{OSC52}"
EVIL_FILE = f"data{TITLE}\x07.jsonl"
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but \t and \n


def raw_controls(text: str) -> list[str]:
    return sorted(set(RAW_CONTROL.findall(text)))


@pytest.fixture
def crafted(tmp_path, server, monkeypatch):
    for name in ("BASE_URL", "API_KEY", "MODEL_TEST", "MODEL_GRADER", "HBTUI_DB"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    monkeypatch.chdir(tmp_path)
    record = make_record(
        EVIL_ID,
        [
            ("[[MET]] Advises rest", 5, [f"axis:{EVIL_AXIS}"]),
            ("[[NOT_MET]] Mentions hydration", 3, [f"axis:{EVIL_AXIS}"]),
        ],
        theme=EVIL_THEME,
    )
    return write_records(tmp_path / EVIL_FILE, [record])


def run_cli(capsys, *args: str, db: str = "runs/hbtui.sqlite") -> tuple[int, str, str]:
    code = cli.main([*args, "--db", db])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_no_command_passes_a_crafted_dataset_s_controls_to_the_terminal(crafted, tmp_path, capsys):
    outputs = {"run": run_cli(capsys, "run", "--data", str(crafted))}
    outputs["runs"] = run_cli(capsys, "runs")
    outputs["show"] = run_cli(capsys, "show", "latest")
    outputs["export csv"] = run_cli(capsys, "export", "latest", "--format", "csv", "--out", "out.csv")
    outputs["export jsonl"] = run_cli(capsys, "export", "latest", "--out", "out.jsonl")
    assert {command: code for command, (code, _, _) in outputs.items()} == dict.fromkeys(outputs, 0)
    printed = {command: out + err for command, (_, out, err) in outputs.items()}
    for command, text in printed.items():
        assert raw_controls(text) == [], (command, text)
    assert "care␛]52;c;ZXZpbA==␇␛[2J␛[H" in printed["show"]  # the theme, shown as text
    assert "accuracy␛]0;owned␇\ufffd2J" in printed["show"]  # the axis
    assert "data␛]0;owned␇␇.jsonl" in printed["run"]  # the file, in the run's name

    folder = next(path for path in (tmp_path / "runs").iterdir() if path.is_dir())
    description = (folder / "description.md").read_text(encoding="utf-8")
    csv_text = (tmp_path / "out.csv").read_text(encoding="utf-8")
    assert raw_controls(description) == [] and raw_controls(csv_text) == []
    assert "theme:care␛]52;c;ZXZpbA==␇␛[2J␛[H" in description and "p␛[2J␛[H␛]52" in csv_text
    # JSON keeps the text exactly: it escapes control characters itself.
    exported = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert exported["prompt_id"] == EVIL_ID and f"theme:{EVIL_THEME}" in exported["example_tags"]
    _code, shown, _ = run_cli(capsys, "show", "latest", "--json")
    assert raw_controls(shown) == [] and f"theme:{EVIL_THEME}" in json.loads(shown)["metrics"]


# Bad input naming crafted text: one line on stderr, exit 2, no raw control character, and the
# database as it was. {data} is the crafted file, {repeated} it twice (its prompt_id repeats).
BAD_INPUTS = {
    "missing data file": ["run", "--data", f"gone{CLEAR}\nhbtui: a forged line.jsonl"],
    "repeated prompt_id": ["run", "--data", "{repeated}"],
    "record without rubrics": ["run", "--data", "{no_rubrics}"],
    "unknown run": ["show", f"run{OSC52}"],
    "resume of an unknown run": ["resume", f"x{CLEAR}\nhbtui: forged"],
    "export into a missing folder": ["export", "latest", "--out", f"no{TITLE}/out.csv"],
    "a folder as the database": ["runs", "--db", f"folder{OSC52}"],
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_naming_crafted_text_is_one_escaped_line(crafted, tmp_path, capsys, case):
    record = json.loads(crafted.read_text())
    files = {
        "data": str(crafted),
        "repeated": str(write_records(tmp_path / f"twice{OSC52}.jsonl", [record] * 2)),
        "no_rubrics": str(write_records(tmp_path / f"bare{TITLE}.jsonl", [{**record, "rubrics": []}])),
    }
    (tmp_path / f"folder{OSC52}").mkdir()
    assert run_cli(capsys, "run", "--data", str(crafted))[0] == 0
    db = tmp_path / "runs" / "hbtui.sqlite"
    before = db.read_bytes()
    args = [arg.format(**files) if arg.startswith("{") else arg for arg in BAD_INPUTS[case]]
    code, out, err = run_cli(capsys, *args) if "--db" not in args else run_cli(capsys, *args[:-2], db=args[-1])
    assert code == 2 and out == "", (out, err)
    assert err.startswith("hbtui: error: ") and err.count("\n") == 1, err
    assert raw_controls(err) == [], err
    assert "␛" in err or "\\x1b" in err  # what it names is there, shown as text (or as Python writes it)
    assert db.read_bytes() == before
