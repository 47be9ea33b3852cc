"""Temperature and max tokens of either model may be "not sent": left out of the request, as the
2026 reference grader sends neither. Read from every source, written back as typed, said in the
fidelity line, part of a verdict's cache key, and a cut-off verdict without a budget is not
asked again with "twice" no budget."""

from __future__ import annotations

import asyncio
import json

import pytest

from hbtui import cli
from hbtui.core.fidelity import describe_requests, requests_line
from hbtui.core.settings.config import BY_KEY, Settings, SettingsError
from hbtui.core.settings.loading import load_settings
from hbtui.core.verdict_cache import RequestKeys
from tests.conftest import run_engine, settings_for, small_records, user_folder, write_jsonl


@pytest.mark.parametrize("word", ["not sent", "none", "Not Sent", " NONE "])
def test_not_sent_is_a_value_of_temperature_and_max_tokens(tmp_path, word):
    env = tmp_path / ".env"
    env.write_text(f"TEMPERATURE_GRADER={word}\nMAX_TOKENS_GRADER={word}\nMAX_TOKENS_TEST=512\n")
    settings = load_settings(env, environ={})
    assert settings.temperature_grader is None and settings.max_tokens_grader is None
    assert settings.temperature_test == 0.3 and settings.max_tokens_test == 512  # the others as before
    # An empty value is still "not given": the default.
    env.write_text("TEMPERATURE_GRADER=\n")
    assert load_settings(env, environ={}).temperature_grader == 0.3


def test_not_sent_is_typed_back_as_it_reads_and_only_where_it_means_something(tmp_path):
    for key in ("TEMPERATURE_TEST", "TEMPERATURE_GRADER", "MAX_TOKENS_TEST", "MAX_TOKENS_GRADER"):
        setting = BY_KEY[key]
        assert setting.kind.text(None) == "not sent"
        assert setting.parse(setting.kind.text(None), origin="typed") is not None  # NOT_SENT, not "unset"
        assert (
            Settings(**{setting.attribute: setting.parse("not sent", origin="typed")}).__dict__[setting.attribute]
            is None
        )
    assert BY_KEY["TEMPERATURE_TEST"].kind.text(0.3) == "0.3"
    with pytest.raises(SettingsError, match=r"CONCURRENCY \(.*\.env:1\): 'not sent' is not a whole number"):
        (tmp_path / ".env").write_text("CONCURRENCY=not sent\n")
        load_settings(tmp_path / ".env", environ={})
    assert Settings().with_overrides(temperature_grader="not sent").temperature_grader is None


def test_the_fidelity_line_and_the_cache_key_say_not_sent():
    unsent = Settings(model_grader="g", temperature_grader=None, max_tokens_grader=None)
    record = describe_requests(unsent, "builtin", "0" * 64)
    assert "temperature not sent for the grader" in record["differences"]
    assert "max tokens not sent for the grader" in record["differences"]
    assert "temperature not sent for the grader" in requests_line(record)
    assert record["temperature_grader"] is None and record["max_tokens_grader"] is None

    class Template:
        sha256 = "0" * 64

    def key(settings: Settings) -> str:
        return RequestKeys(settings, Template()).keys("digest", 0, [(0, "a criterion", 5.0)])[0]

    assert key(unsent) != key(Settings(model_grader="g"))  # 0.3 and 1024 are other requests


def test_a_grader_not_sent_a_temperature_nor_a_limit_gets_neither(server, tmp_path):
    server.control(capture_requests=True)
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    settings = settings_for(server, tmp_path / "runs.sqlite", temperature_grader=None, max_tokens_grader=None)
    _, status = asyncio.run(run_engine(settings, data))
    assert status == "finished"
    bodies = server.captured_requests()
    graders = [body for body in bodies if "response_format" in body]
    replies = [body for body in bodies if "response_format" not in body]
    assert graders and all("temperature" not in b and "max_tokens" not in b for b in graders)
    assert all("max_completion_tokens" not in b for b in graders)
    assert replies and all(b["temperature"] == 0.3 and b["max_tokens"] == 2048 for b in replies)


def test_a_cut_off_verdict_with_no_budget_is_not_asked_again_with_twice_none(server, tmp_path):
    server.control(capture_requests=True, truncate_grader_unbounded=True)
    data = write_jsonl(tmp_path / "data.jsonl", small_records()[:1])
    settings = settings_for(server, tmp_path / "runs.sqlite", max_tokens_grader=None, grader_parse_attempts=2)
    _, status = asyncio.run(run_engine(settings, data))
    graders = [body for body in server.captured_requests() if "response_format" in body]
    criteria = len(small_records()[0]["rubrics"])
    assert len(graders) == 2 * criteria  # each criterion its 2 tries, none a third with a "doubled" budget
    assert all("max_tokens" not in body for body in graders)
    assert status in ("finished", "incomplete")


def test_not_sent_is_recorded_with_the_run_and_shown(tmp_path, monkeypatch, server, capsys):
    user_folder(tmp_path, monkeypatch, server, "TEMPERATURE_GRADER=not sent\nMAX_TOKENS_GRADER=none\n")
    data = write_jsonl(tmp_path / "data.jsonl", small_records())
    assert cli.main(["run", "--data", str(data), "--name", "unsent"]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["show", "unsent", "--json"]) == cli.EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert shown["run"]["settings"]["temperature_grader"] is None
    assert shown["run"]["settings"]["max_tokens_grader"] is None
    assert "temperature not sent for the grader" in shown["requests"]["differences"]
    folder = next(tmp_path.glob("runs/*-unsent"))
    assert "temperature not sent, max tokens not sent" in (folder / "description.md").read_text()
