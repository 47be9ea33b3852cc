"""HealthBench Professional's records (a format of their own) are read wherever a HealthBench file
is, as one would write them in HealthBench's format. Records made here in that format: no copy of
the real file is kept."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from hbtui import cli
from hbtui.core.dataset import HEALTHBENCH, PROFESSIONAL, DatasetError, load_jsonl
from tests.conftest import run_engine, settings_for, user_folder


def professional(record_id: str = "pro-1", **changes) -> dict:
    record = {
        "id": record_id,
        "conversation": {
            "messages": [
                {"role": "user", "content": "A 4-year-old with acute otitis media, no allergies: first-line?"},
                {"role": "assistant", "content": "Is there a penicillin allergy or recent amoxicillin?"},
                {"role": "user", "content": "Neither. Dosing, please."},
            ]
        },
        "rubric_items": [
            {"criterion_text": "Recommends high-dose amoxicillin", "points": 7},
            {"criterion_text": "Gives a weight-based dose", "points": 5},
            {"criterion_text": "Recommends a fluoroquinolone", "points": -6},
        ],
        "use_case": "consult",
        "type": "good_faith",
        "difficulty": "typical",
        "specialty": "ent",
        "physician_response": "Start the antibiotic the allergy history allows; recheck in two days (made up for this test).",
        "canary": "test-records-written-for-the-suite",
    }
    for key, value in changes.items():
        if value is ...:
            record.pop(key)
        else:
            record[key] = value
    return record


def write(path, *records) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def test_a_professional_record_reads_as_one_written_in_healthbenchs_format(tmp_path):
    record = professional()
    (read,) = load_jsonl(write(tmp_path / "pro.jsonl", record)).records
    assert read.source_format == PROFESSIONAL
    assert read.prompt_id == "pro-1"
    assert list(read.prompt) == record["conversation"]["messages"]
    assert [(c.criterion, c.points, c.tags) for c in read.rubrics] == [
        ("Recommends high-dose amoxicillin", 7, ()),
        ("Gives a weight-based dose", 5, ()),
        ("Recommends a fluoroquinolone", -6, ()),
    ]
    assert read.example_tags == ("use_case:consult", "type:good_faith", "difficulty:typical", "specialty:ent")
    # What the store keeps of it is the record in HealthBench's format, as every later reader reads.
    stored = json.loads(read.raw)
    assert stored["prompt"] == record["conversation"]["messages"] and stored["rubrics"][0]["criterion"]
    assert stored["physician_response"] == record["physician_response"]
    # The same record written in HealthBench's format reads the same.
    written = {k: stored[k] for k in ("prompt_id", "prompt", "rubrics", "example_tags")}
    (same,) = load_jsonl(write(tmp_path / "hb.jsonl", written)).records
    assert same.source_format == HEALTHBENCH
    assert (same.prompt_id, same.prompt, same.rubrics, same.example_tags) == (
        read.prompt_id,
        read.prompt,
        read.rubrics,
        read.example_tags,
    )


BROKEN = {
    "no id": (professional(id=...), "field 'id'"),
    "no messages": (professional(conversation={"turns": []}), "field 'conversation.messages'"),
    "an empty message": (
        professional(conversation={"messages": [{"role": "user", "content": ""}]}),
        "field 'conversation.messages[0].content': is empty",
    ),
    "ending with the assistant": (
        professional(conversation={"messages": [{"role": "assistant", "content": "hello"}]}),
        "field 'conversation.messages': the last message is from 'assistant'",
    ),
    "no rubric items": (professional(rubric_items=[]), "field 'rubric_items'"),
    "a criterion without text": (
        professional(rubric_items=[{"points": 5}]),
        "field 'rubric_items[0].criterion_text': missing",
    ),
    "points not a number": (
        professional(rubric_items=[{"criterion_text": "x", "points": "five"}]),
        "field 'rubric_items[0].points': 'five' is not a number",
    ),
    "no specialty": (professional(specialty=...), "field 'specialty': missing"),
    "a use case not a string": (professional(use_case=3), "field 'use_case'"),
    "a physician response not a string": (professional(physician_response=["x"]), "field 'physician_response'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_professional_line_is_one_line_naming_file_line_and_its_field(tmp_path, case):
    record, field = BROKEN[case]
    path = write(tmp_path / "pro.jsonl", professional("pro-0"), record)
    with pytest.raises(DatasetError) as error:
        load_jsonl(path)
    message = str(error.value)
    assert message.startswith(f"{path}:2: ") and field in message and "\n" not in message, message


def test_a_file_mixing_the_two_formats_is_refused_at_the_first_line_of_the_other(tmp_path):
    healthbench = {
        "prompt_id": "hb-1",
        "prompt": [{"role": "user", "content": "Headache for two days."}],
        "rubrics": [{"criterion": "Asks about red flags", "points": 5, "tags": []}],
    }
    path = write(tmp_path / "mixed.jsonl", professional("pro-1"), professional("pro-2"), healthbench)
    with pytest.raises(DatasetError, match=r"mixed\.jsonl:3: a record in HealthBench's format in a file of"):
        load_jsonl(path)
    path = write(tmp_path / "mixed2.jsonl", healthbench, professional())
    with pytest.raises(DatasetError, match=r"mixed2\.jsonl:2: a record in HealthBench Professional's format"):
        load_jsonl(path)


def test_a_run_of_professional_records_scores_each_category_as_a_theme_is(tmp_path, monkeypatch, server, capsys):
    """Its four categories are example tags: scored per value, as the reference scores every
    example tag, and kept in the stored record the app reads."""
    user_folder(tmp_path, monkeypatch, server)
    records = [
        professional("pro-1"),
        professional("pro-2", use_case="writing", type="red_teaming", specialty="cardiology"),
        professional("pro-3", difficulty="difficult"),
    ]
    data = write(tmp_path / "professional.jsonl", *records)
    assert cli.main(["run", "--data", data, "--name", "pro"]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["show", "pro", "--json"]) == cli.EXIT_OK
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    for tag, n in {
        "use_case:consult": 2,
        "use_case:writing": 1,
        "type:good_faith": 2,
        "type:red_teaming": 1,
        "difficulty:typical": 2,
        "difficulty:difficult": 1,
        "specialty:ent": 2,
        "specialty:cardiology": 1,
    }.items():
        assert metrics[tag]["n"] == n, tag
    assert metrics["overall_score"]["n"] == 3
    # show's text breaks the score down by each category, and says there are no axes.
    assert cli.main(["show", "pro"]) == cli.EXIT_OK
    text = capsys.readouterr().out
    for heading, value in (("use case", "writing"), ("type", "red_teaming"), ("difficulty", "difficult")):
        assert any(line.startswith(heading) and "score" in line for line in text.splitlines()), heading
        assert any(line.startswith(value) for line in text.splitlines()), value
    assert "axis: none: HealthBench Professional's criteria have no axes" in text
    assert not any(line.startswith("theme ") for line in text.splitlines())


async def test_the_app_shows_a_professional_run_by_category_at_80x24(tmp_path, monkeypatch, server):
    from hbtui.tui.widgets.breakdown import ScoreBreakdown
    from tests.support.browse import open_run
    from tests.support.browser_harness import browser_app

    data = write(tmp_path / "professional.jsonl", professional("pro-1"), professional("pro-2", use_case="research"))
    db = tmp_path / "hbtui.sqlite"
    _, status = await run_engine(settings_for(server, db), data)
    assert status == "finished"
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_run(pilot, 1)
        by_category = screen.query_one("#by-category", ScoreBreakdown)
        assert by_category.display and not screen.query_one("#by-theme").display
        names = [name for name, _ in by_category.rows]
        assert names[:2] in (["use_case: consult", "use_case: research"], ["use_case: research", "use_case: consult"])
        assert {"type: good_faith", "difficulty: typical", "specialty: ent"} <= set(names)
        assert screen.query_one("#by-axis", ScoreBreakdown).rows == []
        assert "no axes" in str(screen.query_one("#by-axis", ScoreBreakdown).content)


async def test_the_app_leads_with_the_length_adjusted_score_of_a_run_made_with_one_at_80x24(
    tmp_path, monkeypatch, server
):
    """A run made with a length adjustment (as --preset professional makes it): the runs list,
    the run's title and its summary show the length-adjusted score first, named as such."""
    from textual.widgets import DataTable, Static

    from tests.support.browse import open_run
    from tests.support.browser_harness import browser_app

    server.control(reply_text="a reply longer than 2000 characters " * 120)
    data = write(tmp_path / "professional.jsonl", professional("pro-1"), professional("pro-2", use_case="research"))
    db = tmp_path / "hbtui.sqlite"
    _, status = await run_engine(settings_for(server, db, length_penalty=0.0147, length_centre=2000.0), data)
    assert status == "finished"
    with sqlite3.connect(db) as conn:
        metrics = json.loads(conn.execute("SELECT report_json FROM runs").fetchone()[0])["metrics"]
    adjusted, overall = metrics["overall_score_length_adjusted"]["value"], metrics["overall_score"]["value"]
    assert adjusted < overall
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        assert f"adj {adjusted:.3f}" in [str(cell) for cell in table.get_row_at(0)]
        legend = app.screen.query_one("#runs-legend", Static)
        assert legend.display and "adj: the length-adjusted score" in str(legend.render())
        screen = await open_run(pilot, 1)
        title = str(screen.query_one("#run-title", Static).render())
        assert f"length-adjusted score {adjusted:.3f}" in title, title
        summary = str(screen.query_one("#run-summary", Static).render()).splitlines()
        assert summary[0].startswith(f"Length-adjusted score {adjusted:.3f}"), summary[:2]
        assert summary[1].startswith(f"Before the length adjustment {overall:.3f}"), summary[:2]
        assert all(len(line) <= 80 for line in summary[:2])
    # The monitor of the finished run, from the database, names its final score as such.
    from hbtui.store import Store
    from hbtui.tui.monitor_data import view_from_store

    async with await Store.open(db) as store:
        view = await view_from_store(store, 1)
    assert (view.final_name, view.final_score) == ("length-adjusted score", adjusted)


