"""`hbtui import` and `hbtui export --format reference`: files written here in the formats of the
single-script harness, simple-evals' allresults and hbtui's own, imported as runs of kind
imported, with real databases and the project's test server where a run or a regrade is made."""

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hbtui import cli
from hbtui.core.scoring import conversation_score
from hbtui.store import Store, schema
from tests.conftest import small_records, user_folder, write_jsonl
from tests.core import test_reference
from tests.support.old_schema import database_at

reference_module = test_reference.ref  # the reference's module under stubs, as that file loads it
needs_reference = test_reference.needs_reference

# Verdicts for small_records(), by prompt_id, in rubric order.
VERDICTS = {"p1": [True, False, True, True], "p2": [True, False], "p3": [False, True]}


@pytest.fixture
def here(tmp_path, monkeypatch, server):
    user_folder(tmp_path, monkeypatch, server)
    write_jsonl(tmp_path / "data.jsonl", small_records())
    return tmp_path


def db_rows(here: Path, sql: str, *args):
    with sqlite3.connect(here / "runs" / "hbtui.sqlite") as conn:
        return conn.execute(sql, args).fetchall()


def expected_score(prompt_ids) -> float:
    """hbtui's per-conversation scoring, clipped mean over the conversations: written out here."""
    points = {r["prompt_id"]: [c["points"] for c in r["rubrics"]] for r in small_records()}
    scores = [conversation_score(points[p], VERDICTS[p]) for p in prompt_ids]
    return float(np.clip(np.mean(scores), 0, 1))


def legacy_folder(root: Path, prompt_ids=("p1", "p2", "p3"), score: str | None = "0.5") -> Path:
    """A run folder as the single-script harness writes it: lines joined by newlines, the last
    without one; a description of `Key: value` lines, Score only once the run finished."""
    records = {r["prompt_id"]: r for r in small_records()}
    folder = root / "test-2025-05-20_10-11-12"
    folder.mkdir()
    lines = [
        json.dumps(
            {
                "prompt": records[p]["prompt"],
                "completion": f"a reply to {p}",
                "rubrics": [
                    {"criteria_met": met, "explanation": f"because {i}", "prompt_id": p, "points": c["points"]}
                    for i, (met, c) in enumerate(zip(VERDICTS[p], records[p]["rubrics"]))
                ],
            }
        )
        for p in prompt_ids
    ]
    (folder / "results.jsonl").write_text("\n".join(lines))
    description = (
        "# TEST RUN DESCRIPTION\n\nDataset: healthbench/small.jsonl\n\nModel Evaluated: old-model\n\n"
        "Model Evaluated Reasoning Effort: None\n\nModel Grader: old-grader\n\n"
        "Model Grader Reasoning Effort: low\n\nTimestamp: 2025-05-20_10-11-12\n"
    )
    (folder / "description.md").write_text(description + (f"\nScore: {score}\n" if score is not None else ""))
    return folder


def allresults_file(root: Path, repeats: int = 1, system: str | None = "You are a helpful assistant.") -> Path:
    """simple-evals' allresults shape: the examples repeated in order, prompts as the sampler sent them."""
    examples = []
    for _ in range(repeats):
        for record in small_records():
            p = record["prompt_id"]
            examples.append(
                {
                    "score": None,
                    "usage": {},
                    "rubric_items": [
                        {**c, "criteria_met": met, "explanation": "x"} for met, c in zip(VERDICTS[p], record["rubrics"])
                    ],
                    "prompt": ([{"role": "system", "content": system}] if system else []) + record["prompt"],
                    "completion": [{"content": f"a reply to {p}", "role": "assistant"}],
                    "prompt_id": p,
                    "completion_id": "c",
                }
            )
    path = root / "healthbench_gpt_allresults.json"
    path.write_text(
        json.dumps(
            {
                "score": 0.1234,
                "metrics": {},
                "htmls": [],
                "convos": [],
                "metadata": {"example_level_metadata": examples},
            },
            indent=2,
        )
    )
    return path


