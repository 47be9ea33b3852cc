"""Records: validation with file:line: field errors, real subsets, sampling as the reference does."""

import json
import random

import pytest

import hbtui.core.dataset as dataset_module
from hbtui.core.dataset import DatasetError, load_jsonl, sample
from tests.conftest import CONSENSUS_SUBSET, HARD_SUBSET, MAIN_SUBSET, make_record, needs_shared

GOOD = make_record("ok-1", [("Advises rest", 5, ["axis:accuracy"])])


def line(record):
    return json.dumps(record)


def broken(**changes):
    record = json.loads(json.dumps(GOOD))
    record["prompt_id"] = "bad-1"
    for key, value in changes.items():
        if value is ...:
            record.pop(key)
        else:
            record[key] = value
    return line(record)


CASES = {
    "truncated last line": (line(GOOD) + "\n" + line(GOOD).replace("ok-1", "ok-2")[:80], "2", "invalid JSON"),
    "invalid json": ("{not json}", "1", "invalid JSON"),
    "missing rubrics": (broken(rubrics=...), "1", "'rubrics'"),
    "criterion without points": (broken(rubrics=[{"criterion": "x", "tags": []}]), "1", "rubrics[0].points"),
    "points not a number": (broken(rubrics=[{"criterion": "x", "points": "five", "tags": []}]), "1", "'five'"),
    "points a boolean": (broken(rubrics=[{"criterion": "x", "points": True, "tags": []}]), "1", "not a number"),
    "points null": (
        broken(rubrics=[{"criterion": "x", "points": None, "tags": []}]),
        "1",
        "points': None is not a number",
    ),
    "no messages": (broken(prompt=[]), "1", "'prompt'"),
    "not ending with user": (
        broken(prompt=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]),
        "1",
        "not 'user'",
    ),
    "no positive points": (broken(rubrics=[{"criterion": "x", "points": -5, "tags": []}]), "1", "positive points"),
    "empty user message": (broken(prompt=[{"role": "user", "content": ""}]), "1", "'prompt[0].content': is empty"),
    "blank message before the last": (
        broken(
            prompt=[{"role": "user", "content": " \n\t"}, {"role": "assistant", "content": "yo"}, GOOD["prompt"][0]]
        ),
        "1",
        "'prompt[0].content': is empty",
    ),
    "huge message": (broken(prompt=[{"role": "user", "content": "a" * 5_000_001}]), "1", "prompt[0].content"),
    "missing prompt id": (broken(prompt_id=...), "1", "'prompt_id'"),
    "repeated prompt id": (line(GOOD) + "\n" + line(GOOD), "2", "repeats line 1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_inputs_name_file_line_and_field(tmp_path, case):
    text, line_number, field = CASES[case]
    path = tmp_path / "data.jsonl"
    path.write_text(text + "\n")
    with pytest.raises(DatasetError) as error:
        load_jsonl(path)
    message = str(error.value)
    assert message.startswith(f"{path}:{line_number}: ")
    assert field in message and "\n" not in message


def test_non_utf8_byte(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(line(GOOD).encode() + b"\n" + line(GOOD).replace("ok-1", "ok-2").encode()[:40] + b"\xff\n")
    with pytest.raises(DatasetError, match=r"data.jsonl:2: not UTF-8 \(byte 0xff"):
        load_jsonl(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(DatasetError, match="no records"):
        load_jsonl(path)


def test_sample_is_the_references_choice():
    records = list(range(100))
    assert sample(records, 10, seed=0) == random.Random(0).sample(records, 10)
    assert sample(records, None) == records
    with pytest.raises(DatasetError, match="only 100"):
        sample(records, 101)


@needs_shared
@pytest.mark.parametrize("path, count", [(MAIN_SUBSET, 738), (HARD_SUBSET, 50), (CONSENSUS_SUBSET, 216)])
def test_real_subsets_load(path, count):
    dataset = load_jsonl(path)
    assert len(dataset.records) == count
    assert all(r.theme for r in dataset.records)
    raw_lines = path.read_text().splitlines()
    assert [r.raw for r in dataset.records] == raw_lines  # kept byte for byte


@needs_shared
def test_sample_of_real_records_matches_reference():
    dataset = load_jsonl(MAIN_SUBSET)
    expected = random.Random(0).sample(
        [json.loads(line)["prompt_id"] for line in MAIN_SUBSET.read_text().splitlines()], 25
    )
    assert [r.prompt_id for r in sample(dataset.records, 25, 0)] == expected


def records_read_by_json_loads(path, monkeypatch):
    """The records as json.loads alone reads them (the fast reading turned off)."""
    with monkeypatch.context() as patched:
        patched.setattr(dataset_module, "_read_fast", lambda text: None)
        return load_jsonl(path).records


ODD_LINES = [
    # Duplicate keys (the last one counts), points written every way JSON allows, text orjson and
    # json.loads must read alike (U+2028, escapes), and numbers in fields only the line keeps.
    '{"prompt_id": "a", "prompt_id": "dup", "prompt": [{"role": "user", "content": "x\\u2028y\\n\\"q\\""}],'
    ' "rubrics": [{"criterion": "c", "points": 1E1, "tags": []}, {"criterion": "d", "points": -0.0, "tags": []},'
    ' {"criterion": "e", "points": 2.5e-0, "tags": ["t"]}, {"criterion": "f", "points": 7, "tags": []}],'
    ' "example_tags": ["theme:x"], "other": 123456789012345678901234567890, "f": 1e400}',
    '{"prompt_id": "b", "prompt": [{"role": "user", "content": "\\ud83d\\ude00 caf\\u00e9"}],'
    ' "rubrics": [{"criterion": "c", "points": 0.1, "tags": []}, {"criterion": "z", "points": -1000000, "tags": []}],'
    ' "example_tags": []}',
]


def test_the_fast_reading_reads_what_json_loads_reads(tmp_path, monkeypatch):
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(ODD_LINES) + "\n")
    fast = load_jsonl(path).records
    assert fast == records_read_by_json_loads(path, monkeypatch)
    assert fast[0].prompt_id == "dup" and [c.points for c in fast[0].rubrics] == [10.0, -0.0, 2.5, 7]
    assert [type(c.points) for c in fast[0].rubrics] == [float, float, float, int]


@pytest.mark.parametrize("points", ["18446744073709551616", "-9223372036854775809", "1" + "0" * 30])
def test_points_beyond_64_bits_are_shown_as_written(tmp_path, points):
    """orjson reads such an integer as a float; the error names the number as the file has it."""
    path = tmp_path / "big.jsonl"
    path.write_text(line(GOOD).replace('"points": 5', f'"points": {points}') + "\n")
    with pytest.raises(DatasetError) as error:
        load_jsonl(path)
    assert f"'rubrics[0].points': {points} is beyond ±1,000,000" in str(error.value)


@needs_shared
@pytest.mark.parametrize("path", [MAIN_SUBSET, HARD_SUBSET, CONSENSUS_SUBSET])
def test_the_real_subsets_read_fast_are_what_json_loads_reads(path, monkeypatch):
    assert load_jsonl(path).records == records_read_by_json_loads(path, monkeypatch)