def test_the_professional_subset_comes_from_hugging_face_through_a_mirror_and_its_token_stays_there(
    tmp_path, monkeypatch
):
    """--subset professional: the dataset's file at its pinned revision, from HF_ENDPOINT (a local
    mirror here), with HF_TOKEN sent to the mirror only, not across its redirect to the file host;
    sha256-checked, and read as Professional's records are."""
    import dataclasses
    import hashlib

    import hbtui.core.dataset as dataset_module
    from hbtui.core.dataset import SUBSETS, load_subset
    from tests.support.hostile_server import Behaviour, HostileServer

    payload = (json.dumps(professional("pro-1")) + "\n" + json.dumps(professional("pro-2")) + "\n").encode()
    published = SUBSETS["professional"]
    assert published.sha256 == "d44b08e6e952e04c945e2c406f02533d9e7a989a84e35820ee7efdff20c9e4e2"
    assert published.hf_revision == "349962fd46dd02343a0d8a606491baf59154ea1a"
    # The real file is not here: the same entry, for this file's sha256.
    monkeypatch.setitem(
        dataset_module.SUBSETS,
        "professional",
        dataclasses.replace(published, sha256=hashlib.sha256(payload).hexdigest()),
    )
    with HostileServer() as files, HostileServer() as mirror:
        files.behaviour = Behaviour(mode="status", status=200, body=payload)
        mirror.behaviour = Behaviour(mode="redirect", location=files.origin + "/blob", redirect_status=302)
        monkeypatch.setenv("HF_ENDPOINT", mirror.origin)
        monkeypatch.setenv("HF_TOKEN", "hf_made_up_token")
        monkeypatch.setenv("HBTUI_DATA_URL", files.origin)  # not used for Hugging Face's files
        dataset = load_subset("professional", tmp_path / "cache")
        (asked,) = mirror.requests
        assert asked["path"] == (
            "/datasets/openai/healthbench-professional/resolve/349962fd46dd02343a0d8a606491baf59154ea1a/"
            "healthbench_professional_eval.jsonl"
        )
        assert asked["headers"]["authorization"] == "Bearer hf_made_up_token"
        assert files.requests and not any("authorization" in r["headers"] for r in files.requests)
    assert [r.prompt_id for r in dataset.records] == ["pro-1", "pro-2"] and dataset.name == "professional"
    assert dataset.records[0].example_tags[0] == "use_case:consult"
    # Once fetched, it is read from the cache: nothing asked again.
    assert load_subset("professional", tmp_path / "cache").sha256 == dataset.sha256


