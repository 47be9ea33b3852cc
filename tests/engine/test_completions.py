"""Grading the records' own completions (`hbtui run --completions physician|reference`), proven
against the reference's own physician-completion modes.

The reference's `healthbench_eval.py` is imported by path under stub modules (the `ref` fixture
of tests/core/test_reference.py); here its remaining stand-ins are filled in: blobfile reads the
shared main records, its grader answers as the project's test server does (the verdict is a
function of the grader prompt's text), so its whole HealthBenchEval runs and aggregates beside
ours on the same verdicts.
"""

import asyncio
import json
import random
import sqlite3
import types

import pytest

from hbtui import cli
from hbtui.core import reference
from hbtui.core.completion_groups import GROUPS
from hbtui.core.completions import plan_completions
from hbtui.core.dataset import DatasetError, load_jsonl
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.store import Store, schema
from tests.conftest import MAIN_SUBSET, make_record, needs_shared, write_jsonl
from tests.core.test_reference import needs_reference, ref  # noqa: F401 - ref is a fixture
from tests.support.fake_server import expected_verdict
from tests.support.old_schema import make_database_before

MODES = {"physician": False, "reference": True}  # hbtui's mode: the reference's run_reference_completions


class ServerLikeGrader:
    """The reference's grader sampler answering as the test server does, keeping what it was sent
    (with the system message its ChatCompletionSampler puts first)."""

    def __init__(self):
        self.sent = []

    def __call__(self, messages):
        self.sent.append([{"role": "system", "content": reference.SYSTEM_MESSAGE}, *messages])
        met = expected_verdict(messages[-1]["content"])
        return types.SimpleNamespace(response_text=json.dumps({"explanation": "x", "criteria_met": met}))


class Result:
    def __init__(self, **fields):
        self.__dict__.update(fields)


@pytest.fixture
def reference_eval(ref, monkeypatch):  # noqa: F811 - the fixture imported above
    """The reference module with its data read from the shared main records, and its sampling
    seeded by the test (the reference always seeds 0; hbtui's --seed changes that one number)."""
    monkeypatch.setattr(ref, "bf", types.SimpleNamespace(BlobFile=lambda _path, mode: open(MAIN_SUBSET, mode)))
    monkeypatch.setattr(ref, "SingleEvalResult", Result)
    monkeypatch.setattr(ref, "EvalResult", Result)
    monkeypatch.setattr(
        ref.common, "map_with_progress", lambda fn, items, **_: [fn(item) for item in items], raising=False
    )
    page = types.SimpleNamespace(render=lambda **_: "")
    monkeypatch.setattr(ref.common, "jinja_env", types.SimpleNamespace(from_string=lambda _: page), raising=False)
    return ref


def reference_groups(module, mode: str, limit, seed: int = 0, grader=None):
    """{group: HealthBenchEval} as the reference's physician_completions_main makes them."""
    with_references = MODES[mode]
    module.random = types.SimpleNamespace(Random=lambda _zero: random.Random(seed))
    evals = {}
    for group, about in module.PHYSICIAN_COMPLETION_MODES.items():
        if with_references and not about["has_reference"]:
            continue
        evals[group] = module.HealthBenchEval(
            grader_model=grader,
            physician_completions_mode=group,
            run_reference_completions=with_references,
            num_examples=limit,
        )
    return evals


@needs_reference
@needs_shared
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("limit, seed", [(None, 0), (1, 0), (5, 0), (7, 3), (40, 11), (300, 2), (900, 5)])
def test_the_completions_chosen_are_the_references_group_by_group(reference_eval, monkeypatch, mode, limit, seed):
    monkeypatch.setattr(reference_eval, "random", random)  # restored after reference_groups replaces it
    evals = reference_groups(reference_eval, mode, limit, seed)
    ours = plan_completions(load_jsonl(MAIN_SUBSET), mode, limit, seed)
    chosen = [(c.group, c.record.prompt_id, c.text) for c in ours.chosen]
    theirs = [(group, e["prompt_id"], e["completion_to_trial"]) for group, ev in evals.items() for e in ev.examples]
    assert chosen == theirs
    assert list(ours.sampled) == list(evals)


