"""Each setting is described once (hbtui/core/settings/config.py); `.env` keys, flags, the configuration screen's
checks, `.env.example` and the table of docs/settings.md follow from that description and agree with it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hbtui import cli
from hbtui.core.settings import settings_docs
from hbtui.core.settings.config import BY_KEY, SETTINGS, STORAGE, Settings, SettingsError, setting_for
from hbtui.core.settings.loading import load_settings
from hbtui.tui.screens.config_form import FIELDS, check_field


def test_env_example_is_the_one_written_from_the_settings():
    assert settings_docs.ENV_EXAMPLE.read_text(encoding="utf-8") == settings_docs.env_example(), (
        "run: python -m hbtui.core.settings.settings_docs --write"
    )


def test_the_documented_settings_table_agrees_with_the_settings():
    document = settings_docs.DOCUMENT.read_text(encoding="utf-8")
    assert settings_docs.document_with_table(document) == document, (
        "run: python -m hbtui.core.settings.settings_docs --write"
    )


def test_the_check_command_says_which_file_is_out_of_date(tmp_path, monkeypatch):
    stale = tmp_path / ".env.example"
    stale.write_text("# edited by hand\n")
    monkeypatch.setattr(settings_docs, "ENV_EXAMPLE", stale)
    assert settings_docs.out_of_date() == [stale]
    assert settings_docs.main(["--check"]) == 1


def test_the_docs_command_runs_as_documented():
    check = subprocess.run(
        [sys.executable, "-m", "hbtui.core.settings.settings_docs", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr


def test_env_example_reads_back_as_the_defaults_plus_its_examples():
    warnings: list[str] = []
    settings = load_settings(settings_docs.ENV_EXAMPLE, environ={}, warn=warnings.append)
    assert warnings == []
    examples = {s.attribute: s.parse(s.example, "x") for s in SETTINGS if s.example is not None}
    assert settings == Settings(**{name: value for name, value in examples.items() if value is not None})


def test_env_example_and_the_settings_table_carry_the_prose_users_rely_on():
    text = settings_docs.env_example()
    table = settings_docs.settings_table()
    for where in (text, table):
        assert "RESONING_TEST" in where and "RESONING_GRADER" in where
        assert "hbtui run --preset reference" in where  # the hint for comparable numbers
        assert "gpt-4.1-2025-04-14" in where
        for setting in SETTINGS:
            assert setting.key in where


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.flag and s.section is not STORAGE], ids=str)
def test_every_flag_in_the_description_sets_its_setting(setting):
    args = cli.build_parser().parse_args(["run", setting.flag, "1"])
    assert getattr(args, setting.attribute) == "1"
    assert f"({setting.key}" in cli.flag_help(setting)


def test_secret_settings_have_no_flag():
    # (Their masking in what is stored or shown: tests/core/test_config.py.)
    secrets = [s for s in SETTINGS if s.secret]
    assert {s.key for s in secrets} == {"API_KEY", "GRADER_API_KEY"}
    assert all(s.flag is None for s in secrets)


# One bad text per kind of value the screen shows: refused on screen with the words .env uses.
BAD_TEXT = {
    "base_url": "localhost:8080",
    "temperature_test": "9",
    "max_tokens_grader": "many",
    "concurrency": "0",
    "grader_json_schema": "perhaps",
    "reasoning_test": "extreme",
}


@pytest.mark.parametrize("name", sorted(BAD_TEXT))
def test_the_screen_refuses_what_env_refuses_with_the_same_words(tmp_path, name):
    key = setting_for(name).key
    env = tmp_path / ".env"
    env.write_text(f"{key}={BAD_TEXT[name]}\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(env, environ={})
    value, problem = check_field(FIELDS[name], BAD_TEXT[name], "main")
    assert value is None and problem and str(refused.value) == f"{key} ({env}:1): {problem}"


def test_the_screen_reads_a_good_value_as_env_does(tmp_path):
    env = tmp_path / ".env"
    env.write_text("REASONING_GRADER=HIGH\nBASE_URL=http://h:1/v1/\nGRADER_TEMPLATE=Builtin\n")
    loaded = load_settings(env, environ={})
    for name, typed in (("reasoning_grader", "HIGH"), ("base_url", "http://h:1/v1/"), ("grader_template", "Builtin")):
        assert check_field(FIELDS[name], typed, "main") == (getattr(loaded, name), None)


def test_an_empty_field_means_its_placeholder_or_is_required():
    assert check_field(FIELDS["grader_template"], "", "main") == ("reference", None)
    assert check_field(FIELDS["grader_concurrency"], "", "main") == (None, None)
    assert check_field(FIELDS["model_test"], "", "main") == (None, "required")
    assert check_field(FIELDS["concurrency"], "", "main") == (None, "required")
    # An emptied temperature was sent as no temperature at all: a value is needed.
    assert check_field(FIELDS["temperature_test"], "", "main") == (None, "required")


def test_keys_and_attributes_are_one_to_one():
    assert len(BY_KEY) == len(SETTINGS) == len(Settings.__dataclass_fields__)
