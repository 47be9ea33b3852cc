"""`hbtui run` checks the models before it starts (issue 25, item 13): a model name mistyped
against an endpoint that lists its models stops the run with the connection check's own line,
before anything is planned; an endpoint without /models, and one that lists an alias but serves
any name (llama.cpp's server), stop nothing."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import hbtui
from tests.support.server_process import FakeServer


def env_for(tmp_path, server, model_test="test-model", model_grader="grader-model"):
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nAPI_KEY=fake-right\nMODEL_TEST={model_test}\n"
        f"MODEL_GRADER={model_grader}\nCONCURRENCY=4\n"
    )
    return tmp_path


@pytest.fixture(scope="module")
def listing_server():
    """Serves the models it lists, and answers 404 for any other name (as OpenAI and vLLM do)."""
    with FakeServer(api_key="fake-right", models=["test-model", "grader-model"]) as server:
        yield server


@pytest.mark.parametrize(
    "test_model, grader_model, named",
    [
        ("test-modle", "grader-model", "test model test-modle"),
        ("test-model", "grader-modle", "grader model grader-modle"),
    ],
)
def test_a_mistyped_model_stops_the_run_before_it_is_planned(
    tmp_path, small_dataset, listing_server, test_model, grader_model, named
):
    listing_server.reset_stats()
    workdir = env_for(tmp_path, listing_server, test_model, grader_model)
    result = hbtui("run", "--data", str(small_dataset), cwd=workdir)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{named} not served at {listing_server.base_url}" in line
    assert "served: test-model, grader-model" in line and "set MODEL_" in line and "check` asks" in line
    assert not (workdir / "runs" / "hbtui.sqlite").exists(), "no run was planned"
    assert listing_server.stats()["requests"] == 1, "one call of one token confirmed it, no more"


def test_the_models_it_lists_run(tmp_path, small_dataset, listing_server):
    workdir = env_for(tmp_path, listing_server)
    result = hbtui("run", "--data", str(small_dataset), cwd=workdir)
    assert result.returncode == 0, result.stderr


def test_a_server_that_serves_any_name_is_not_stopped(tmp_path, small_dataset, server):
    """The session's server lists its default models and answers any name, as llama.cpp does."""
    workdir = env_for(tmp_path, server, model_test="any-name-at-all")
    result = hbtui("run", "--data", str(small_dataset), cwd=workdir)
    assert result.returncode == 0, result.stderr


def test_an_endpoint_without_a_model_list_is_not_stopped(tmp_path, small_dataset, server):
    server.control(no_model_list=True)
    workdir = env_for(tmp_path, server, model_test="unlisted-model")
    result = hbtui("run", "--data", str(small_dataset), cwd=workdir)
    assert result.returncode == 0, result.stderr