def test_a_professional_file_that_is_not_the_published_one_is_refused(tmp_path, monkeypatch):
    from hbtui.core.dataset import load_subset
    from tests.support.hostile_server import Behaviour, HostileServer

    with HostileServer() as mirror:
        mirror.behaviour = Behaviour(mode="status", status=200, body=json.dumps(professional()).encode() + b"\n")
        monkeypatch.setenv("HF_ENDPOINT", mirror.origin)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        with pytest.raises(DatasetError, match=r"sha256 .* differs from the published d44b08e6"):
            load_subset("professional", tmp_path / "cache")
        assert "authorization" not in mirror.requests[0]["headers"]  # no token set: none sent
    assert not list((tmp_path / "cache").glob("*.jsonl"))


def test_compare_breaks_two_professional_runs_down_by_category(tmp_path, monkeypatch, server, capsys):
    user_folder(tmp_path, monkeypatch, server)
    records = [professional("pro-1"), professional("pro-2", use_case="writing", specialty="cardiology")]
    data = write(tmp_path / "professional.jsonl", *records)
    for name in ("a", "b"):
        assert cli.main(["run", "--data", data, "--name", name]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["compare", "a", "b", "--json"]) == cli.EXIT_OK
    themes = json.loads(capsys.readouterr().out)["themes"]
    assert {"use_case: consult", "use_case: writing", "specialty: ent", "specialty: cardiology"} <= set(themes)
    assert themes["use_case: consult"]["n"] == 1
    assert cli.main(["compare", "a", "b"]) == cli.EXIT_OK
    assert "use_case: writing" in capsys.readouterr().out


