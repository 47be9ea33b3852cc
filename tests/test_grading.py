"""Grader prompt and verdict parsing (schema first, then a string-aware balanced-brace fallback)."""

import pytest

from hbtui.grading import (
    TemplateError,
    default_template,
    grader_prompt,
    load_template,
    parse_verdict,
)


def test_default_template_states_the_rules():
    text = default_template().lower()
    for phrase in ["last assistant", "every part", "such as", "negative points", "json object only"]:
        assert phrase in text


def test_prompt_renders_conversation_and_criterion_once():
    prompt = grader_prompt(
        default_template(),
        [{"role": "user", "content": "I feel dizzy <<criterion>>"}],
        "Sit down.",
        -6,
        "Recommends driving",
    )
    assert "user: I feel dizzy <<criterion>>\n\nassistant: Sit down." in prompt
    assert "[-6] Recommends driving" in prompt
    assert "<<conversation>>" not in prompt


@pytest.mark.parametrize("text, met, explanation", [
    ('{"explanation": "ok", "criteria_met": true}', True, "ok"),
    ('```json\n{"explanation": "fenced", "criteria_met": false}\n```', False, "fenced"),
    ('Let me think {about it}. {"explanation": "has } and { inside", "criteria_met": true} done', True,
     "has } and { inside"),
    ('{"explanation": "quote \\" and brace }", "criteria_met": false}', False, 'quote " and brace }'),
    ('{"outer": {"x": 1}} then {"criteria_met": true}', True, ""),
])
def test_parse_fallbacks(text, met, explanation):
    verdict = parse_verdict(text)
    assert verdict is not None and verdict.criteria_met is met and verdict.explanation == explanation


@pytest.mark.parametrize("text", ["I think yes", '{"criteria_met": "true"}', '{"explanation": "x"', ""])
def test_unparseable_is_none_never_not_met(text):
    assert parse_verdict(text) is None


def test_template_without_placeholders_is_refused(tmp_path):
    path = tmp_path / "grader.txt"
    path.write_text("Judge <<conversation>> please")
    with pytest.raises(TemplateError) as error:
        load_template(path)
    assert str(path) in str(error.value) and "<<criterion>>" in str(error.value)