def imported_verdicts(here: Path, run_id: int):
    return db_rows(
        here,
        "SELECT c.prompt_id, c.repeat, v.idx, v.criterion, v.status, v.tags FROM verdicts v"
        " JOIN conversations c ON c.id = v.conversation_id WHERE v.run_id = ? ORDER BY c.position, v.idx",
        run_id,
    )


def test_a_single_script_folder_imports_with_the_criteria_and_tags_of_the_dataset(here, capsys):
    folder = legacy_folder(here)
    assert cli.main(["import", str(folder), "--dataset", "data.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "run 1: imported 3 conversations (single-script harness)" in out
    assert "(the file states 0.5000)" in out
    ((kind, score, model, grader, settings),) = db_rows(
        here, "SELECT kind, score, model_test, model_grader, settings_json FROM runs"
    )
    assert (kind, model, grader) == ("imported", "old-model", "old-grader")
    assert score == pytest.approx(expected_score(["p1", "p2", "p3"]), abs=1e-12)
    assert json.loads(settings)["reasoning_test"] is None and json.loads(settings)["reasoning_grader"] == "low"
    rows = imported_verdicts(here, 1)
    assert rows[0][3] == "[[MET]] Advises rest" and json.loads(rows[0][5]) == ["axis:accuracy", "level:example"]
    assert [r[4] for r in rows] == ["met" if m else "not_met" for p in ("p1", "p2", "p3") for m in VERDICTS[p]]
    assert db_rows(here, "SELECT theme FROM conversations ORDER BY position") == [
        ("hedging",),
        ("context_seeking",),
        ("health_data_tasks",),
    ]
    assert cli.main(["show", "1"]) == 0
    shown = capsys.readouterr().out
    assert "imported from" in shown and "the file's own score: 0.5000, which hbtui's scoring does not give" in shown
    assert cli.main(["runs"]) == 0
    assert "imported (single-script harness)" in capsys.readouterr().out


def test_a_run_cut_short_imports_the_lines_it_holds(here, capsys):
    folder = legacy_folder(here, prompt_ids=("p1", "p2"), score=None)
    assert cli.main(["import", str(folder), "--dataset", "data.jsonl", "--name", "short"]) == 0
    (score,) = db_rows(here, "SELECT score FROM runs WHERE name = 'short'")[0]
    assert score == pytest.approx(expected_score(["p1", "p2"]), abs=1e-12)
    assert cli.main(["show", "short"]) == 0
    assert "states no score: the run was likely cut short" in capsys.readouterr().out


def test_the_single_script_format_needs_the_dataset(here, capsys):
    assert cli.main(["import", str(legacy_folder(here))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give the dataset it ran on with --dataset PATH" in err
    assert "healthbench/small.jsonl" in err


def test_allresults_lose_the_samplers_system_message_and_get_themes_and_repeats(here, capsys):
    path = allresults_file(here, repeats=2)
    assert cli.main(["import", str(path), "--dataset", "data.jsonl"]) == 0
    assert "(the file states 0.1234)" in capsys.readouterr().out
    rows = db_rows(here, "SELECT prompt_id, repeat, theme FROM conversations ORDER BY position")
    assert rows == [
        ("p1", 0, "hedging"),
        ("p2", 0, "context_seeking"),
        ("p3", 0, "health_data_tasks"),
        ("p1", 1, "hedging"),
        ("p2", 1, "context_seeking"),
        ("p3", 1, "health_data_tasks"),
    ]
    ((settings, score),) = db_rows(here, "SELECT settings_json, score FROM runs")
    assert json.loads(settings)["system_message_test"] == "You are a helpful assistant."
    assert score == pytest.approx(expected_score(["p1", "p2", "p3"] * 2), abs=1e-12)
    # Its records are the dataset's own lines: the import pairs with a run of that file.
    assert db_rows(here, "SELECT count(*) FROM records")[0][0] == 3


def test_allresults_without_the_dataset_keep_their_rubrics_and_no_system_message(here):
    assert cli.main(["import", str(allresults_file(here))]) == 0
    (body,) = db_rows(here, "SELECT body FROM records ORDER BY id LIMIT 1")[0]
    assert json.loads(body)["prompt"] == small_records()[0]["prompt"]
    assert db_rows(here, "SELECT DISTINCT example_tags FROM conversations") == [("[]",)]


@needs_reference
def test_an_imported_runs_scores_are_the_references(here, reference_module):
    ref = reference_module
    assert cli.main(["import", str(allresults_file(here))]) == 0
    graded = {  # the file's own verdicts, as the reference would read them
        r["prompt_id"]: [
            (ref.RubricItem(c["criterion"], c["points"], c["tags"]), {"criteria_met": met})
            for c, met in zip(r["rubrics"], VERDICTS[r["prompt_id"]])
        ]
        for r in small_records()
    }
    theirs = {p: ref.calculate_score([i for i, _ in items], [g for _, g in items]) for p, items in graded.items()}
    ours = dict(db_rows(here, "SELECT prompt_id, score FROM conversations"))
    assert ours == pytest.approx(theirs, abs=1e-12)
    (score,) = db_rows(here, "SELECT score FROM runs")[0]
    assert score == pytest.approx(float(np.clip(np.mean(list(theirs.values())), 0, 1)), abs=1e-12)


def test_export_reference_then_import_gives_the_same_scores_and_pairs_in_compare(here, capsys):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "made"]) == 0
    assert cli.main(["export", "made", "--format", "reference", "--out", "made_allresults.json"]) == 0
    document = json.loads((here / "made_allresults.json").read_text())
    assert set(document) == {"score", "metrics", "convos", "metadata"}  # no htmls
    assert {"overall_score", "overall_score:n_samples", "overall_score:bootstrap_std"} <= set(document["metrics"])
    assert cli.main(["import", "made_allresults.json", "--dataset", "data.jsonl", "--name", "back"]) == 0
    capsys.readouterr()
    (made, back) = (db_rows(here, "SELECT score FROM runs WHERE name = ?", n)[0][0] for n in ("made", "back"))
    assert back == pytest.approx(made, abs=1e-12) and document["score"] == pytest.approx(made, abs=1e-12)
    assert cli.main(["compare", "made", "back", "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)
    assert comparison["n"] == 3 and comparison["difference"]["value"] == pytest.approx(0, abs=1e-12)
    assert comparison["run_b"]["kind"] == "imported"
    assert comparison["agreement"]["kappa"] == pytest.approx(1)


def test_an_hbtui_run_folder_and_export_import_as_the_source_run(here, capsys):
    assert cli.main(["run", "--data", "data.jsonl", "--name", "made"]) == 0
    ((folder,),) = db_rows(here, "SELECT folder FROM runs WHERE name = 'made'")
    assert cli.main(["import", folder, "--dataset", "data.jsonl", "--name", "from-folder"]) == 0
    assert cli.main(["export", "made", "--out", "made.jsonl"]) == 0
    assert cli.main(["import", "made.jsonl", "--name", "from-export"]) == 0
    capsys.readouterr()
    source = imported_verdicts(here, 1)
    assert imported_verdicts(here, 2) == source and imported_verdicts(here, 3) == source
    explanations = "SELECT v.explanation FROM verdicts v WHERE run_id = ? ORDER BY conversation_id, idx"
    assert db_rows(here, explanations, 2) == db_rows(here, explanations, 1)
    scores = [db_rows(here, "SELECT score FROM runs WHERE id = ?", i)[0][0] for i in (1, 2, 3)]
    assert scores[1] == pytest.approx(scores[0], abs=1e-12) and scores[2] == pytest.approx(scores[0], abs=1e-12)
    for imported in (2, 3):  # the folder's names are in its description, the export's in its lines
        ((model, grader),) = db_rows(here, "SELECT model_test, model_grader FROM runs WHERE id = ?", imported)
        assert (model, grader) == ("test-model", "grader-model")
    assert cli.main(["show", "from-folder"]) == 0
    assert "the file's own score" in capsys.readouterr().out
    assert cli.main(["show", "from-export"]) == 0
    assert "test-model graded by grader-model" in capsys.readouterr().out


def test_an_imported_run_is_regraded_by_asking_the_grader_and_never_resumed(here, server, capsys):
    assert cli.main(["import", str(legacy_folder(here)), "--dataset", "data.jsonl", "--name", "old"]) == 0
    server.reset_stats()
    # The same grader's name as the file's: its verdicts are the file's, not this grader's answers.
    assert cli.main(["regrade", "old", "--model-grader", "old-grader"]) == 0
    stats = server.stats()
    assert (stats["generation"], stats["grader"]) == (0, 8)
    assert "the replies of run 1 (imported: the replies its file holds) graded again" in capsys.readouterr().out
    assert db_rows(here, "SELECT reply FROM conversations WHERE run_id = 2 ORDER BY position") == db_rows(
        here, "SELECT reply FROM conversations WHERE run_id = 1 ORDER BY position"
    )
    for command in ("resume", "regrade-errors"):
        assert cli.main([command, "old"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "run 1 is imported: hbtui never sent its requests" in err


def _bad_line(here: Path) -> Path:
    folder = legacy_folder(here)
    lines = (folder / "results.jsonl").read_text().split("\n")
    lines[1] = lines[1].replace('"criteria_met": true', '"criteria_met": "yes"', 1)
    (folder / "results.jsonl").write_text("\n".join(lines))
    return folder


def _broken_json(here: Path) -> Path:
    folder = legacy_folder(here)
    lines = (folder / "results.jsonl").read_text().split("\n")
    (folder / "results.jsonl").write_text("\n".join([lines[0], lines[1][:40], lines[2]]))
    return folder


def _allresults_field(here: Path) -> Path:
    path = allresults_file(here)
    document = json.loads(path.read_text())
    del document["metadata"]["example_level_metadata"][2]["completion"]
    path.write_text(json.dumps(document))
    return path


def _other_points(here: Path) -> Path:
    records = small_records()
    records[1]["rubrics"][0]["points"] = 9
    write_jsonl(here / "data.jsonl", records)
    return legacy_folder(here)


def _more_criteria(here: Path) -> Path:
    records = small_records()
    records[2]["rubrics"].append({"criterion": "one more", "points": 2, "tags": []})
    write_jsonl(here / "data.jsonl", records)
    return legacy_folder(here)


def _unknown_prompt(here: Path) -> Path:
    write_jsonl(here / "data.jsonl", small_records()[:2])
    return legacy_folder(here)


def _export_line(here: Path) -> Path:
    path = here / "made.jsonl"
    path.write_text('{"prompt_id": "p1", "repeat": 0}\n')
    return path


def _export_line_scored(score: str) -> Callable[[Path], Path]:
    def make(here: Path) -> Path:
        path = here / "made.jsonl"
        path.write_text('{"prompt_id": "p1", "repeat": 0, "score": SCORE}\n'.replace("SCORE", score))
        return path

    return make


def _allresults_example_scored(here: Path) -> Path:
    path = allresults_file(here)
    document = json.loads(path.read_text())
    document["metadata"]["example_level_metadata"][1]["score"] = "high"
    path.write_text(json.dumps(document))
    return path


def _hbtui_folder_scored(score: str) -> Callable[[Path], Path]:
    def make(here: Path) -> Path:
        folder = here / "20250520-101112-made"
        folder.mkdir()
        assert cli.main(["export", "kept", "--out", str(folder / "results.jsonl")]) == 0
        (folder / "description.md").write_text(f"# Run made\n\n## Score: {score} (95% CI 0.1 to 0.2)\n")
        return folder

    return make


@pytest.mark.parametrize(
    "make, says",
    [
        (_export_line_scored('"high"'), 'made.jsonl:1: score: must be a number (is "high")'),
        (_export_line_scored("true"), "made.jsonl:1: score: must be a number (is true)"),
        (_export_line_scored("NaN"), "made.jsonl:1: score: must be a number (is NaN)"),
        (_export_line_scored("Infinity"), "made.jsonl:1: score: must be a number (is Infinity)"),
        (_allresults_example_scored, 'metadata.example_level_metadata[1].score: must be a number (is "high")'),
        (_hbtui_folder_scored("high"), 'description.md:3: Score: not a number ("high")'),
        (_hbtui_folder_scored("nan"), 'description.md:3: Score: not a number ("nan")'),
        (lambda here: legacy_folder(here, score="inf"), 'description.md:15: Score: not a number ("inf")'),
        (_bad_line, 'results.jsonl:2: rubrics[0].criteria_met: must be true or false (is "yes")'),
        (_broken_json, "results.jsonl:2: invalid JSON at column"),
        (_allresults_field, "allresults.json: metadata.example_level_metadata[2].completion: missing"),
        (
            _other_points,
            "results.jsonl:2: rubrics[0]: differs from criterion 1 of prompt_id 'p2' in --dataset (points)",
        ),
        (_more_criteria, "results.jsonl:3: rubrics: 2 criteria, but prompt_id 'p3' has 3 in --dataset"),
        (_unknown_prompt, "results.jsonl:3: prompt_id 'p3' is not in --dataset data.jsonl"),
        (_export_line, "made.jsonl:1: completion: missing"),
    ],
)
def test_a_bad_import_is_one_line_naming_the_file_line_and_field_and_imports_nothing(here, capsys, make, says):
    assert cli.main(["import", str(allresults_file(here)), "--name", "kept"]) == 0
    capsys.readouterr()
    before = db_rows(here, "SELECT count(*) FROM runs"), db_rows(here, "SELECT count(*) FROM conversations")
    path = make(here)
    assert cli.main(["import", str(path), "--dataset", "data.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hbtui: error: ") and says in err, err
    assert (db_rows(here, "SELECT count(*) FROM runs"), db_rows(here, "SELECT count(*) FROM conversations")) == before


def test_an_import_that_fails_while_it_is_written_leaves_nothing(tmp_path):
    from hbtui.imports import _joined, read_import

    read = read_import(allresults_file(tmp_path))
    planned, _ = _joined(read, None)

    async def go():
        async with await Store.open(tmp_path / "db.sqlite") as store:

            async def broken_report(run_id):
                raise RuntimeError("scoring broke")

            with pytest.raises(RuntimeError):
                await store.import_run(
                    name=None,
                    name_base="x",
                    dataset_name="d",
                    dataset_path=None,
                    dataset_sha256="",
                    model_test="m",
                    model_grader="g",
                    settings={},
                    plan={},
                    conversations=planned,
                    imported={"format": "f"},
                    report_of=broken_report,
                )

    asyncio.run(go())
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("runs", "conversations", "verdicts", "records")
        ]
    assert counts == [0, 0, 0, 0]


def test_runs_made_before_kinds_are_model_runs(tmp_path):
    db = database_at(tmp_path / "old.sqlite", 4)

    async def read():
        async with await Store.open(db) as store:
            return [(r.name, r.kind, r.imported) for r in await store.list_runs()]

    assert asyncio.run(read()) == [("old", "model", None)]
    with sqlite3.connect(db) as conn:  # upgraded, through version 5, to the current schema
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION >= 5


async def test_the_runs_list_shows_an_import_and_continue_refuses_it(tmp_path, monkeypatch, server):
    from hbtui.tui.app import HBTuiApp
    from hbtui.tui.screens.runs import RunsScreen
    from tests.conftest import offline_settings
    from tests.support.tui import screen_text, wait_for

    user_folder(tmp_path, monkeypatch, server)
    assert await asyncio.to_thread(cli.main, ["import", str(allresults_file(tmp_path))]) == 0
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "runs" / "hbtui.sqlite")))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
        assert "finished · imported" in screen_text(app)
        await pilot.press("c")
        await wait_for(
            pilot,
            lambda: any("run 1 is imported: hbtui never sent" in n.message for n in app._notifications),
            what="the refusal",
        )
        assert isinstance(app.screen, RunsScreen) and not app.live_runs and not app.detached_runs
