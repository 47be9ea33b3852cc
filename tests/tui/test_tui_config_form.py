"""The configuration form (issue 13, defect 6): a path chooses the local file, messages name the
form's own fields, the data source is kept for the next run, the call settings are on the form,
the Subset list opens without hiding the labels below it, presets are renamed and deleted there,
and ctrl+g asks before it replaces what was edited in `.env` meanwhile."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import Input, OptionList, Select
from textual.widgets._select import SelectOverlay

from hbtui.core.settings.loading import load_settings
from hbtui.core.settings.presets import load_presets, save_preset
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import ConfigScreen
from hbtui.tui.screens.config_form import LOCAL_FILE
from hbtui.tui.screens.confirm import ConfirmModal
from hbtui.tui.screens.monitor import MonitorScreen
from hbtui.tui.screens.presets import PresetNameModal, PresetPickerModal
from tests.conftest import make_record, offline_settings, settings_for, write_jsonl
from tests.support.tui import wait_for

SIZES = [(80, 24), (120, 40)]


def two_records(tmp_path):
    return write_jsonl(tmp_path / "two.jsonl", [make_record(f"p{i}", [("[[MET]] ok", 1, [])]) for i in range(2)])


async def open_form(pilot, app) -> ConfigScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the form")
    await pilot.pause()
    return app.screen


async def focused_field(pilot, app, name: str) -> tuple[ConfigScreen, Input]:
    screen = await open_form(pilot, app)
    field = screen.query_one(f"#field-{name}", Input)
    field.focus()
    await pilot.pause()
    return screen, field


def type_into(screen: ConfigScreen, name: str, text: str) -> None:
    screen.query_one(f"#field-{name}", Input).value = text


@pytest.mark.parametrize("size", SIZES)
async def test_a_path_typed_chooses_the_local_file(tmp_path, size):
    data = two_records(tmp_path)
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=size) as pilot:
        screen = await open_form(pilot, app)
        assert screen.raw("subset") == "main"
        type_into(screen, "data_path", str(data))
        await pilot.pause()
        assert screen.raw("subset") == LOCAL_FILE
        assert screen._problems["data_path"] is None


@pytest.mark.parametrize("size", SIZES)
async def test_problems_name_which_of_two_fields_of_one_label(tmp_path, size):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=size) as pilot:
        screen = await open_form(pilot, app)
        for name in ("base_url", "model_test", "model_grader"):
            type_into(screen, name, "http://127.0.0.1:9/v1" if name == "base_url" else "m")
        type_into(screen, "temperature_grader", "hot")
        type_into(screen, "grader_base_url", "not a url")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        status = str(screen.query_one("#config-status").render())
        assert "temperature (grader)" in status and "base url (grader)" in status
        assert "temperature (model under test)" not in status


async def test_a_start_refused_names_the_form_field_not_the_flag(tmp_path):
    data = two_records(tmp_path)
    settings = offline_settings(db_path=str(tmp_path / "runs.sqlite"), base_url="http://127.0.0.1:9/v1")
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_form(pilot, app)
        for name, text in (("model_test", "m"), ("model_grader", "g"), ("data_path", str(data)), ("limit", "50")):
            type_into(screen, name, text)
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "only 2 records" in str(screen.query_one("#config-status").render()))
        status = str(screen.query_one("#config-status").render())
        assert '"conversations"' in status and "--limit" not in status


async def test_the_data_source_of_the_last_run_is_the_next_forms(server, tmp_path):
    data = two_records(tmp_path)
    db = tmp_path / "runs.sqlite"
    app = HBTuiApp(settings=settings_for(server, db), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_form(pilot, app)
        type_into(screen, "data_path", str(data))
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the run started")
        await wait_for(pilot, lambda: not app.drivers_going(), what="the run's end")
    again = HBTuiApp(settings=settings_for(server, db), env_file=None)
    async with again.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        screen = await open_form(pilot, again)
        assert screen.raw("subset") == LOCAL_FILE
        assert screen.raw("data_path") == str(data.resolve())


async def test_timeout_and_attempts_are_on_the_form(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite"), timeout=45.0), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_form(pilot, app)
        assert screen.raw("timeout") == "45"
        type_into(screen, "max_attempts", "2")
        type_into(screen, "grader_parse_attempts", "5")
        await pilot.pause()
        values, _ = screen.validate_all()
        settings = screen.form_settings(values)
        assert (settings.timeout, settings.max_attempts, settings.grader_parse_attempts) == (45.0, 2, 5)


async def test_the_batch_api_is_a_field_of_the_form_and_of_its_presets(tmp_path):
    from textual.widgets import Select

    from hbtui.core.settings.presets import preset_settings

    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_form(pilot, app)
        assert screen.raw("batch") == "false"
        screen.query_one("#field-batch", Select).value = "true"
        await pilot.pause()
        values, _ = screen.validate_all()
        assert screen.form_settings(values).batch is True
        save_preset("by-batch", screen.preset_values())
    assert preset_settings("by-batch")["batch"] is True  # `hbtui run --preset by-batch` goes by batch


async def test_each_models_api_is_chosen_on_the_form_and_temperature_may_be_not_sent(tmp_path):
    """API_TEST and API_GRADER: chat or responses, no "not sent" (chat is the default); and a
    temperature typed as "not sent" is left out."""
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_form(pilot, app)
        api = screen.query_one("#field-api_grader", Select)
        assert [value for _, value in api._options] == ["chat", "responses"] and api.value == "chat"
        api.value = "responses"
        type_into(screen, "temperature_grader", "not sent")
        for name, text in (("base_url", "http://127.0.0.1:9/v1"), ("model_test", "m"), ("model_grader", "g")):
            type_into(screen, name, text)
        await pilot.pause()
        values, problems = screen.validate_all()
        assert not problems
        settings = screen.form_settings(values)
        assert (settings.api_test, settings.api_grader, settings.temperature_grader) == ("chat", "responses", None)


@pytest.mark.parametrize("size", SIZES)
async def test_the_subset_list_opens_without_hiding_the_fields_below(tmp_path, size):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=size) as pilot:
        screen = await open_form(pilot, app)
        subset = screen.query_one("#field-subset", Select)
        subset.focus()
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: subset.expanded, what="the list open")
        await pilot.pause()
        overlay = subset.query_one(SelectOverlay).region
        for name in ("data_path", "limit", "seed"):
            row = screen.query_one(f"#row-{name}").region  # its label and its input
            assert not overlay.overlaps(row), f"the open list hides the field {name}"


async def test_presets_are_renamed_and_deleted_in_the_picker(tmp_path):
    save_preset("first", {"model_test": "a"})
    save_preset("second", {"model_test": "b"})
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_form(pilot, app)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, PresetPickerModal), what="the picker")
        picker = app.screen
        picker.query_one(OptionList).highlighted = picker.names.index("first")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, PresetNameModal), what="the new name asked")
        app.screen.query_one(Input).value = "renamed"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is picker and "renamed" in picker.names)
        assert set(load_presets()) == {"renamed", "second"}
        assert load_presets()["renamed"] == {"model_test": "a"}
        picker.query_one(OptionList).highlighted = picker.names.index("second")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is picker and "second" not in picker.names)
        assert set(load_presets()) == {"renamed"}
        picker.query_one(OptionList).highlighted = picker.names.index("reference")
        await pilot.press("d")
        await pilot.pause()
        assert app.screen is picker and "reference" in picker.names  # built in: stays


async def test_ctrl_g_asks_before_it_replaces_a_value_edited_in_the_file_meanwhile(tmp_path):
    env = tmp_path / ".env"
    env.write_text("MODEL_TEST=first\nOTHER_TOOL=1\n")
    settings = load_settings(env, environ={})
    app = HBTuiApp(settings=replace(settings, db_path=str(tmp_path / "none.sqlite")), env_file=str(env))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_form(pilot, app)
        type_into(screen, "base_url", "http://127.0.0.1:9/v1")
        await pilot.pause()
        # Meanwhile, in an editor: the model changed, a comment and another tool's key added.
        env.write_text("MODEL_TEST=edited\nOTHER_TOOL=1\n# mine\nNEW_TOOL=2\n")
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the question")
        assert "MODEL_TEST" in str(app.screen.question)
        await pilot.press("n")  # keep the file's
        await wait_for(pilot, lambda: app.screen is screen)
        text = env.read_text()
        assert "MODEL_TEST=edited" in text and "BASE_URL=http://127.0.0.1:9/v1" in text
        assert "# mine" in text and "NEW_TOOL=2" in text and "OTHER_TOOL=1" in text
        # Asked once: the file as written is what the form now stands on.
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert app.screen is screen and "MODEL_TEST=first" in env.read_text()


async def declined_then_started(pilot, app, screen, key: str, db) -> None:
    """ "Not now" to the question plans nothing; ``key`` again and "Start" start the run, which
    ends."""
    import sqlite3

    await pilot.press("n")
    await wait_for(pilot, lambda: app.screen is screen, what="back on the form")
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone() == (0,)
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the question again")
    await pilot.press("y")
    await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the run started")
    await wait_for(pilot, lambda: not app.drivers_going(), timeout=60, what="the run's end")


async def test_a_large_run_is_confirmed_naming_its_calls_before_anything_is_planned(server, tmp_path):
    """ctrl+s on the first screen a user sees is one key from thousands of paid calls: past
    LARGE_RUN_CONVERSATIONS the question names the conversations and the calls; "not now"
    plans nothing, "start" starts it (a new user's trial started 9,500 calls with one key)."""
    import sqlite3

    from hbtui.tui.screens.config_form import LARGE_RUN_CONVERSATIONS

    records = [make_record(f"p{i}", [("[[MET]] ok", 1, []), ("[[NOT_MET]] no", 2, [])]) for i in range(51)]
    data = write_jsonl(tmp_path / "many.jsonl", records)
    db = tmp_path / "runs.sqlite"
    app = HBTuiApp(settings=settings_for(server, db), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_form(pilot, app)
        type_into(screen, "data_path", str(data))
        type_into(screen, "repeats", "2")  # 102 conversations, just past the line
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the question")
        assert 102 > LARGE_RUN_CONVERSATIONS
        question = app.screen.question.splitlines()
        assert question[0] == "Start a run of 102 conversations?"
        assert question[1] == "About 306 calls: 102 to test-model, 204 to grader-model."
        assert question[2].startswith("Tokens in ") and question[3].startswith("Estimated cost unknown")
        await declined_then_started(pilot, app, screen, "ctrl+s", db)
    assert sqlite3.connect(db).execute("SELECT n_conversations, status FROM runs").fetchone() == (102, "finished")


async def test_ctrl_b_estimates_the_run_the_form_describes_and_starts_it_or_not(server, tmp_path, monkeypatch):
    """Before Start, the same estimate as `hbtui estimate` (calls, tokens, cost at the online and
    the batch price, time), then Start or not; nothing is called or planned to estimate."""
    import sqlite3

    folder = tmp_path / "config" / "hbtui"
    folder.mkdir(parents=True)
    (folder / "prices.json").write_text(
        '{"test-model": {"input": 1, "output": 2, "batch_input": 0.5, "batch_output": 1},'
        ' "grader-model": {"input": 3, "output": 4, "batch_input": 1.5, "batch_output": 2}}'
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    records = [make_record(f"p{i}", [("[[MET]] ok", 1, []), ("[[NOT_MET]] no", 2, [])]) for i in range(3)]
    data = write_jsonl(tmp_path / "few.jsonl", records)
    db = tmp_path / "runs.sqlite"
    app = HBTuiApp(settings=settings_for(server, db, max_tokens_test=100, max_tokens_grader=50), env_file=None)
    server.reset_stats()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_form(pilot, app)
        type_into(screen, "data_path", str(data))
        await pilot.pause()
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the estimate")
        question = app.screen.question.splitlines()
        assert question[0] == "Start a run of 3 conversations?"
        assert question[1] == "About 9 calls: 3 to test-model, 6 to grader-model."
        assert question[2].startswith("Tokens in ") and "out unknown, at most 600." in question[2]
        assert " online; " in question[3] and " by batch; time " in question[3]
        assert server.stats()["requests"] == 0
        await declined_then_started(pilot, app, screen, "ctrl+b", db)
    assert sqlite3.connect(db).execute("SELECT n_conversations, status FROM runs").fetchone() == (3, "finished")


async def test_keys_typed_in_one_burst_take_effect_in_their_order(tmp_path):
    """`End BSpace 2 Tab` arriving at once (typed fast, one packet over SSH): Textual ran the
    field's backspace only after the key had bubbled up to the app, so the 2 went in first and the
    backspace then deleted it, leaving Repeats empty (a new user's trial)."""
    from textual import events

    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, field = await focused_field(pilot, app, "repeats")
        for key, character in (("end", None), ("backspace", None), ("2", "2"), ("tab", "\t")):
            app.post_message(events.Key(key, character))
        await wait_for(pilot, lambda: app.focused is not field, what="the next field")
        assert field.value == "2" and screen._problems["repeats"] is None


async def test_ctrl_c_in_a_field_with_nothing_selected_still_quits(tmp_path):
    """The field's copy declines with nothing to copy: the key goes on to the app's ctrl+c,
    which quits (over SSH it is the key people press), as before fields ran their keys in order."""
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        _screen, field = await focused_field(pilot, app, "repeats")
        field.action_end()  # nothing selected
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app._exit, what="the app to quit")


async def test_the_professional_preset_loaded_on_the_form_keeps_what_the_form_has_no_field_for(tmp_path):
    """--preset professional's length adjustment has no field on the form: loaded from the
    picker, it still goes with the run, and the status line says so."""
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_form(pilot, app)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, PresetPickerModal), what="the picker")
        picker = app.screen
        picker.query_one(OptionList).highlighted = picker.names.index("professional")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen, what="back on the form")
        await pilot.pause()
        assert screen.raw("api_grader") == "responses" and screen.raw("temperature_grader") == "not sent"
        assert "LENGTH_PENALTY 0.0147" in str(screen.query_one("#config-status").render())
        for name, text in (("base_url", "http://127.0.0.1:9/v1"), ("model_test", "m"), ("model_grader", "g")):
            type_into(screen, name, text)
        await pilot.pause()
        values, problems = screen.validate_all()
        assert not problems
        settings = screen.form_settings(values)
        assert (settings.length_penalty, settings.length_centre, settings.reasoning_grader) == (0.0147, 2000.0, "low")
        assert settings.temperature_grader is None and settings.max_tokens_grader is None
