"""The connection check against the test server (its own process), presets and .env writing."""

from __future__ import annotations

import json
import socket
import stat

from dotenv import dotenv_values

from hbtui.client.checks import check_connection
from hbtui.core.settings.config import Settings
from hbtui.core.settings.envfile import write_env
from hbtui.core.settings.loading import load_settings
from hbtui.core.settings.presets import load_presets, presets_path, save_preset
from tests.support.server_process import FakeServer


def by_name(results):
    return {r.name: r for r in results}


async def test_a_healthy_endpoint_passes_every_check(server):
    results = await check_connection(
        Settings(base_url=server.base_url, model_test="test-model", model_grader="grader-model")
    )
    assert all(r.ok for r in results), results
    names = by_name(results)
    assert "2 models served" in names["test endpoint"].message
    assert names["grader model grader-model json_schema"].message == "json_schema supported"


async def test_a_refused_json_schema_is_reported(server):
    server.control(reject_json_schema=True)
    results = by_name(
        await check_connection(Settings(base_url=server.base_url, model_test="test-model", model_grader="grader-model"))
    )
    check = results["grader model grader-model json_schema"]
    assert check.ok  # handled: verdicts are parsed from the text, so the check does not fail
    assert check.message == "json_schema not supported: verdicts will be parsed from text"
    assert results["grader model grader-model"].ok  # asked again without it, and answered


async def test_a_wrong_key_is_a_401_and_is_never_echoed():
    with FakeServer(api_key="fake-right") as guarded:
        results = await check_connection(
            Settings(
                base_url=guarded.base_url,
                api_key="fake-wrong-0123456789",
                model_test="test-model",
                model_grader="grader-model",
            )
        )
    assert [(r.ok, r.message) for r in results] == [(False, "401: key rejected")]
    assert all("fake-wrong" not in r.message for r in results)


async def test_an_unknown_model_names_the_served_ones(server):
    results = by_name(
        await check_connection(Settings(base_url=server.base_url, model_test="gpt-x", model_grader="grader-model"))
    )
    assert results["test model gpt-x"].message == "model gpt-x not served (served: test-model, grader-model)"
    assert results["grader model grader-model"].ok


async def test_an_unreachable_host_says_so():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    results = await check_connection(Settings(base_url=f"http://127.0.0.1:{port}/v1", model_test="a", model_grader="b"))
    assert len(results) == 1 and not results[0].ok
    assert results[0].message == f"unreachable: connection refused at http://127.0.0.1:{port}/v1"


async def test_a_separate_grader_endpoint_is_checked_with_its_own_key(server):
    with FakeServer(api_key="fake-grader") as grader:
        results = await check_connection(
            Settings(
                base_url=server.base_url,
                model_test="test-model",
                grader_base_url=grader.base_url,
                grader_api_key="fake-grader",
                model_grader="grader-model",
            )
        )
    names = by_name(results)
    assert names["test endpoint"].ok and names["grader endpoint"].ok
    assert names["grader model grader-model json_schema"].ok


def test_presets_never_hold_keys_and_are_owner_only(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = presets_path()
    assert path == tmp_path / "config" / "hbtui" / "presets.json"
    save_preset(
        "fast", {"base_url": "http://h/v1", "api_key": "fake-secret", "grader_api_key": "fake-g", "concurrency": "32"}
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "fake-" not in path.read_text()
    save_preset("slow", {"concurrency": "2"})
    assert load_presets() == {"fast": {"base_url": "http://h/v1", "concurrency": "32"}, "slow": {"concurrency": "2"}}
    assert json.loads(path.read_text())["slow"] == {"concurrency": "2"}


def test_write_env_keeps_foreign_lines_and_reads_back(tmp_path):
    env = tmp_path / ".env"
    env.write_text("# my settings\nOTHER_TOOL=1\nBASE_URL=http://old/v1\nRESONING_TEST=low\n\nCONCURRENCY=4\n")
    env.chmod(0o644)
    settings = Settings(
        base_url="http://new:8080/v1",
        api_key="fake-abc def#1",
        model_test="m/x",
        model_grader="g",
        reasoning_test="high",
        concurrency=16,
    )
    write_env(env, settings)
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    lines = env.read_text().splitlines()
    assert lines[:4] == ["# my settings", "OTHER_TOOL=1", "BASE_URL=http://new:8080/v1", "REASONING_TEST=high"]
    assert "CONCURRENCY=16" in lines and "HBTUI_DB" not in env.read_text()
    assert dotenv_values(env)["API_KEY"] == "fake-abc def#1"
    loaded = load_settings(env, environ={})
    assert (loaded.base_url, loaded.api_key, loaded.model_test, loaded.reasoning_test, loaded.concurrency) == (
        ("http://new:8080/v1",),
        ("fake-abc def#1",),
        "m/x",
        "high",
        16,
    )