@needs_shared
def test_records_without_completions_are_skipped_and_counted():
    dataset = load_jsonl(MAIN_SUBSET)
    physician = plan_completions(dataset, "physician", None)
    assert physician.without == 93 and len(physician.chosen) == 738 - 93
    assert physician.records == {"Group 1": 217, "Group 2": 219, "Group 3": 209}
    references = plan_completions(dataset, "reference", None)
    assert references.without == 93 and references.expanded == {"Group 2": 876, "Group 3": 836}
    labels = {c.label for c in references.chosen}
    assert labels == {"reference 1", "reference 2", "reference 3", "reference 4"}


def test_a_file_without_completions_or_with_a_broken_one_is_one_line(tmp_path):
    plain = write_jsonl(tmp_path / "plain.jsonl", [make_record("p1", [("[[MET]] x", 5, [])])])
    with pytest.raises(DatasetError, match=r"plain.jsonl: no record has physician completions .*\(1 records without"):
        plan_completions(load_jsonl(plain), "physician", None)
    broken = make_record("p2", [("[[MET]] x", 5, [])])
    broken["ideal_completions_data"] = {"ideal_completions_group": "Group 1", "ideal_completion": 7}
    path = write_jsonl(tmp_path / "broken.jsonl", [make_record("p1", [("x", 5, [])]), broken])
    with pytest.raises(DatasetError) as raised:
        plan_completions(load_jsonl(path), "physician", None)
    assert str(raised.value) == (
        f"{path}:2: record p2: field 'ideal_completions_data.ideal_completion': missing or not a string"
    )


def test_a_completions_run_needs_no_model_under_test():
    Settings(base_url="http://h/v1", model_grader="g", completions="physician").require_models()
    Settings(grader_base_url="http://h/v1", model_grader="g", completions="reference").require_models()
    with pytest.raises(SettingsError, match="MODEL_TEST is not set"):
        Settings(base_url="http://h/v1", model_grader="g").require_models()
    with pytest.raises(SettingsError, match="BASE_URL is not set"):
        Settings(model_grader="g", completions="physician").require_models()


def test_a_mode_that_is_none_of_them_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("COMPLETIONS=physician\n")
    assert cli.load_settings(tmp_path / ".env").completions == "physician"
    assert cli.main(["run", "--completions", "surgeon", "--data", "x.jsonl"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        "hbtui: error: COMPLETIONS (command line): 'surgeon' is not a completions mode (physician, reference)\n"
    )
    assert not (tmp_path / "runs").exists()


def conversations(db):
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT c.position, c.completion_group, c.completion, c.reply, r.body FROM conversations c"
            " JOIN records r ON r.id = c.record_id WHERE c.run_id = (SELECT max(id) FROM runs) ORDER BY c.position"
        ).fetchall()


