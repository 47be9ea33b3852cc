"""Requests identical to the reference's: proven against simple-evals' own code.

The reference's `healthbench_eval.py` (../shared/reference, MIT) is imported by path, with small
stub modules standing in for its package's siblings and for blobfile and pandas; none of its text
is copied here. Its `grade_sample` renders the grader prompts; a recording grader sampler keeps
them, with the system message its ChatCompletionSampler would put first.
"""

import asyncio
import json
import sqlite3
import types

import pytest

from hbtui import cli
from hbtui.client.chat import ChatClient, ModelQuirks
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import ChatRequest, Endpoint
from hbtui.core import reference
from hbtui.core.dataset import load_jsonl
from hbtui.core.fidelity import describe_requests, requests_line
from hbtui.core.grading import fill_template, graded_conversation, grader_messages, load_template, parse_verdict
from hbtui.core.settings.config import Settings
from hbtui.core.settings.presets import built_in_presets
from hbtui.core.verdict_cache import RequestKeys
from hbtui.store import Store
from tests.conftest import MAIN_SUBSET, REFERENCE_EVAL, needs_shared, settings_for
from tests.support.reference_modules import reference_modules

needs_reference = pytest.mark.skipif(
    not REFERENCE_EVAL.exists(), reason=f"the reference's files are not at {REFERENCE_EVAL.parent} (../shared absent)"
)


@pytest.fixture(scope="module")
def ref():
    """simple-evals' healthbench_eval module, imported by path under stub siblings."""
    with reference_modules(REFERENCE_EVAL.parent, "healthbench_eval") as (module,):
        yield module


class RecordingGrader:
    """The reference's grader sampler as far as requests go: its system message, then the prompt."""

    def __init__(self):
        self.sent = []

    def __call__(self, messages):
        self.sent.append([{"role": "system", "content": reference.SYSTEM_MESSAGE}, *messages])
        return types.SimpleNamespace(response_text='{"explanation": "x", "criteria_met": true}')


def reference_grader_requests(ref, prompt_sent, reply, rubrics):
    """The grader messages the reference sends for one conversation, in rubric order."""
    evaluation = object.__new__(ref.HealthBenchEval)
    evaluation.grader_model = RecordingGrader()
    items = [ref.RubricItem.from_dict(r) for r in rubrics]
    evaluation.grade_sample(prompt=prompt_sent, response_text=reply, example_tags=[], rubric_items=items)
    return evaluation.grader_model.sent


def reference_settings(**values) -> Settings:
    return Settings(
        **{
            **built_in_presets()["reference"],
            "base_url": "http://127.0.0.1:9/v1",
            "model_test": "m",
            "model_grader": "g",
            **values,
        }
    )


