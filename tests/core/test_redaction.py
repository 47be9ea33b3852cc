"""A key that a provider echoes back (OpenAI's 401 shows it masked, proxies and debug pages echo
the Authorization header whole) reaches no output and no file: not stdout or stderr, not a text
column of the database, not an export, not the run folder, not the app."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from textual.widgets import DataTable

from hbtui import cli
from hbtui.client.chat import AUTH, CLIENT_ERROR, SERVER_ERROR, ChatClient
from hbtui.client.checks import check_connection
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import ChatError, Endpoint, list_models
from hbtui.core.redact import REDACTED, redact
from hbtui.core.settings.config import mask_secret
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.conftest import offline_settings, run_engine, settings_for
from tests.support.tui import screen_text, wait_for

SECRET = "fake-proj-LEAKTEST9f3a7c2e1b5d8046Q7vX"
TAIL = SECRET[-4:]  # what OpenAI's masked form keeps: it must not be shown either


def leaks(text: str | bytes) -> list[str]:
    """Pieces of the keys in ``text``: whole, any middle part, or the tail that masks keep. The
    run's recorded settings hold our own mask (``fak…Q7vX``) on purpose, to tell keys apart."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.replace(json.dumps(mask_secret(SECRET))[1:-1], "").replace(mask_secret(SECRET), "")
    return [piece for piece in (SECRET, TAIL, "LEAKTEST") if piece in text]


# ---- the helper ----------------------------------------------------------------------------


def test_redact_takes_out_the_key_its_masked_forms_and_any_bearer_token():
    text = (
        f"key {SECRET}, header Authorization: Bearer {SECRET}; masked sk-proj-****{TAIL}. "
        f'also sk-…{TAIL} and {"*" * 20}{TAIL} and Bearer other-token-123, "Bearer": x'
    )
    clean = redact(text, [SECRET])
    assert not leaks(clean), clean
    assert "Bearer other-token-123" not in clean and clean.count(REDACTED) == 6
    assert clean.startswith(f"key {REDACTED}, header Authorization: Bearer {REDACTED}; masked {REDACTED}.")


def test_redact_leaves_other_text_and_words_that_merely_contain_a_short_key():
    message = "Rate limit reached for requests on model-Q7vX. Please try again in 0.05s. EMPTY tokens"
    assert redact(message, [SECRET]) == message  # the tail alone, unmasked, is no key
    assert redact("EMPTYING the queue; key EMPTY rejected", ["EMPTY"]) == f"EMPTYING the queue; key {REDACTED} rejected"
    assert redact("nothing to hide", [None, ""]) == "nothing to hide"


# ---- the client --------------------------------------------------------------------------


ECHOES = [
    ("full", 401, AUTH),
    ("masked", 401, AUTH),
    ("headers", 500, SERVER_ERROR),
    ("full", 400, CLIENT_ERROR),
    ("masked", 400, CLIENT_ERROR),
    ("headers", 400, CLIENT_ERROR),
]


@pytest.mark.parametrize("form, status, kind", ECHOES)
async def test_client_errors_hold_no_echoed_key(server, form, status, kind):
    server.control(echo_auth=form, echo_auth_status=status)
    notes, calls = [], []
    client = ChatClient(
        Endpoint(server.base_url, SECRET),
        limiter=AdaptiveLimiter(2),
        max_attempts=2,
        backoff_base=0.01,
        on_note=notes.append,
        on_call=calls.append,
    )
    try:
        with pytest.raises(ChatError) as raised:
            await client.complete("test-model", [{"role": "user", "content": "hi"}])
    finally:
        await client.aclose()
    error = raised.value
    assert error.kind == kind and error.status == status
    shown = [str(error), repr(error.args), *notes, *(record.message for record in calls)]
    assert not leaks("\n".join(shown)), shown
    assert REDACTED in error.message  # the provider's words are kept, the key is not
    with pytest.raises(ChatError) as listed:
        await list_models(Endpoint(server.base_url, SECRET))
    assert not leaks(str(listed.value)) and REDACTED in listed.value.message


async def test_connection_check_shows_no_echoed_key(server):
    server.control(echo_auth="full", echo_auth_status=400)
    settings = offline_settings(
        base_url=server.base_url, api_key=SECRET, model_test="test-model", model_grader="grader-model"
    )
    results = await check_connection(settings)
    text = "\n".join(f"{r.name}: {r.message}" for r in results)
    assert SECRET not in text and TAIL not in text, text  # not even as our own mask: nothing to tell apart here
    assert "Incorrect API key provided" in text


# ---- every sink of a run -----------------------------------------------------------------