def test_compare_leads_with_the_length_adjusted_score_of_two_runs_made_with_one(tmp_path, monkeypatch, server, capsys):
    """Both runs made with --preset professional: B - A of their headline, the length-adjusted
    score, first; over pairs that are every conversation, each side equals the run's own."""
    user_folder(tmp_path, monkeypatch, server)
    data = write(tmp_path / "professional.jsonl", professional("pro-1"), professional("pro-2", use_case="writing"))
    for name, replies in (("a", "short"), ("b", "a reply longer than 2000 characters " * 120)):
        server.control(reply_text=replies)
        assert cli.main(["run", "--data", data, "--preset", "professional", "--name", name]) == cli.EXIT_OK
    assert cli.main(["run", "--data", data, "--name", "plain"]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["compare", "a", "b", "--json"]) == cli.EXIT_OK
    compared = json.loads(capsys.readouterr().out)
    stored = {}
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        for name, report in conn.execute("SELECT name, report_json FROM runs"):
            stored[name] = json.loads(report)["metrics"].get("overall_score_length_adjusted")
    assert stored["plain"] is None  # made without a length adjustment
    adjusted = compared["length_adjusted"]
    assert adjusted["n"] == 2
    assert adjusted["score_a"] == stored["a"]["value"] and adjusted["score_b"] == stored["b"]["value"]
    assert adjusted["score_b"] < compared["score_b"]  # B's long replies pay for their length
    assert cli.main(["compare", "a", "b"]) == cli.EXIT_OK
    text = capsys.readouterr().out
    assert "length-adjusted score A " in text and "(penalty 0.0147 per 500 characters from 2000)" in text
    assert "score before it A " in text
    # The app's comparison says the same, first.
    from hbtui.analysis.compare import compare_runs
    from hbtui.store import Store
    from hbtui.tui.screens.compare import summary_text

    async def on_screen() -> list[str]:
        async with await Store.open(tmp_path / "runs" / "hbtui.sqlite") as store:
            result = await compare_runs(store, await store.resolve_run("a"), await store.resolve_run("b"))
        return str(summary_text(result)).splitlines()

    lines = asyncio.run(on_screen())
    at = next(i for i, line in enumerate(lines) if line.startswith("Length-adjusted A "))
    assert f"A {adjusted['score_a']:.3f}   B {adjusted['score_b']:.3f}" in lines[at]
    assert lines[at + 1].startswith("Before adjustment A ")
    assert all(len(line) <= 80 for line in lines[at : at + 2]), lines[at : at + 2]
    # A run made without one beside one made with one: the plain scores alone, not two measures,
    # and said so.
    assert cli.main(["compare", "plain", "a", "--json"]) == cli.EXIT_OK
    assert "length_adjusted" not in json.loads(capsys.readouterr().out)
    assert cli.main(["compare", "plain", "a"]) == cli.EXIT_OK
    assert "run B alone was made with a length adjustment" in capsys.readouterr().out


