"""One base error (issue 24, item 3): every error of hbtui's own derives from HbtuiError, which the
command line catches once, at its edge, with the exit status its kind gives. No error is named
by its module path any more, so moving a module cannot turn its error into an internal one."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

import pytest

import hbtui
from hbtui import cli
from hbtui.core.errors import EXIT_FAILED, EXIT_USAGE, HbtuiError

# Exceptions that never reach the command line: each is caught where it is raised and turned into
# an HbtuiError, a stored failure or a notice.
INTERNAL = {
    "hbtui.client.http1.AnswerTooLarge": "the pool's signal, stored as a too_large failure",
    "hbtui.client.http1.AnswerUnreadable": "the pool's signal, stored as a bad_response failure",
    "hbtui.client.http1.TransportError": "the pool's signal, stored as a connection failure",
    "hbtui.client.http1.CallWithheld": "a call the gate held back, asked again",
    "hbtui.client.http1.UnsendableRequest": "a call turns it into an auth ChatError, the check into its line",
    "hbtui.client.http1._Stale": "the pool makes the request again on a new connection",
    "hbtui.core.reference.ReferenceUnavailable": "grading turns it into a TemplateError",
    "hbtui.core.downloads.DownloadError": "dataset and reference downloads turn it into their error",
    "hbtui.core.settings.envfile.EnvFileError": "load_settings and the configuration screen say it",
    "hbtui.engine.batch_api._RoomWait": "a batch run's look ends there, and the next submits again",
}

EXPECTED_EXITS = {
    "hbtui.client.wire.ChatError": EXIT_FAILED,  # the endpoint failed, not the command
    "hbtui.local.llama_server.LlamaServerError": EXIT_FAILED,
    "hbtui.core.settings.setting_kinds.SettingsError": EXIT_USAGE,
    "hbtui.core.dataset.DatasetError": EXIT_USAGE,
    "hbtui.store.rows.StoreError": EXIT_USAGE,
    "hbtui.analysis.compare.NothingToCompare": EXIT_USAGE,
    "hbtui.imports.common.ImportProblem": EXIT_USAGE,
    "hbtui.meta_eval.compare.NoRowsInCommon": EXIT_USAGE,
    "hbtui.local.model.LocalModelError": EXIT_USAGE,
}


@functools.cache
def hbtui_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in hbtui's modules, by its dotted path."""
    found = {}
    for module_info in pkgutil.walk_packages(hbtui.__path__, "hbtui."):
        if module_info.name.endswith("__main__"):  # importing it runs the command line
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_error_of_hbtui_is_an_hbtui_error_or_said_to_be_internal():
    errors = hbtui_exceptions()
    assert set(INTERNAL) <= set(errors), "an internal exception listed here no longer exists"
    outside = {path for path, kind in errors.items() if not issubclass(kind, HbtuiError) and path not in INTERNAL}
    assert outside == set()


def test_each_kind_exits_with_its_status():
    errors = hbtui_exceptions()
    assert {path: errors[path].exit_code for path in EXPECTED_EXITS} == EXPECTED_EXITS  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", sorted(EXPECTED_EXITS))
def test_the_command_line_catches_each_at_its_edge(kind, monkeypatch, capsys, tmp_path):
    error = hbtui_exceptions()[kind]

    message = "a problem at line 3 of the file"

    async def failing(settings):
        if error.__name__ == "ChatError":  # its message names the kind of failure first
            raise error("connection", message)
        raise error(message)

    monkeypatch.setattr("hbtui.cli.reading.cmd_runs", failing)
    monkeypatch.chdir(tmp_path)

    code = cli.main(["runs"])

    err = capsys.readouterr().err
    assert code == EXPECTED_EXITS[kind]
    assert err == f"hbtui: error: {'connection: ' if error.__name__ == 'ChatError' else ''}{message}\n"


def test_a_failure_in_a_few_words():
    from hbtui.core.errors import failure_words

    assert failure_words("auth: HTTP 401: Incorrect API key provided") == "key refused"
    assert failure_words("connection: cannot reach http://127.0.0.1:9/v1: refused") == "unreachable"
    assert failure_words("the database /x/runs.sqlite refused writes") == "the database /x…"  # its first words
    assert failure_words(None) == failure_words("") == ""
