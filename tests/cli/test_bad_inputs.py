"""The bad-input corpus: every case is one line on stderr naming the file, line, field or key,
exit 2, no traceback, and the database (every file in the folder) exactly as it was.

Most run in this process through ``cli.main`` (fast); a few as real processes, as typed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from hbtui.cli import main
from hbtui.core.settings.config import BY_KEY
from hbtui.store import Store, schema
from tests.cli.test_cli import hbtui
from tests.conftest import make_record
from tests.core.test_dataset import CASES as DATASET_CASES
from tests.support.synth import synthesize_run

UNREACHABLE = "http://127.0.0.1:9/v1"  # nothing is ever called: each case stops before a call
DB = "runs/hbtui.sqlite"


def record_line(**changes) -> str:
    record = make_record("bad-1", [("Advises rest", 5, ["axis:accuracy"])])
    record.update(changes)
    return json.dumps(record)


def criterion(points) -> str:
    return record_line(rubrics=[{"criterion": "x", "points": "POINTS", "tags": []}]).replace('"POINTS"', points)


def messages(*pairs) -> list[dict]:
    return [{"role": role, "content": content} for role, content in pairs]


# name: (dataset text, line, what the message names)
DATASETS = {
    **{f"test_dataset: {name}": case for name, case in DATASET_CASES.items()},
    "100,000 nested [": ("[" * 100_000, "1", "nested too deeply"),
    "100,000 nested {": ('{"a": ' * 100_000, "1", "nested too deeply"),
    "unknown role before the last message": (
        record_line(prompt=messages(("robot", "beep"), ("user", "hi"))),
        "1",
        "prompt[0].role': 'robot'",
    ),
    "role not a string": (record_line(prompt=[{"role": 3, "content": "hi"}]), "1", "prompt[0].role"),
    "content not a string": (record_line(prompt=[{"role": "user", "content": None}]), "1", "prompt[0].content"),
    "points 1e308": (criterion("1e308"), "1", "rubrics[0].points': 1e+308 is beyond"),
    "points -1e308": (criterion("-1e308"), "1", "rubrics[0].points': -1e+308 is beyond"),
    "points overflowing to inf": (criterion("1e999"), "1", "rubrics[0].points': inf is not a number"),
    "points NaN": (criterion("NaN"), "1", "rubrics[0].points': nan is not a number"),
    "points -Infinity": (criterion("-Infinity"), "1", "rubrics[0].points': -inf is not a number"),
    "points an integer too large for a float": (criterion("1" + "0" * 400), "1", "rubrics[0].points'"),
    "lone surrogate in a message": (
        record_line(prompt=messages(("user", "hi \ud800"))),
        "1",
        "'prompt[0].content': holds a lone surrogate",
    ),
    "lone surrogate in a criterion": (
        record_line(rubrics=[{"criterion": "x\udc00", "points": 1, "tags": []}]),
        "1",
        "'rubrics[0].criterion'",
    ),
    "lone surrogate in the prompt id": (record_line(prompt_id="p\ud800"), "1", "'prompt_id': holds a lone"),
    "lone surrogate in a tag": (record_line(example_tags=["theme:\udbff"]), "1", "'example_tags[0]'"),
    "a record that is a list": ("[1, 2]", "1", "must be a JSON object"),
    "tags not a list": (record_line(rubrics=[{"criterion": "x", "points": 1, "tags": "a"}]), "1", "rubrics[0].tags"),
    "example tags not strings": (record_line(example_tags=[1]), "1", "'example_tags'"),
    "blank criterion": (
        record_line(rubrics=[{"criterion": " ", "points": 1, "tags": []}]),
        "1",
        "rubrics[0].criterion",
    ),
    "rubric not an object": (record_line(rubrics=["x"]), "1", "'rubrics[0]'"),
    "a bad record after a good one": (record_line(prompt_id="ok") + "\n\n" + criterion("1e308"), "3", "points"),
}


@pytest.fixture
def folder(tmp_path, monkeypatch, reference_cache) -> Path:
    """A user's folder: a .env for an endpoint, and a database holding one finished run, "kept"."""
    for key in BY_KEY:
        if key not in ("HBTUI_CACHE", "GRADER_TEMPLATE"):  # the session's offline cache stays
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the price table's home
    (tmp_path / ".env").write_text(f"BASE_URL={UNREACHABLE}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")

    async def make():
        async with await Store.open(tmp_path / DB) as store:
            await synthesize_run(store, conversations=3, criteria_per=2, name="kept")

    asyncio.run(make())
    return tmp_path


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_line_error(capsys, argv: list[str], *named: str, code: int = 2) -> str:
    """Runs ``hbtui argv`` here; the folder it runs in must be left exactly as it was."""
    root = Path.cwd()
    before = snapshot(root)
    try:
        returned = main(argv)
    except SystemExit as exc:  # argparse's own errors
        returned = exc.code
    _out, err = capsys.readouterr()
    assert returned == code, (returned, err)
    assert err.startswith("hbtui: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "internal error" not in err
    for text in named:
        assert text in err, err
    assert snapshot(root) == before
    return err


@pytest.mark.parametrize("case", sorted(DATASETS))
def test_dataset(folder, capsys, case):
    text, line, named = DATASETS[case]
    data = folder / "data.jsonl"
    data.write_text(text + "\n", encoding="utf-8")
    one_line_error(capsys, ["run", "--data", str(data)], f"{data}:{line}: ", named)


def test_dataset_not_utf8(folder, capsys):
    data = folder / "data.jsonl"
    data.write_bytes(record_line().encode() + b"\n" + b'{"prompt_id": "\xff"}\n')
    one_line_error(capsys, ["run", "--data", str(data)], f"{data}:2: not UTF-8 (byte 0xff")


@pytest.mark.parametrize(
    "name, make, named",
    [
        ("empty file", lambda p: p.write_text(""), "no records"),
        ("missing file", lambda p: None, "no such file"),
        ("a directory", lambda p: p.mkdir(), "is a directory"),
    ],
)
def test_dataset_file(folder, capsys, name, make: Callable[[Path], None], named):
    data = folder / "data.jsonl"
    make(data)
    one_line_error(capsys, ["run", "--data", str(data)], str(data), named)


@pytest.fixture
def good_data(folder) -> Path:
    data = folder / "good.jsonl"
    data.write_text(record_line(prompt_id="g1") + "\n" + record_line(prompt_id="g2") + "\n")
    return data


SETTING_FLAGS = {
    "negative concurrency": (["--concurrency", "-3"], "CONCURRENCY (command line)"),
    "concurrency a word": (["--concurrency", "abc"], "'abc' is not a whole number"),
    "timeout zero": (["--timeout", "0"], "TIMEOUT (command line): 0"),
    "timeout a word": (["--timeout", "soon"], "TIMEOUT (command line): 'soon'"),
    "temperature out of range": (["--temperature-test", "9"], "TEMPERATURE_TEST (command line): 9"),
    "temperature not finite": (["--temperature-grader", "nan"], "TEMPERATURE_GRADER"),
    "max attempts zero": (["--max-attempts", "0"], "MAX_ATTEMPTS (command line)"),
    "max tokens a word": (["--max-tokens-test", "many"], "MAX_TOKENS_TEST"),
    "reasoning effort unknown": (["--reasoning-test", "extreme"], "REASONING_TEST (command line): 'extreme'"),
    "base url not a url": (["--base-url", "localhost:8080"], "BASE_URL (command line): 'localhost:8080'"),
    "grader template missing": (["--grader-template", "nowhere.txt"], "GRADER_TEMPLATE nowhere.txt: no such file"),
    "limit zero": (["--limit", "0"], "--limit 0: must be at least 1"),
    "limit above the records": (["--limit", "3"], "--limit 3: the dataset has only 2 records"),
    "repeats zero": (["--repeats", "0"], "--repeats 0"),
    "limit a word": (["--limit", "abc"], "argument --limit: invalid int value: 'abc'"),
    "an unknown flag": (["--colour", "red"], "unrecognized arguments: --colour red"),
    "name all digits": (["--name", "3"], "--name '3': is all digits"),
    "name latest": (["--name", "latest"], "--name 'latest': means the newest run"),
    "name empty": (["--name", " "], "--name ' ': is empty"),
    "name taken": (["--name", "kept"], "a run named 'kept' exists already"),
    "length penalty a word": (["--length-penalty", "lots"], "LENGTH_PENALTY (command line): 'lots' is not a penalty"),
    "length penalty negative": (["--length-penalty", "-0.03"], "LENGTH_PENALTY (command line): '-0.03'"),
    "length penalty not finite": (["--length-penalty", "inf"], "LENGTH_PENALTY (command line): 'inf'"),
    "length centre a subset name misspelled": (["--length-centre", "mian"], "LENGTH_CENTRE (command line): 'mian'"),
    "length centre negative": (["--length-centre", "-5"], "LENGTH_CENTRE (command line): '-5' is not a centre"),
}


@pytest.mark.parametrize("case", sorted(SETTING_FLAGS))
def test_run_flag(folder, good_data, capsys, case):
    flags, named = SETTING_FLAGS[case]
    one_line_error(capsys, ["run", "--data", str(good_data), *flags], named)


ENV_VALUES = {
    "concurrency a word": ("CONCURRENCY=abc", "CONCURRENCY (.env:4): 'abc' is not a whole number"),
    "timeout negative": ("TIMEOUT=-1", "TIMEOUT (.env:4)"),
    "base url without a scheme": ("BASE_URL=127.0.0.1:8080", "BASE_URL (.env:4)"),
    "reasoning effort misspelled": ("REASONING_GRADER=hgih", "REASONING_GRADER (.env:4): 'hgih'"),
    "grader template without its slots": (
        "GRADER_TEMPLATE=slotless.txt",
        "the placeholder <<conversation>> is missing",
    ),
    "length penalty misspelled": ("LENGTH_PENALTY=hardd", "LENGTH_PENALTY (.env:4): 'hardd' is not a penalty"),
    "length centre NaN": ("LENGTH_CENTRE=nan", "LENGTH_CENTRE (.env:4): 'nan'"),
    # Every number is bounded: a value past sense is refused, not tried (a billion workers).
    "concurrency a billion": ("CONCURRENCY=1000000000", "CONCURRENCY (.env:4): 1000000000 is outside 1 to 4,096"),
    "grader concurrency 0": ("GRADER_CONCURRENCY=0", "GRADER_CONCURRENCY (.env:4): 0 is outside 1 to 4,096"),
    "max tokens ten billion": (
        "MAX_TOKENS_TEST=10000000000",
        "MAX_TOKENS_TEST (.env:4): 10000000000 is outside 1 to 1,000,000",
    ),
    "max attempts 1000": ("MAX_ATTEMPTS=1000", "MAX_ATTEMPTS (.env:4): 1000 is outside 1 to 100"),
    "timeout a year": ("TIMEOUT=31536000", "TIMEOUT (.env:4): 3.1536e+07 is outside the range above 0 to 86,400"),
    "rpm 1e12": ("RPM=1e12", "RPM (.env:4): 1e+12 is outside the range above 0 to 10,000,000,000"),
    "answer limit 0": ("MAX_ANSWER_MIB=0", "MAX_ANSWER_MIB (.env:4): 0 is outside the range above 0 to 1,024"),
    "length penalty 1e6": ("LENGTH_PENALTY=1e6", "LENGTH_PENALTY (.env:4): 1e+06 is outside 0 to 100"),
    "concurrency times endpoints": (
        "CONCURRENCY=3000\nBASE_URL=http://127.0.0.1:9/v1,http://127.0.0.2:9/v1",
        "CONCURRENCY 3,000 x 2 endpoints of BASE_URL = 6,000 calls in flight, more than 4,096",
    ),
}


@pytest.mark.parametrize("case", sorted(ENV_VALUES))
def test_env_value(folder, good_data, capsys, case, monkeypatch):
    line, named = ENV_VALUES[case]
    monkeypatch.delenv(line.split("=", 1)[0], raising=False)  # the .env's value is the one under test
    (folder / "slotless.txt").write_text("grade this\n")
    env = folder / ".env"
    env.write_text(env.read_text() + line + "\n")
    one_line_error(capsys, ["run", "--data", str(good_data)], named)


# name: (a line the .env of `folder` gets after a blank line, so on line 5, what the message says)
ENV_FILE_LINES = {
    "a known key without =": ("MODEL_GRADER", ".env:5: 'MODEL_GRADER' has no '='"),
    "a line that is no KEY=value": ("use the grader below", ".env:5: not a KEY=value line"),
    "an unterminated quote": ('MODEL_TEST="gpt-4.1', ".env:5: the quote that opens the value of 'MODEL_TEST' is not"),
    "a NUL byte in a value": ("MODEL_TEST=test\0model", ".env:5: the value of 'MODEL_TEST' holds a NUL byte"),
}
CALLING_COMMANDS = {
    "run": ["run", "--data", "good.jsonl"],
    "resume": ["resume", "kept"],
    "regrade-errors": ["regrade-errors", "kept"],
    "check": ["check"],
}


def add_env_line(folder: Path, line: str) -> None:
    env = folder / ".env"
    env.write_text(env.read_text() + "\n" + line + "\n")


@pytest.mark.parametrize("command", sorted(CALLING_COMMANDS))
@pytest.mark.parametrize("case", sorted(ENV_FILE_LINES))
def test_env_file_line_stops_a_command_that_calls(folder, good_data, capsys, case, command):
    line, named = ENV_FILE_LINES[case]
    add_env_line(folder, line)
    one_line_error(capsys, CALLING_COMMANDS[command], named)


@pytest.mark.parametrize("command", ["runs", "show", "export"])
@pytest.mark.parametrize("case", sorted(ENV_FILE_LINES))
def test_env_file_line_is_a_warning_for_a_command_that_reads(folder, capsys, case, command):
    line, named = ENV_FILE_LINES[case]
    add_env_line(folder, line)
    assert main(READ_COMMANDS[command]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"hbtui: warning: {named}") and err.count("\n") == 1, err


def test_env_file_named_and_missing(folder, capsys):
    one_line_error(capsys, ["runs", "--env-file", "typo.env"], "--env-file typo.env: no such file")
    one_line_error(capsys, ["check", "--env-file", "typo.env"], "--env-file typo.env: no such file")


def test_the_default_env_file_missing_is_no_problem(folder, capsys):
    (folder / ".env").unlink()
    assert main(["runs"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("case", sorted(ENV_FILE_LINES))
def test_env_file_line_as_a_real_process_calls_nothing(tmp_path, server, case):
    """`check` stops before its first call: the value with a NUL byte never reaches the server."""
    line, named = ENV_FILE_LINES[case]
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    add_env_line(tmp_path, line)
    result = hbtui("check", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"hbtui: error: {named}") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert server.stats()["requests"] == 0


def test_env_without_a_model(folder, good_data, capsys):
    (folder / ".env").write_text(f"BASE_URL={UNREACHABLE}\nMODEL_GRADER=g\n")
    one_line_error(capsys, ["run", "--data", str(good_data)], "MODEL_TEST is not set")


READ_COMMANDS = {
    "runs": ["runs"],
    "show": ["show", "latest"],
    "show --json": ["show", "1", "--json"],
    "export": ["export", "latest", "--out", "out.jsonl"],
    "monitor": ["monitor"],
    "resume": ["resume", "latest"],
    "regrade-errors": ["regrade-errors", "1"],
}


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
def test_missing_database_is_not_created(folder, capsys, command):
    one_line_error(capsys, [*READ_COMMANDS[command], "--db", "typo.sqlite"], "typo.sqlite: no such database")


@pytest.mark.parametrize("command", sorted(set(READ_COMMANDS) - {"runs"}))
def test_empty_database_file_stays_empty(folder, capsys, command):
    (folder / "empty.sqlite").write_bytes(b"")
    one_line_error(capsys, [*READ_COMMANDS[command], "--db", "empty.sqlite"], "empty.sqlite: holds no runs yet")
    assert (folder / "empty.sqlite").read_bytes() == b""


def test_runs_lists_an_empty_file_as_no_runs_and_leaves_it_empty(folder, capsys):
    (folder / "empty.sqlite").write_bytes(b"")
    assert main(["runs", "--db", "empty.sqlite"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("no runs yet") and err == ""
    assert (folder / "empty.sqlite").read_bytes() == b"" and not list(folder.glob("empty.sqlite-*"))


def foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE contacts (name TEXT)")


def future_schema(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER)")
        conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")


DATABASES = {
    "a text file": (lambda p: p.write_text("hello, I am not a database" * 100), "not an hbtui database"),
    "another program's SQLite file": (foreign_sqlite, "an SQLite file, but not an hbtui database"),
    "a newer schema": (future_schema, f"schema version {schema.SCHEMA_VERSION + 1} is newer"),
    "a directory": (lambda p: p.mkdir(), "is a directory, not a database file"),
}


@pytest.mark.parametrize("command", ["runs", "show", "run", "resume"])
@pytest.mark.parametrize("case", sorted(DATABASES))
def test_database_not_usable(folder, good_data, capsys, case, command):
    make, named = DATABASES[case]
    make(folder / "other.sqlite")
    argv = READ_COMMANDS.get(command) or ["run", "--data", str(good_data)]
    one_line_error(capsys, [*argv, "--db", "other.sqlite"], "other.sqlite: ", named)


REFERENCES = {
    "show an unknown id": (["show", "99"], "no run '99'"),
    "show an unknown name": (["show", "nope"], "no run 'nope'"),
    "export an unknown run": (["export", "nope", "--out", "x.jsonl"], "no run 'nope'"),
    "resume an unknown run": (["resume", "two"], "no run 'two'"),
    "regrade an unknown run": (["regrade-errors", "7"], "no run '7'"),
    "monitor an unknown run": (["monitor", "nope"], "no run 'nope'"),
    "export into a missing folder": (
        ["export", "kept", "--out", "nowhere/x.csv", "--format", "csv"],
        "--out nowhere/x.csv: the folder nowhere does not exist",
    ),
    "export onto a directory": (["export", "kept", "--out", "runs"], "runs: is a folder; give a file name"),
    "export onto a file that exists": (
        ["export", "kept", "--out", ".env"],
        "--out .env: the file exists; add --force to replace it",
    ),
    "export in the reference's format onto a file that exists": (
        ["export", "kept", "--out", ".env", "--format", "reference"],
        "--out .env: the file exists",
    ),
    "export in an unknown format": (["export", "kept", "--out", "x", "--format", "xml"], "invalid choice: 'xml'"),
}


@pytest.mark.parametrize("case", sorted(REFERENCES))
def test_run_reference(folder, capsys, case):
    argv, named = REFERENCES[case]
    one_line_error(capsys, argv, named)


def test_export_replaces_a_file_only_when_forced(folder, capsys):
    earlier = folder / "earlier.jsonl"
    earlier.write_text("an earlier export\n")
    assert main(["export", "kept", "--out", "earlier.jsonl", "--force"]) == 0
    assert earlier.read_text().startswith('{"prompt_id"') and "wrote 3 conversations" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["show", "export", "resume", "monitor"])
def test_latest_with_no_runs(folder, capsys, command):
    async def make():
        async with await Store.open(folder / "none.sqlite"):
            pass

    asyncio.run(make())
    argv = [*READ_COMMANDS[command][:1], "latest", *READ_COMMANDS[command][2:], "--db", "none.sqlite"]
    one_line_error(capsys, argv, "none.sqlite yet")


# name: (prices.json text, what the message names after the file)
PRICE_TABLES = {
    "not JSON": ('{"gpt-4.1": {"input": 2.0, "output": 8.0}', "prices.json:1:42: not valid JSON"),
    "a trailing comma on line 3": ('{\n "a": {"input": 1, "output": 2},\n}', "prices.json:3:1: not valid JSON"),
    "a list": ("[]", "prices.json: must be a JSON object"),
    "a negative price": ('{"m": {"input": -2, "output": 8}}', "prices.json: 'm'.input: -2 is not a price"),
    "a price in a string": ('{"m": {"input": 2, "output": "8"}}', "prices.json: 'm'.output: '8' is not a price"),
    "no output price": ('{"m": {"input": 2}}', "prices.json: 'm'.output is missing"),
    "an entry that is a number": ('{"m": 2}', "prices.json: 'm': must be an object"),
    "not UTF-8": (b"\xff\xfe{}", "prices.json: not UTF-8"),
}
PRICED_COMMANDS = {
    "show": ["show", "latest"],
    "show --json": ["show", "kept", "--json"],
    "run": ["run", "--data", "good.jsonl"],
    "resume": ["resume", "kept"],
    "regrade-errors": ["regrade-errors", "kept"],
}


@pytest.mark.parametrize("command", sorted(PRICED_COMMANDS))
@pytest.mark.parametrize("case", sorted(PRICE_TABLES))
def test_price_table(folder, good_data, capsys, case, command):
    """Read before anything else: a run stops before its first call, a resume before it changes
    a row, and every command says which file, line or key."""
    content, named = PRICE_TABLES[case]
    prices = folder / "config" / "hbtui" / "prices.json"
    prices.parent.mkdir(parents=True)
    prices.write_bytes(content if isinstance(content, bytes) else content.encode())
    one_line_error(capsys, PRICED_COMMANDS[command], str(prices.parent / named))


def test_show_with_a_bad_length_flag(folder, capsys):
    one_line_error(capsys, ["show", "kept", "--length-penalty", "heavy"], "LENGTH_PENALTY (command line): 'heavy'")


@pytest.mark.parametrize(
    "argv, named",
    [
        (["run", "--data", "deep.jsonl"], "deep.jsonl:1: invalid JSON: nested too deeply"),
        (["run", "--data", "good.jsonl", "--name", "1"], "--name '1': is all digits"),
        (["monitor", "--db", "typo.sqlite"], "typo.sqlite: no such database"),
        (["runs", "--limit", "3"], "unrecognized arguments: --limit 3"),
    ],
)
def test_as_a_real_process(folder, good_data, argv, named):
    (folder / "deep.jsonl").write_text("[" * 100_000 + "\n")
    before = snapshot(folder)
    result = hbtui(*argv, cwd=folder)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("hbtui: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert named in result.stderr
    assert snapshot(folder) == before