@needs_reference
@needs_shared
@pytest.mark.parametrize("mode, limit, seed", [("physician", 3, 4), ("reference", 2, 1)])
def test_a_run_of_completions_grades_them_as_the_reference_does(
    reference_eval, server, tmp_path, monkeypatch, capsys, mode, limit, seed
):
    """End to end against the test server: the completions chosen, the grader requests byte for
    byte, and each group's scores, are the reference's physician-completion mode's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_GRADER=grader-model\n")
    monkeypatch.delenv("GRADER_TEMPLATE", raising=False)
    server.control(capture_requests=True)
    argv = ["run", "--preset", "reference", "--completions", mode, "--data", str(MAIN_SUBSET)]
    argv += ["--limit", str(limit), "--seed", str(seed), "--name", "pc"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "93 records without completions skipped" in printed
    assert ("Group 1 has no reference completions" in printed) == (mode == "reference")

    grader = ServerLikeGrader()
    evals = reference_groups(reference_eval, mode, limit, seed, grader)
    results = {group: ev(None) for group, ev in evals.items()}
    capsys.readouterr()  # what the reference printed

    db = tmp_path / "runs" / "hbtui.sqlite"
    rows = conversations(db)
    assert [(group, json.loads(body)["prompt_id"], reply) for _, group, _, reply, body in rows] == [
        (group, e["prompt_id"], e["completion_to_trial"]) for group, ev in evals.items() for e in ev.examples
    ]
    requests = server.captured_requests()
    assert all("criteria_met" in r["messages"][-1]["content"] for r in requests)  # no reply was generated
    assert sorted(json.dumps(r["messages"]) for r in requests) == sorted(json.dumps(m) for m in grader.sent)
    assert all("system: " not in r["messages"][-1]["content"].split("# Rubric item")[0] for r in requests)

    assert cli.main(["show", "pc", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run"]["completions"] == mode
    assert list(shown["groups"]) == list(results)
    for group, theirs in results.items():
        ours = shown["groups"][group]
        assert ours["description"] == GROUPS[group]
        assert ours["overall_score"] == pytest.approx(theirs.score, abs=1e-12)
        for name, metric in ours["metrics"].items():
            assert metric["value"] == pytest.approx(float(theirs.metrics[name]), abs=1e-12), name
            assert metric["n"] == theirs.metrics[f"{name}:n_samples"], name
        assert set(ours["metrics"]) == {k for k in theirs.metrics if not k.endswith((":n_samples", ":bootstrap_std"))}
    assert shown["requests"]["reference_identical"] is True and shown["requests"]["completions"] == mode

    assert cli.main(["show", "pc"]) == 0
    text = capsys.readouterr().out
    assert f"{mode} completions graded, no model under test" in text
    for group in results:
        assert f"{group} " in text and GROUPS[group] in text
    folder = next((tmp_path / "runs").glob("*-pc"))
    described = (folder / "description.md").read_text()
    assert "93 records without completions skipped" in described and "## Groups" in described


def test_an_older_database_gains_the_completion_columns(tmp_path):
    db = tmp_path / "old.sqlite"
    make_database_before(db, schema.MIGRATE_ADD_COMPLETIONS)

    async def open_it():
        async with await Store.open(db):
            pass

    asyncio.run(open_it())
    with sqlite3.connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(conversations)")}
        assert {"completion_group", "completion"} <= columns
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION


def completion_records(tmp_path):
    """Two records with physicians' completions (Groups 1 and 2) and one without."""
    first = make_record("p1", [("[[MET]] Advises rest", 5, ["axis:accuracy"]), ("[[NOT_MET]] Hydration", 5, [])])
    first["ideal_completions_data"] = {
        "ideal_completion": "Rest, physician says.",
        "ideal_completions_group": "Group 1",
        "ideal_completions_ref_completions": [],
    }
    second = make_record("p2", [("[[MET]] Sees a doctor", 4, ["axis:accuracy"])], theme="emergency")
    second["ideal_completions_data"] = {
        "ideal_completion": "Go to a doctor.",
        "ideal_completions_group": "Group 2",
        "ideal_completions_ref_completions": ["r1", "r2", "r3", "r4"],
    }
    return write_jsonl(tmp_path / "pc.jsonl", [first, second, make_record("p3", [("[[MET]] x", 5, [])])])