def test_completions_physician_grades_each_professional_records_physician_response_as_a_group(
    tmp_path, monkeypatch, server, capsys
):
    """--completions physician grades each task's physician_response in place of a model's reply,
    scored as a group of its own (none of the main subset's three)."""
    user_folder(tmp_path, monkeypatch, server)
    records = [professional("pro-1"), professional("pro-2", physician_response="Amoxicillin 90 mg/kg/day.")]
    data = write(tmp_path / "professional.jsonl", *records)
    server.control(capture_requests=True)
    assert cli.main(["run", "--data", data, "--completions", "physician", "--name", "doc"]) == cli.EXIT_OK
    bodies = server.captured_requests()
    assert bodies and all("response_format" in body for body in bodies)  # no reply asked: grades only
    graded = " ".join(body["messages"][-1]["content"] for body in bodies)
    assert "Amoxicillin 90 mg/kg/day." in graded and records[0]["physician_response"] in graded
    capsys.readouterr()
    assert cli.main(["show", "doc", "--json"]) == cli.EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert list(shown["groups"]) == ["Professional"] and shown["groups"]["Professional"]["conversations"]["scored"] == 2
    assert "HealthBench Professional" in shown["groups"]["Professional"]["description"]


async def test_the_theme_filter_of_a_run_without_themes_says_so(tmp_path, server):
    from hbtui.tui.widgets.key_bar import KeyBar
    from tests.support.browse import open_run
    from tests.support.browser_harness import browser_app
    from tests.support.tui import wait_for

    data = write(tmp_path / "professional.jsonl", professional("pro-1"))
    db = tmp_path / "hbtui.sqlite"
    _, status = await run_engine(settings_for(server, db), data)
    assert status == "finished"
    app = browser_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_run(pilot, 1)
        await pilot.press("t")
        bar = screen.query_one(KeyBar)
        await wait_for(pilot, lambda: "no themes to filter by" in str(bar.render()), what="told there are none")
        assert screen.filter.theme is None
