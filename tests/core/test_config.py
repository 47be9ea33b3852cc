"""Settings: precedence, validation messages that name the key, masking."""

import pytest

from hbtui.core.settings.config import Settings, SettingsError, mask_secret
from hbtui.core.settings.loading import load_settings


def write_env(tmp_path, text):
    path = tmp_path / ".env"
    path.write_text(text)
    return path


def test_env_file_then_environment_then_flags(tmp_path):
    env = write_env(tmp_path, "BASE_URL=http://a.example/v1\nMODEL_TEST=from-file\nCONCURRENCY=3\n")
    settings = load_settings(env, environ={"MODEL_TEST": "from-env"})
    assert settings.base_url == ("http://a.example/v1",)
    assert settings.model_test == "from-env"
    assert settings.concurrency == 3
    assert settings.with_overrides(concurrency="12", model_test=None).concurrency == 12


def test_old_misspelt_reasoning_keys_still_work(tmp_path):
    env = write_env(tmp_path, "RESONING_TEST=high\nRESONING_GRADER=low\n")
    settings = load_settings(env, environ={})
    assert (settings.reasoning_test, settings.reasoning_grader) == ("high", "low")


def test_correct_spelling_wins_over_old(tmp_path):
    env = write_env(tmp_path, "RESONING_TEST=high\nREASONING_TEST=low\n")
    assert load_settings(env, environ={}).reasoning_test == "low"


@pytest.mark.parametrize(
    "line, words",
    [
        ("BASE_URL=not a url", ["BASE_URL", ".env:2"]),
        ("REASONING_TEST=extreme", ["REASONING_TEST", "extreme"]),
        ("CONCURRENCY=-4", ["CONCURRENCY", "-4 is outside 1 to 4,096"]),
        ("CONCURRENCY=lots", ["CONCURRENCY", "whole number"]),
        ("TEMPERATURE_TEST=7", ["TEMPERATURE_TEST", "0 to 2"]),
        ("MODLE_TEST=x", ["MODLE_TEST", "MODEL_TEST"]),
    ],
)
def test_bad_values_name_the_key_and_line(tmp_path, line, words):
    env = write_env(tmp_path, "# settings\n" + line + "\n")
    with pytest.raises(SettingsError) as error:
        load_settings(env, environ={})
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_unknown_unrelated_key_is_a_warning(tmp_path):
    env = write_env(tmp_path, "HF_TOKEN=abc\n")
    warnings = []
    load_settings(env, environ={}, warn=warnings.append)
    assert warnings and "HF_TOKEN" in warnings[0] and ":1" in warnings[0]


def test_missing_model_is_reported_by_key():
    with pytest.raises(SettingsError, match="MODEL_GRADER"):
        Settings(base_url="http://x/v1", model_test="m").require_models()


def test_keys_are_masked_in_public_settings():
    secret = "fake-THIS-IS-A-SECRET-1234"
    public = Settings(api_key=secret, grader_api_key=secret).public_dict()
    assert secret not in repr(public)
    assert public["api_key"] == mask_secret(secret) == "fak…1234"
    assert secret not in repr(Settings(api_key=secret))


def test_grader_shares_key_only_on_the_same_endpoint():
    same = Settings(base_url="http://a/v1", api_key="k1")
    assert same.effective_grader_api_key == ("k1",)
    other = Settings(base_url="http://a/v1", api_key="k1", grader_base_url="http://b/v1", grader_api_key="k2")
    assert other.effective_grader_base_url == ("http://b/v1",) and other.effective_grader_api_key == ("k2",)


def test_a_short_key_is_masked_whole():
    assert mask_secret("token1234x") == "…"