def test_a_resumed_completions_run_keeps_its_mode_and_refuses_another(server, tmp_path, monkeypatch, capsys):
    """Planned, then driven by `hbtui resume`: still no reply generated and no system line for
    the grader, with only a grader endpoint configured; another mode on resume is refused."""
    from hbtui.services import plan_run

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        f"GRADER_BASE_URL={server.base_url}\nMODEL_GRADER=grader-model\nSYSTEM_MESSAGE_TEST=Be brief.\n"
    )
    db = tmp_path / "runs" / "hbtui.sqlite"
    db.parent.mkdir()
    settings = cli.load_settings(tmp_path / ".env")
    settings = settings.with_overrides(completions="physician", db_path=str(db))

    async def plan():
        async with await Store.open(db) as store:
            return await plan_run(store, settings, load_jsonl(completion_records(tmp_path)), name="pc")

    run_id = asyncio.run(plan())
    assert cli.main(["resume", str(run_id), "--completions", "reference"]) == cli.EXIT_USAGE
    assert "COMPLETIONS 'reference': run 1 was made with 'physician'" in capsys.readouterr().err
    server.control(capture_requests=True)
    assert cli.main(["resume", str(run_id)]) == 0
    out = capsys.readouterr().out
    assert "physician completions graded by grader-model" in out
    assert "completions: physician (physician completions; Group 1 1 of 1, Group 2 1 of 1); 1 records" in out
    requests = server.captured_requests()
    assert len(requests) == 3 and all("criteria_met" in r["messages"][-1]["content"] for r in requests)
    prompts = [r["messages"][-1]["content"] for r in requests]
    assert all("Be brief." not in p and "\nuser: I have a headache" in p for p in prompts)
    assert any("assistant: Rest, physician says." in p for p in prompts)
    assert cli.main(["show", "pc", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run"]["completions"] == "physician"
    assert {name: g["overall_score"] for name, g in shown["groups"].items()} == {"Group 1": 0.5, "Group 2": 1.0}
    assert shown["overall_score"] == 0.75

    from hbtui.tui.screens.run_summary import summary_text

    async def read_run():
        async with await Store.open(db) as store:
            return await store.get_run(run_id)

    run = asyncio.run(read_run())
    summary = summary_text(run, run.report, run.status).plain
    assert "Groups  Group 1 0.500 n 1  Group 2 1.000 n 1\n" in summary
    assert "Replies physician completions (1 records without any skipped)\nGrader grader-model" in summary


async def test_the_form_starts_a_run_of_physician_completions_without_a_model_under_test(server, tmp_path):
    """The configuration screen's Completions field (from the setting's one description): chosen,
    the model under test may stay empty, and the run started grades the records' own completions."""
    from textual.widgets import Input, Select

    from hbtui.tui.app import HBTuiApp
    from hbtui.tui.screens.monitor import MonitorScreen
    from tests.conftest import settings_for
    from tests.support.tui import wait_for
    from tests.tui.test_tui_config_form import open_form

    data = completion_records(tmp_path)
    db = tmp_path / "runs.sqlite"
    app = HBTuiApp(settings=settings_for(server, db, model_test=None), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_form(pilot, app)
        field = screen.query_one("#field-completions", Select)
        assert screen.query_one("#row-completions").query_one("Label").render().plain == "Completions"
        screen.query_one("#field-data_path", Input).value = str(data)
        await pilot.pause()
        assert screen.validate_field("model_test")[1] == "required"
        field.value = "physician"
        await pilot.pause()
        assert screen._problems["model_test"] is None
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), what="the run started")
        await wait_for(pilot, lambda: not app.drivers_going(), what="the run's end")
    with sqlite3.connect(db) as conn:
        run = conn.execute("SELECT model_test, plan_json, status FROM runs").fetchone()
        replies = [r for (r,) in conn.execute("SELECT reply FROM conversations ORDER BY position")]
    assert run[0] == "physician completions" and json.loads(run[1])["completions"] == "physician"
    assert run[2] == "finished" and replies == ["Rest, physician says.", "Go to a doctor."]


def test_a_completions_run_compares_with_a_models_run_on_the_same_records(server, tmp_path, monkeypatch, capsys):
    """Pairs match by prompt_id (record and repeat): the model's reply against the physicians'
    completion, or against each of the four reference completions; the output says which."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    data = str(completion_records(tmp_path))
    for name, flags in (
        ("model", []),
        ("doc", ["--completions", "physician"]),
        ("refs", ["--completions", "reference"]),
    ):
        assert cli.main(["run", "--data", data, "--name", name, *flags]) == 0
    capsys.readouterr()

    assert cli.main(["compare", "model", "doc", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n"] == 2 and doc["pairs"].startswith("each pair is A's the model's reply and B's the physicians'")
    assert doc["score_b"] == 0.75  # the completions graded by the test server's markers, as in the run itself

    assert cli.main(["compare", "model", "refs", "--json"]) == 0
    refs = json.loads(capsys.readouterr().out)
    assert refs["n"] == 4  # p2's four reference completions, each against the model's one reply to p2
    assert "each of a record's reference completions pairs with the other run's reply to it" in refs["pairs"]

    assert cli.main(["regrade", "refs", "--name", "refs-again"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", "refs", "refs-again", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (
        again["n"] == 4
        and again["pairs"] == "each pair is the same reference completion of a record, graded in both runs"
    )
    assert again["agreement"]["table"]["only_a_met"] == again["agreement"]["table"]["only_b_met"] == 0

    assert cli.main(["compare", "model", "doc"]) == 0
    text = capsys.readouterr().out
    assert "pairs: each pair is A's the model's reply and B's the physicians' ideal completion" in text
    assert "model physician completions" in text


def test_a_completions_runs_exports_and_summaries_say_which_completion_and_call_no_model(
    server, tmp_path, monkeypatch, capsys
):
    """Each exported conversation names its group and which completion it is (after every older
    column); `show`, description.md and the run's summary print no tokens of a model that was not
    called, while a model's run keeps its line and exports the new columns empty."""
    import csv

    from hbtui.analysis.run_stats import run_statistics
    from hbtui.core.settings.config import Settings
    from hbtui.core.settings.prices import load_prices
    from hbtui.tui.screens.run_summary import summary_text

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    data = str(completion_records(tmp_path))
    assert cli.main(["run", "--data", data, "--name", "refs", "--completions", "reference"]) == 0
    assert cli.main(["run", "--data", data, "--name", "model"]) == 0
    for run in ("refs", "model"):
        for fmt in ("jsonl", "csv"):
            assert cli.main(["export", run, "--format", fmt, "--out", f"{run}.{fmt}"]) == 0
    capsys.readouterr()

    lines = [json.loads(line) for line in (tmp_path / "refs.jsonl").read_text().splitlines()]
    assert [(line["completion_group"], line["completion_label"], line["completion"]) for line in lines] == [
        ("Group 2", f"reference {i}", f"r{i}") for i in (1, 2, 3, 4)
    ]
    assert list(lines[0])[-2:] == ["completion_group", "completion_label"]
    rows = list(csv.DictReader((tmp_path / "refs.csv").open()))
    assert list(rows[0])[-2:] == ["completion_group", "completion_label"]
    assert [(r["completion_group"], r["completion_label"]) for r in rows] == [
        ("Group 2", "reference 1"),
        *[("Group 2", f"reference {i}") for i in (2, 3, 4)],
    ]
    model_lines = [json.loads(line) for line in (tmp_path / "model.jsonl").read_text().splitlines()]
    assert all(line["completion_group"] is None and line["completion_label"] is None for line in model_lines)
    model_rows = list(csv.DictReader((tmp_path / "model.csv").open()))
    assert all(r["completion_group"] == r["completion_label"] == "" for r in model_rows)

    assert cli.main(["show", "refs"]) == 0
    shown = capsys.readouterr().out
    assert "model under test" not in shown.split("no model under test")[-1]
    assert "tokens  grader grader-model: " in shown
    described = (next((tmp_path / "runs").glob("*-refs")) / "description.md").read_text()
    assert "tokens of the model under test" not in described and "- tokens of the grader: " in described
    assert cli.main(["show", "model"]) == 0
    assert "tokens  model under test test-model: " in capsys.readouterr().out

    async def summaries():
        async with await Store.open(tmp_path / "runs" / "hbtui.sqlite") as store:
            texts = {}
            for run in await store.list_runs():
                stats = await run_statistics(store, run, Settings(), load_prices())
                texts[run.name] = summary_text(run, run.report, run.status, stats).plain
            return texts

    texts = asyncio.run(summaries())
    assert "Tokens of the model under test" not in texts["refs"] and "Tokens of the grader " in texts["refs"]
    assert "Tokens of the model under test " in texts["model"]


def test_a_completions_runs_first_lines_say_its_replies_are_the_records_own(server, tmp_path, monkeypatch, capsys):
    """Stored with the plan, they are no earlier process's work: not 'already stored'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_GRADER=grader-model\n")
    data = str(completion_records(tmp_path))
    assert cli.main(["run", "--data", data, "--name", "doc", "--completions", "physician"]) == 0
    printed = capsys.readouterr().out
    assert "replies: the records' own completions (2)" in printed and "already stored" not in printed