@needs_reference
def test_the_cached_file_yields_the_pinned_template_and_a_copy_by_hand_works_offline(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("HBTUI_SIMPLE_EVALS_URL", "http://127.0.0.1:9/nowhere")  # nothing to fetch from
    with pytest.raises(reference.ReferenceUnavailable) as missing:
        reference.reference_template(cache)
    message = str(missing.value)
    assert str(reference.cached_path(cache)) in message and "GRADER_TEMPLATE=builtin" in message and "\n" not in message
    reference.cached_path(cache).parent.mkdir(parents=True, exist_ok=True)
    reference.cached_path(cache).write_bytes(REFERENCE_EVAL.read_bytes())
    text = reference.reference_template(cache)
    assert len(text) == 3181 and text == _evaluated_template()
    reference.cached_path(cache).write_bytes(REFERENCE_EVAL.read_bytes() + b"\n# changed\n")
    with pytest.raises(reference.ReferenceUnavailable, match="is not the pinned file's"):
        reference.reference_template(cache)


def _evaluated_template():
    """GRADER_TEMPLATE as Python itself evaluates the reference file (run here, in the test only)."""
    namespace = {}
    source = REFERENCE_EVAL.read_text()
    start = source.index("GRADER_TEMPLATE = ")
    end = source.index(".strip()", start) + len(".strip()")
    exec(source[start:end], namespace)
    return namespace["GRADER_TEMPLATE"]


@needs_reference
@needs_shared
def test_for_100_real_records_the_grader_requests_are_byte_identical_to_the_references(ref, reference_cache):
    settings = reference_settings(cache_dir=str(reference_cache))
    template = load_template(settings.grader_template, settings.cache_dir)
    keys = RequestKeys(settings, template)  # what the engine sends the model under test, and renders
    records = load_jsonl(MAIN_SUBSET).records[:100]
    compared = 0
    for number, record in enumerate(records):
        reply = f"Reply {number}: see a doctor <<rubric_item>> if it <<conversation>> worsens."
        sent = keys.sent_messages(record.prompt)
        assert sent == [
            {"role": "system", "content": "You are a helpful assistant."},
            *json.loads(record.raw)["prompt"],
        ]
        rubrics = json.loads(record.raw)["rubrics"]
        theirs = reference_grader_requests(ref, sent, reply, rubrics)
        rendered = graded_conversation(sent, reply)
        ours = [
            grader_messages(
                fill_template(template, rendered, r["points"], r["criterion"]), settings.system_message_grader
            )
            for r in rubrics
        ]
        assert json.dumps(ours) == json.dumps(theirs), record.prompt_id
        compared += len(ours)
    assert compared > 1000


@needs_reference
def test_the_request_body_carries_the_references_parameters_and_no_response_format():
    settings = reference_settings()
    client = ChatClient(Endpoint("http://127.0.0.1:9/v1"), limiter=AdaptiveLimiter(1))
    body = client._body(
        ChatRequest(
            "g",
            [{"role": "user", "content": "x"}],
            settings.temperature_grader,
            settings.max_tokens_grader,
            settings.reasoning_grader,
            None,
            0,
        ),
        ModelQuirks(),
    )
    assert body == {
        "model": "g",
        "messages": [{"role": "user", "content": "x"}],
        "temperature": 0.5,
        "max_tokens": 2048,
    }
    asyncio.run(client.aclose())


@needs_reference
@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"explanation": "fenced", "criteria_met": false}\n```',
        '```json{"explanation": "tight", "criteria_met": true}```',
        '{"explanation": "bare", "criteria_met": true}',
        '  ```json\n{"explanation": "spaced", "criteria_met": true}\n```  ',
    ],
)
def test_fenced_answers_parse_as_the_reference_parses_them(ref, text):
    theirs = ref.parse_json_to_dict(text)
    ours = parse_verdict(text)
    assert (
        ours is not None and ours.criteria_met is theirs["criteria_met"] and ours.explanation == theirs["explanation"]
    )


@needs_reference
@needs_shared
def test_a_run_with_the_reference_preset_sends_what_the_reference_sends(ref, server, tmp_path, monkeypatch, capsys):
    """End to end: `hbtui run --preset reference`; the server keeps every request it received."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\nTEMPERATURE_GRADER=0.3\n"
    )  # the preset wins over .env
    monkeypatch.delenv("GRADER_TEMPLATE", raising=False)
    server.control(capture_requests=True)
    assert cli.main(["run", "--preset", "reference", "--data", str(MAIN_SUBSET), "--limit", "5", "--name", "ref"]) == 0
    requests = server.captured_requests()
    generations = [r for r in requests if "criteria_met" not in r["messages"][-1]["content"]]
    graders = [r for r in requests if "criteria_met" in r["messages"][-1]["content"]]
    assert len(generations) == 5 and graders
    for body in requests:
        assert body["temperature"] == 0.5 and body["max_tokens"] == 2048
        assert "response_format" not in body and "reasoning_effort" not in body
        assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    # Each grader request is the one the reference builds from the same reply and rubric.
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        rows = conn.execute(
            "SELECT r.body, c.reply FROM conversations c JOIN records r ON r.id = c.record_id"
        ).fetchall()
    expected = []
    for body, reply in rows:
        record = json.loads(body)
        sent = [{"role": "system", "content": reference.SYSTEM_MESSAGE}, *record["prompt"]]
        expected += [json.dumps(m) for m in reference_grader_requests(ref, sent, reply, record["rubrics"])]
    assert sorted(json.dumps(g["messages"]) for g in graders) == sorted(expected)

    assert cli.main(["show", "ref"]) == 0
    assert "requests: reference-identical; graded by grader-model, the published numbers by" in capsys.readouterr().out
    assert cli.main(["show", "ref", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["requests"]["reference_identical"] is True
    assert shown["requests"]["reference_commit"] == "ee3b031"  # which reference: simple-evals at that commit
    assert shown["requests"]["grader_template"] == {"name": "reference", "sha256": reference.TEMPLATE_SHA256}


def test_what_differs_is_said_in_one_line():
    settings = Settings(temperature_test=0.3, temperature_grader=0.3, grader_template="builtin")
    record = describe_requests(settings, "builtin", "0" * 64)
    line = requests_line(record)
    assert line.startswith("requests: differ from the reference (grader prompt builtin, no system message for the")
    assert "temperature 0.3," in line and "max tokens 2048 for the" not in line
    assert "max tokens 1024 for the grader" in line and "grader asked for json_schema output" in line
    assert record["reference_identical"] is False and record["reference_commit"] is None
    same = describe_requests(reference_settings(), "reference", reference.TEMPLATE_SHA256, ["x refused"])
    assert requests_line(same).startswith("requests: differ from the reference (x refused); graded by g,")
    reference_grader = reference_settings(model_grader="gpt-4.1-2025-04-14")
    assert requests_line(describe_requests(reference_grader, "reference", reference.TEMPLATE_SHA256)) == (
        "requests: reference-identical"
    )
    # The same requests to another grader are said to be just that: not the published numbers' grader.
    assert requests_line(describe_requests(reference_settings(), "reference", reference.TEMPLATE_SHA256)) == (
        "requests: reference-identical; graded by g, the published numbers by gpt-4.1-2025-04-14"
    )


@needs_reference
def test_negotiation_that_changes_a_request_is_recorded_on_the_run(server, tmp_path, small_dataset):
    """Under the preset, a provider that refuses temperature makes the requests differ, and the run says so."""
    from tests.conftest import run_engine

    server.control(reject_params=["temperature"])
    settings = settings_for(server, tmp_path / "db.sqlite", **built_in_presets()["reference"])
    run_id, status = asyncio.run(run_engine(settings, small_dataset))
    assert status == "finished"

    async def read():
        async with await Store.open(tmp_path / "db.sqlite") as store:
            return (await store.get_run(run_id)).requests

    requests = asyncio.run(read())
    assert requests["reference_identical"] is False
    assert any(d.startswith("temperature left out for test-model") for d in requests["deviations"])
    assert "temperature left out" in requests_line(requests)


def test_an_old_run_is_marked_as_graded_with_the_builtin_prompt(tmp_path):
    from hbtui.store import schema

    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:
        for statement in schema.statements(schema.SCHEMA_V1):
            conn.execute(statement)
        for version in (1, 2):
            for statement in schema.statements(schema.MIGRATIONS[version]):
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id={schema.APPLICATION_ID}")
        conn.execute("PRAGMA user_version=3")
        conn.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " ('old', 'finished', 0, 'd', 'x', 'm', 'g', ?, '{}', 0, 0)",
            (json.dumps({"grader_template": None, "temperature_grader": 0.3}),),
        )
        conn.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " ('own', 'finished', 0, 'd', 'x', 'm', 'g', ?, '{}', 0, 0)",
            (json.dumps({"grader_template": "/my/prompt.txt"}),),
        )

    async def read():
        async with await Store.open(db) as store:
            return [(r.name, r.settings["grader_template"]) for r in await store.list_runs()]

    assert sorted(asyncio.run(read())) == [("old", "builtin"), ("own", "/my/prompt.txt")]


@pytest.mark.parametrize(
    "env, flags, says",
    [
        ({"HBTUI_CACHE": "{empty}"}, [], "healthbench_eval.py at commit ee3b0318d8d1 at {empty}/simple-evals/"),
        ({}, ["--preset", "nope"], "--preset nope: no such preset (known: professional, reference, reference-gpt-5.4"),
        ({}, ["--grader-json-schema", "maybe"], "GRADER_JSON_SCHEMA (command line): 'maybe' is not true or false"),
        ({}, ["--grader-template", "{empty}/missing.txt"], "missing.txt: no such file (or give reference or builtin)"),
    ],
)
def test_a_run_that_cannot_have_its_prompt_stops_before_any_call(
    server, tmp_path, monkeypatch, capsys, small_dataset, env, flags, says
):
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HBTUI_SIMPLE_EVALS_URL", "http://127.0.0.1:9/nowhere")
    monkeypatch.delenv("GRADER_TEMPLATE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(empty=empty))
    (tmp_path / ".env").write_text(f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    server.reset_stats()
    argv = ["run", "--data", str(small_dataset), *[f.format(empty=empty) for f in flags]]
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says.format(empty=empty) in err, err
    assert server.stats()["requests"] == 0 and not (tmp_path / "runs").exists()


def test_a_meta_evals_requests_name_only_the_graders_differences_as_a_model_runs_do():
    from hbtui.meta_eval.plan import meta_requests

    settings = reference_settings(temperature_grader=0.2, temperature_test=0.9, reasoning_test="high")
    record = meta_requests(settings, load_template("builtin"))
    # No model under test is called: its settings are no difference, and the grader's are named
    # in the words a model run's description uses.
    assert record["differences"] == ["grader prompt builtin", "temperature 0.2 for the grader"]
    assert not record["reference_identical"] and "temperature_test" not in record
    assert requests_line(record).startswith("requests: differ from the reference")
