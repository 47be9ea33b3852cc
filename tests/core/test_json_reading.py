"""hbtui.core.json_reading: orjson first, and always what json.loads reads."""

from __future__ import annotations

import json

import pytest

from hbtui.core.json_reading import read_json
from tests.client.test_hostile_server import JSON_CASES
from tests.conftest import MAIN_SUBSET, needs_shared

TEXT_CASES = [body.decode("utf-8") for body in JSON_CASES if not body.startswith(b"\xff\xfe")]


@pytest.mark.parametrize("text", TEXT_CASES)
def test_text_is_read_as_json_loads_reads_it(text):
    try:
        expected = json.loads(text)
    except ValueError as refused:  # a str that opens with a byte-order mark
        with pytest.raises(type(refused), match="BOM"):
            read_json(text)
        return
    got = read_json(text)
    assert json.dumps(got) == json.dumps(expected) and repr(got) == repr(expected)


@pytest.mark.parametrize("text, error", [("[" * 100_000, RecursionError), ("not json", ValueError), ("", ValueError)])
def test_text_json_loads_refuses_is_refused_as_it_refuses_it(text, error):
    with pytest.raises(error):
        json.loads(text)
    with pytest.raises(error):
        read_json(text)


@needs_shared
def test_every_record_of_the_main_subset_reads_the_same():
    """The stored record bodies the engine reads back with it (its pending work, the finish)."""
    for line in MAIN_SUBSET.read_text().splitlines():
        assert repr(read_json(line)) == repr(json.loads(line))
