"""The documentation's promises that a test can hold it to: provider examples parse, CI runs the
README's test command."""

import re
from pathlib import Path

import pytest

from hbtui.core.settings.loading import load_settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PROVIDERS = (ROOT / "docs" / "providers.md").read_text()


def provider_rows():
    return [line for line in PROVIDERS.splitlines() if line.startswith("| ") and "BASE_URL=" in line]


@pytest.mark.parametrize("row", provider_rows(), ids=lambda row: row.split("|")[1].strip())
def test_provider_examples_are_valid_settings(tmp_path, row):
    pairs = re.findall(r"`([A-Z_]+=[^`\s]+)", row)
    env = tmp_path / ".env"
    env.write_text("\n".join(pairs) + "\nMODEL_GRADER=some-grader\n")
    settings = load_settings(env, environ={})
    settings.require_models()
    assert all(url.endswith("/v1") for url in settings.base_url)


def test_there_are_five_provider_examples():
    assert len(provider_rows()) == 5


def test_ci_runs_the_readme_test_command():
    command = README.split("## Run the tests", 1)[1].split("```sh\n", 1)[1].split("\n", 1)[0].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"exec {command}" in ci
