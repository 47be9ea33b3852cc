"""--preset reference-gpt-5.4: the grader asked as simple-evals at 652c89d asks its GPT-5.4 grader
(--healthbench-use-gpt-5-4-low-grader), proven against the reference's own ResponsesSampler (with
the openai package, as simple-evals runs it) on the project's test server, byte for byte."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import types
from pathlib import Path

import pytest

from hbtui import cli
from hbtui.core import reference
from hbtui.core.fidelity import describe_requests, requests_line
from hbtui.core.settings.config import Settings
from hbtui.core.settings.presets import built_in_presets
from tests.conftest import MAIN_SUBSET, REFERENCE_EVAL, needs_shared, user_folder, write_jsonl
from tests.support.reference_modules import reference_modules

REFERENCE_2026 = REFERENCE_EVAL.parent / "652c89d"
needs_2026 = pytest.mark.skipif(
    not (REFERENCE_2026 / "sampler" / "responses_sampler.py").exists(),
    reason=f"the reference's files at 652c89d are not at {REFERENCE_2026} (../shared absent)",
)
GRADER = "gpt-5.4-2026-03-05"


def preset(**values) -> Settings:
    return Settings(**{**built_in_presets()["reference-gpt-5.4"], "model_grader": GRADER, **values})


def test_the_2026_grader_shape_is_reference_identical_to_652c89d_and_the_2025_one_to_ee3b031():
    record = describe_requests(preset(), "reference", reference.TEMPLATE_SHA256)
    assert record["reference_identical"] is True and record["reference_commit"] == "652c89d"
    assert record["api_grader"] == "responses" and record["temperature_grader"] is None
    assert requests_line(record) == "requests: reference-identical to simple-evals 652c89d"
    # Graded by another model: said beside, as for the 2025 reference.
    other = describe_requests(preset(model_grader="gpt-4.1"), "reference", reference.TEMPLATE_SHA256)
    assert requests_line(other).endswith(f"; graded by gpt-4.1, the published numbers by {GRADER}")
    # One setting of the grader otherwise: neither reference's.
    warmer = describe_requests(preset(temperature_grader=0.5), "reference", reference.TEMPLATE_SHA256)
    assert warmer["reference_identical"] is False and warmer["reference_commit"] is None
    # The model under test as the reference asks it, in both presets.
    as_2025 = Settings(**{**built_in_presets()["reference"], "model_grader": "gpt-4.1-2025-04-14"})
    assert describe_requests(as_2025, "reference", reference.TEMPLATE_SHA256)["reference_commit"] == "ee3b031"


@needs_2026
@needs_shared
def test_every_grade_of_the_preset_is_the_reference_samplers_request_byte_for_byte(
    server, tmp_path, monkeypatch, capsys
):
    """hbtui run --preset reference-gpt-5.4 against the test server; then simple-evals at 652c89d
    grades the same replies with its own grade_sample and ResponsesSampler (the openai package,
    reasoning low) on the same server: the two sets of grader requests are the same bytes, and
    every grade went to /responses."""
    records = [json.loads(line) for line in MAIN_SUBSET.read_text().splitlines()[:3]]
    data = write_jsonl(tmp_path / "three.jsonl", records)
    user_folder(tmp_path, monkeypatch, server, f"MODEL_GRADER={GRADER}\n")
    server.control(capture_requests=True)
    assert cli.main(["run", "--data", str(data), "--preset", "reference-gpt-5.4", "--name", "ref54"]) == cli.EXIT_OK
    ours = [body for body in server.captured_bodies() if '"input"' in body]
    # The replies: through chat completions, as the reference asks its model under test (the
    # run's model check, one token of the grader through chat, aside).
    chats = [json.loads(body) for body in server.captured_bodies() if '"messages"' in body]
    replies_sent = [b for b in chats if b["model"] == "test-model"]
    assert len(replies_sent) == len(records)
    assert len(ours) == sum(len(r["rubrics"]) for r in records)  # every grade through /responses, once each
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        replies = [reply for (reply,) in conn.execute("SELECT reply FROM conversations ORDER BY position")]

    before = len(server.captured_bodies())  # what follows is the reference's
    monkeypatch.setenv("OPENAI_API_KEY", "fake-proj-reference-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    with reference_modules(REFERENCE_2026, "healthbench_eval", "sampler.responses_sampler") as (ref, sampling):
        evaluation = object.__new__(ref.HealthBenchEval)
        evaluation.grader_model = sampling.ResponsesSampler(model=GRADER, reasoning_model=True, reasoning_effort="low")
        evaluation.length_adjustment_center = evaluation.length_adjustment_penalty_per_500_chars = None
        for record, reply in zip(records, replies, strict=True):
            # What the reference grades: the messages its model under test was sent (its system
            # message first), then the reply.
            sent = [{"role": "system", "content": reference.SYSTEM_MESSAGE}, *record["prompt"]]
            items = [ref.RubricItem.from_dict(r) for r in record["rubrics"]]
            evaluation.grade_sample(prompt=sent, response_text=reply, example_tags=[], rubric_items=items)
    theirs = server.captured_bodies()[before:]
    assert sorted(theirs) == sorted(ours)  # the same bytes (hbtui's go out concurrently)
    capsys.readouterr()
    assert cli.main(["show", "ref54", "--json"]) == cli.EXIT_OK
    requests = json.loads(capsys.readouterr().out)["requests"]
    assert requests["reference_identical"] is True and requests["reference_commit"] == "652c89d"


@needs_2026
def test_the_reference_sampler_reads_the_answers_text_as_hbtui_does(server, monkeypatch):
    """The same answer of the test server, read by the reference (the SDK's output_text) and by
    hbtui: the same text, so a verdict hashed from it is the same verdict."""
    from hbtui.client.chat import ChatClient
    from hbtui.client.limiter import AdaptiveLimiter
    from hbtui.client.wire import Endpoint

    messages = [{"role": "user", "content": "What should I do about a mild headache?"}]
    monkeypatch.setenv("OPENAI_API_KEY", "fake-proj-reference-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    with reference_modules(REFERENCE_2026, "sampler.responses_sampler") as (module,):
        theirs = module.ResponsesSampler(model=GRADER, reasoning_model=True, reasoning_effort="low")(messages)

    async def ours():
        client = ChatClient(Endpoint(server.base_url, "fake-key"), limiter=AdaptiveLimiter(1))
        try:
            return await client.complete(GRADER, messages, reasoning_effort="low", api="responses")
        finally:
            await client.aclose()

    assert asyncio.run(ours()).content == theirs.response_text.strip() and theirs.response_text


def test_reference_keeps_its_2025_meaning():
    values = built_in_presets()["reference"]
    assert values["api_grader"] == values["api_test"] == "chat"
    assert values["temperature_grader"] == reference.TEMPERATURE and values["max_tokens_grader"] == reference.MAX_TOKENS


@needs_2026
@needs_shared
def test_a_run_with_the_preset_scores_as_simple_evals_652c89d_on_60_records(server, tmp_path, monkeypatch, capsys):
    """The done-means of the 2026 grader: hbtui run --preset reference-gpt-5.4 --limit 60, and
    simple-evals at 652c89d with its GPT-5.4 grader on the same 60 records and the same replies,
    on the same test server (whose verdicts are hashed from the whole grade prompt): every metric
    equal, and every grade through /responses."""
    user_folder(tmp_path, monkeypatch, server, f"MODEL_GRADER={GRADER}\nCONCURRENCY=32\n")
    server.control(capture_requests=True)
    argv = ["run", "--data", str(MAIN_SUBSET), "--limit", "60", "--preset", "reference-gpt-5.4", "--name", "r60"]
    assert cli.main(argv) == cli.EXIT_OK
    graded = [body for body in server.captured_bodies() if GRADER in body and '"input"' in body]
    capsys.readouterr()
    assert cli.main(["show", "r60", "--json"]) == cli.EXIT_OK
    ours = json.loads(capsys.readouterr().out)["metrics"]
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        replies = dict(conn.execute("SELECT prompt_id, reply FROM conversations"))
    prompt_ids = {
        json.dumps(record["prompt"]): record["prompt_id"]
        for record in (json.loads(line) for line in MAIN_SUBSET.read_text().splitlines())
    }

    class SameReplies:
        """The model under test as the reference's sampler returns it: hbtui's replies."""

        def __call__(self, messages):
            sent = [{"role": "system", "content": reference.SYSTEM_MESSAGE}, *messages]
            reply = replies[prompt_ids[json.dumps(messages)]]
            return types.SimpleNamespace(
                response_text=reply, response_metadata={"usage": None}, actual_queried_message_list=sent
            )

    monkeypatch.setenv("OPENAI_API_KEY", "fake-proj-reference-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    before = len(server.captured_bodies())
    with reference_modules(REFERENCE_2026, "healthbench_eval", "sampler.responses_sampler") as (ref, sampling):
        monkeypatch.setattr(ref, "bf", types.SimpleNamespace(BlobFile=lambda path, mode: open(path, mode)))
        page = types.SimpleNamespace(render=lambda **_: "")
        monkeypatch.setattr(ref.common, "jinja_env", types.SimpleNamespace(from_string=lambda _: page), raising=False)
        grader = sampling.ResponsesSampler(model=GRADER, reasoning_model=True, reasoning_effort="low")
        evaluation = ref.HealthBenchEval(grader_model=grader, num_examples=60, input_path=str(MAIN_SUBSET))
        theirs = evaluation(SameReplies()).metrics
    assert sorted(server.captured_bodies()[before:]) == sorted(graded)  # the same grade requests
    names = [name for name in theirs if ":" not in name or not name.endswith((":n_samples", ":bootstrap_std"))]
    assert "overall_score" in names and len(names) > 10
    for name in names:
        assert ours[name]["value"] == pytest.approx(float(theirs[name]), abs=1e-12), name
        assert ours[name]["n"] == theirs[f"{name}:n_samples"], name


def test_the_professional_preset_is_the_2026_grader_with_the_length_adjustment():
    values = built_in_presets()["professional"]
    assert {k: v for k, v in values.items() if not k.startswith("length_")} == built_in_presets()["reference-gpt-5.4"]
    assert (values["length_penalty"], values["length_centre"]) == (0.0147, 2000.0)


def test_a_saved_preset_named_as_a_built_in_one_is_shadowed_with_a_warning(tmp_path, monkeypatch, server, capsys):
    """A preset saved before hbtui had a built-in of its name (saving one so is refused now)."""
    from hbtui.core.settings.presets import presets_path

    user_folder(tmp_path, monkeypatch, server)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = presets_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"professional": {"model_test": "mine"}}))
    data = write_jsonl(tmp_path / "data.jsonl", [json.loads(line) for line in small_lines()])
    assert cli.main(["run", "--data", str(data), "--preset", "professional", "--name", "shadowed"]) == cli.EXIT_OK
    err = capsys.readouterr().err
    assert "preset professional: the built-in one is used; a preset of yours has its name" in err


def small_lines() -> list[str]:
    from tests.conftest import small_records

    return [json.dumps(record) for record in small_records()]


@needs_2026
def test_a_professional_run_scores_as_simple_evals_652c89d_with_the_length_adjustment(
    server, tmp_path, monkeypatch, capsys
):
    """The done-means of --preset professional: records made in Professional's format, run with
    the preset; simple-evals at 652c89d, with its GPT-5.4 grader and both length settings, on the
    same records in HealthBench's format and the same replies: overall_score and
    overall_score_length_adjusted equal. show reports the length adjustment the run was made
    with, unless told otherwise."""
    from tests.core.test_professional_records import professional, write

    records = [
        professional("pro-1"),
        professional("pro-2", use_case="writing", type="red_teaming"),
        professional("pro-3", difficulty="difficult", specialty="cardiology"),
        professional("pro-4", use_case="research"),
    ]
    data = write(tmp_path / "professional.jsonl", *records)
    user_folder(tmp_path, monkeypatch, server, f"MODEL_GRADER={GRADER}\n")
    assert cli.main(["run", "--data", data, "--preset", "professional", "--name", "pro"]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["show", "pro", "--json"]) == cli.EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    ours = shown["metrics"]
    assert shown["length_adjusted_score"]["penalty_per_500_chars"] == 0.0147  # recorded with the run
    assert shown["length_adjusted_score"]["centre_chars"] == 2000
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        replies = dict(conn.execute("SELECT prompt_id, reply FROM conversations"))
        converted = [json.loads(body) for (body,) in conn.execute("SELECT body FROM records ORDER BY id")]
    healthbench = tmp_path / "as-healthbench.jsonl"  # the records as one would write them in HealthBench's format
    healthbench.write_text("".join(json.dumps({**r, "example_tags": r["example_tags"]}) + "\n" for r in converted))
    prompt_ids = {json.dumps(r["prompt"]): r["prompt_id"] for r in converted}

    class SameReplies:
        def __call__(self, messages):
            sent = [{"role": "system", "content": reference.SYSTEM_MESSAGE}, *messages]
            return types.SimpleNamespace(
                response_text=replies[prompt_ids[json.dumps(messages)]],
                response_metadata={"usage": None},
                actual_queried_message_list=sent,
            )

    monkeypatch.setenv("OPENAI_API_KEY", "fake-proj-reference-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    with reference_modules(REFERENCE_2026, "healthbench_eval", "sampler.responses_sampler") as (ref, sampling):
        monkeypatch.setattr(ref, "bf", types.SimpleNamespace(BlobFile=lambda path, mode: open(path, mode)))
        page = types.SimpleNamespace(render=lambda **_: "")
        monkeypatch.setattr(ref.common, "jinja_env", types.SimpleNamespace(from_string=lambda _: page), raising=False)
        grader = sampling.ResponsesSampler(model=GRADER, reasoning_model=True, reasoning_effort="low")
        evaluation = ref.HealthBenchEval(
            grader_model=grader,
            input_path=str(healthbench),
            length_adjustment_center=2000,
            length_adjustment_penalty_per_500_chars=0.0147,
        )
        theirs = evaluation(SameReplies()).metrics
    for name in ("overall_score", "overall_score_length_adjusted", "use_case:consult", "specialty:cardiology"):
        assert ours[name]["value"] == float(theirs[name]), name  # to the last bit: the reference's arithmetic
        assert ours[name]["n"] == theirs[f"{name}:n_samples"], name
    # The length-adjusted score is the run's headline wherever its score is shown, named as such,
    # and is kept with its report: the runs list reads it from there.
    adjusted = float(theirs["overall_score_length_adjusted"])
    assert adjusted != float(theirs["overall_score"])
    assert shown["headline_metric"] == "overall_score_length_adjusted"
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        stored, folder = conn.execute("SELECT report_json, folder FROM runs").fetchone()
    assert json.loads(stored)["metrics"]["overall_score_length_adjusted"]["value"] == adjusted
    assert list(json.loads(stored)["metrics"])[:2] == ["overall_score", "overall_score_length_adjusted"]
    assert cli.main(["show", "pro"]) == cli.EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if "score" in line and not line.startswith("run "))
    assert lines[first].startswith(f"length-adjusted score {adjusted:.4f}  95% CI"), lines[first]
    assert lines[first + 1].startswith(f"score before the length adjustment {float(theirs['overall_score']):.4f}")
    assert "breakdowns and the histogram are of the scores before it" in lines[first + 2]
    assert list(shown)[:3] == ["schema_version", "run", "headline_metric"]  # said before the figures
    assert cli.main(["runs"]) == cli.EXIT_OK
    listed = capsys.readouterr().out
    assert f"adj {adjusted:.3f}" in listed and "adj: the length-adjusted score, the headline of run 1" in listed
    description = (Path(folder) / "description.md").read_text()
    assert f"## Length-adjusted score: {adjusted:.4f} (95% CI" in description
    assert f"- score before the length adjustment: {float(theirs['overall_score']):.4f}" in description
    # Told otherwise: show's own flag wins over what the run recorded.
    capsys.readouterr()
    assert cli.main(["show", "pro", "--json", "--length-penalty", "0.02"]) == cli.EXIT_OK
    assert json.loads(capsys.readouterr().out)["length_adjusted_score"]["penalty_per_500_chars"] == 0.02


@needs_2026
def test_each_conversations_length_adjustment_is_the_references_to_the_last_bit():
    """The reference's order of operations: penalty * ((characters - centre) / 500). Written as
    penalty * (characters - centre) / 500 the result differs in its last bits for some values."""
    import random

    from hbtui.core.scoring import length_adjusted_score

    draw = random.Random(7)
    with reference_modules(REFERENCE_2026, "healthbench_eval") as (ref,):
        cases = [
            (draw.uniform(-1, 1), draw.randrange(0, 20_000), draw.choice([0.0147, 0.0299, 2.94e-5 * 500]), 2000.0)
            for _ in range(2_000)
        ]
        for score, characters, penalty, centre in cases:
            theirs = ref.calculate_length_adjusted_score(
                score, "x" * characters, center=centre, penalty_per_500_chars=penalty
            )
            assert length_adjusted_score(score, characters, penalty, centre) == theirs, (score, characters, penalty)