@pytest.fixture
def project(tmp_path, server, small_dataset, monkeypatch):
    """A working folder whose .env holds the keys, as a user's would."""
    for name in ("BASE_URL", "API_KEY", "GRADER_API_KEY", "MODEL_TEST", "MODEL_GRADER", "HBTUI_DB"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nAPI_KEY={SECRET}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n"
        "CONCURRENCY=4\nMAX_ATTEMPTS=2\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def hbtui_in_process(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def every_file_under(root) -> dict[str, bytes]:
    """Every file's raw bytes: the database, its WAL and shared memory, exports, run folders."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and ".env" not in path.name
    }


async def create_database(path) -> None:
    async with await Store.open(path):
        pass


RUN_ECHOES = [
    # (form, status, which calls, where the provider's message must be kept)
    ("full", 401, "all", "runs"),  # fatal: the run stops, its error and log say why
    ("masked", 401, "all", "runs"),
    ("headers", 500, "generation", "conversations"),  # retried, then the conversation has no reply
    ("masked", 400, "generation", "runs"),  # every reply refused the same way: the run stops
    ("full", 400, "grader", "verdicts"),
]


@pytest.mark.parametrize("form, status, calls, kept_in", RUN_ECHOES)
def test_a_run_against_an_echoing_provider_leaks_the_key_nowhere(
    project, small_dataset, server, capsys, form, status, calls, kept_in
):
    server.control(echo_auth=form, echo_auth_status=status, echo_auth_calls=calls)
    db_path = project / "runs" / "hbtui.sqlite"
    asyncio.run(create_database(db_path))
    # Held open, this connection keeps the WAL file from being folded in and removed at the end.
    holder = sqlite3.connect(db_path)
    try:
        holder.execute("SELECT count(*) FROM runs").fetchall()
        outputs = [hbtui_in_process(capsys, "run", "--data", str(small_dataset), "--name", "echo")]
        server.control(echo_auth=None)  # the commands after the run read; none of them calls
        outputs += [
            hbtui_in_process(capsys, "runs"),
            hbtui_in_process(capsys, "show", "latest"),
            hbtui_in_process(capsys, "show", "latest", "--json"),
            hbtui_in_process(capsys, "export", "latest", "--out", "out.jsonl"),
            hbtui_in_process(capsys, "export", "latest", "--format", "csv", "--out", "out.csv"),
        ]
        files = every_file_under(project)
    finally:
        holder.close()
    printed = "\n".join(out + err for _, out, err in outputs)
    assert not leaks(printed), printed
    assert {"runs/hbtui.sqlite", "runs/hbtui.sqlite-wal", "out.jsonl", "out.csv"} <= set(files)
    if kept_in != "runs":  # a run that ends has its folder
        assert any(name.endswith("description.md") for name in files)
    assert {name: leaks(data) for name, data in files.items() if leaks(data)} == {}
    # The provider's message itself is kept, where it belongs, with the key taken out.
    with sqlite3.connect(project / "runs" / "hbtui.sqlite") as db:
        column = "error"
        stored = [row[0] for row in db.execute(f"SELECT {column} FROM {kept_in} WHERE {column} IS NOT NULL")]
        logged = [row[0] for row in db.execute("SELECT message FROM run_log")]
    assert stored and all(REDACTED in text for text in stored), stored
    if kept_in == "runs":
        assert any(REDACTED in text for text in logged), logged
    else:
        results = [path for name, path in ((n, project / n) for n in files) if name.endswith("results.jsonl")]
        assert results and REDACTED in results[0].read_text()


async def test_the_app_shows_a_run_stopped_by_an_echoing_provider_without_the_key(server, small_dataset, tmp_path):
    server.control(echo_auth="full", echo_auth_status=401)
    settings = settings_for(server, tmp_path / "db.sqlite", api_key=SECRET)
    assert (await run_engine(settings, small_dataset, name="echo"))[1] == "failed"
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.query_one(DataTable).row_count)
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, RunScreen) and "Error" in screen_text(app),
            what="the run's summary with its error",
        )
        text = screen_text(app)
    assert "Incorrect API key provided" in text and REDACTED in text
    assert not leaks(text), text


def test_show_json_keeps_the_redacted_error(project, small_dataset, server, capsys):
    server.control(echo_auth="masked", echo_auth_status=401)
    hbtui_in_process(capsys, "run", "--data", str(small_dataset))
    code, out, _ = hbtui_in_process(capsys, "show", "latest", "--json")
    error = json.loads(out)["run"]["error"]
    assert code == 0 and error.startswith("auth: HTTP 401: Incorrect API key provided: <redacted>."), error
