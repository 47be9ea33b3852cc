"""GRADER_EXPLANATION_CHARS: a bound on a verdict's explanation, sent as maxLength in its
json_schema (llama.cpp's grammar holds the grader to it: the demo's tiny model wrote on to its
budget and was asked again with a larger one). The bound is part of a verdict's cache key, and
the run's requests say they differ from the reference's."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hbtui.core.fidelity import describe_requests, requests_line
from hbtui.core.grading import VERDICT_FORMAT, verdict_format
from hbtui.core.verdict_cache import RequestKeys, request_prefix
from tests.conftest import run_engine, settings_for


def test_the_bound_is_the_explanations_max_length_and_unset_is_the_schema_as_it_was():
    assert verdict_format(None) is VERDICT_FORMAT
    bounded = verdict_format(200)
    assert bounded["json_schema"]["schema"]["properties"]["explanation"] == {"type": "string", "maxLength": 200}
    assert "maxLength" not in VERDICT_FORMAT["json_schema"]["schema"]["properties"]["explanation"]


def test_every_grader_request_carries_the_bound(server, small_dataset, tmp_path):
    server.control(capture_requests=True)
    settings = settings_for(server, tmp_path / "runs.sqlite", grader_explanation_chars=120)
    _, status = asyncio.run(run_engine(settings, small_dataset, name="bounded"))
    assert status == "finished"
    graders = [body for body in server.captured_requests() if "response_format" in body]
    assert graders
    for body in graders:
        assert body["response_format"]["json_schema"]["schema"]["properties"]["explanation"]["maxLength"] == 120


class _Template:
    sha256 = "t" * 64


def test_the_bound_is_in_the_cache_key_and_an_unbounded_key_is_as_it_was(server, tmp_path):
    plain = settings_for(server, tmp_path / "x.sqlite")
    keys = {
        label: RequestKeys(settings, _Template()).prefix("d" * 64, 0).hexdigest()
        for label, settings in (
            ("plain", plain),
            ("bounded", replace(plain, grader_explanation_chars=120)),
            ("other", replace(plain, grader_explanation_chars=121)),
            ("text", replace(plain, grader_json_schema=False, grader_explanation_chars=120)),
        )
    }
    assert len(set(keys.values())) == 4  # each bound its own key, and none the unbounded one's
    without_schema = RequestKeys(replace(plain, grader_json_schema=False), _Template()).prefix("d" * 64, 0)
    assert keys["text"] == without_schema.hexdigest(), "without a schema there is nothing to bound"
    # An unbounded schema's key is the one older versions stored: their verdicts still hit.
    as_before = request_prefix(
        endpoint=",".join(plain.effective_grader_base_url or ()),
        model=plain.model_grader or "",
        template_sha256=_Template.sha256,
        system=plain.system_message_grader,
        conversation="d" * 64,
        temperature=plain.temperature_grader,
        max_tokens=plain.max_tokens_grader,
        reasoning_effort=plain.reasoning_grader,
        json_schema=True,
        repeat=0,
    )
    assert keys["plain"] == as_before.hexdigest()


def test_the_requests_line_says_the_bound(server, tmp_path):
    settings = settings_for(server, tmp_path / "x.sqlite", grader_explanation_chars=120)
    line = requests_line(describe_requests(settings, "builtin", "s" * 64))
    assert "verdict explanations bounded to 120 characters" in line


def test_grader_slots_send_each_conversations_criteria_to_one_llama_slot(server, small_dataset, tmp_path):
    """GRADER_SLOTS (the demo's): id_slot is the conversation's, the same for all its criteria,
    never on a reply's request, and not sent at all unless set."""
    from hbtui.core.dataset import load_jsonl

    server.control(capture_requests=True, latency_ms=20)  # calls overlap: conversations grade side by side
    settings = settings_for(server, tmp_path / "runs.sqlite", grader_slots=2)
    _, status = asyncio.run(run_engine(settings, small_dataset, name="slotted"))
    assert status == "finished"
    bodies = server.captured_requests()
    replies = [body for body in bodies if "response_format" not in body]
    graders = [body for body in bodies if "response_format" in body]
    assert replies and all("id_slot" not in body for body in replies)
    questions = [record.prompt[-1]["content"] for record in load_jsonl(small_dataset).records]
    slots_by_conversation: dict[str, set[int]] = {}
    for body in graders:
        (question,) = [q for q in questions if q in body["messages"][-1]["content"]]
        slots_by_conversation.setdefault(question, set()).add(body["id_slot"])
    assert len(slots_by_conversation) == len(questions) > 1
    assert all(len(slots) == 1 for slots in slots_by_conversation.values())
    assert {slot for slots in slots_by_conversation.values() for slot in slots} <= {0, 1}
    # A slot grades one conversation at a time: its requests come one conversation after another,
    # never taking turns (each turn made llama.cpp process the whole prompt again).
    turns: dict[int, list[str]] = {}
    for body in graders:
        (question,) = [q for q in questions if q in body["messages"][-1]["content"]]
        order = turns.setdefault(body["id_slot"], [])
        if not order or order[-1] != question:
            order.append(question)
    assert all(len(order) == len(set(order)) for order in turns.values()), turns
    assert sum(len(order) for order in turns.values()) == len(questions)
    server.control(capture_requests=False)
    server.reset_stats()


def test_no_id_slot_unless_grader_slots_is_set(server, small_dataset, tmp_path):
    server.control(capture_requests=True)
    _, status = asyncio.run(run_engine(settings_for(server, tmp_path / "r.sqlite"), small_dataset, name="plain"))
    assert status == "finished" and all("id_slot" not in body for body in server.captured_requests())
