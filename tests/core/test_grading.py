"""Grader prompt and verdict parsing (schema first, then a string-aware balanced-brace fallback)."""

import pytest

from hbtui.core.grading import (
    TemplateError,
    default_template,
    fill_criterion,
    graded_conversation,
    grader_prompt,
    load_template,
    parse_verdict,
    render_criterion,
    with_conversation,
)


def test_default_template_states_the_rules():
    text = default_template().lower()
    for phrase in ["last assistant", "every part", "such as", "negative points", "json object only"]:
        assert phrase in text


def test_prompt_is_filled_as_the_reference_fills_it_conversation_first():
    # Two chained replacements, the conversation first: a placeholder inside the conversation is
    # then replaced too, exactly as simple-evals' own str.replace chain would treat it.
    prompt = grader_prompt(
        load_template("builtin"),
        [{"role": "user", "content": "I feel dizzy <<criterion>>"}],
        "Sit down.",
        -6,
        "Recommends driving",
    )
    assert "user: I feel dizzy [-6] Recommends driving\n\nassistant: Sit down." in prompt
    assert prompt.count("[-6] Recommends driving") == 2
    assert "<<conversation>>" not in prompt and "<<criterion>>" not in prompt


def test_a_conversation_put_in_once_fills_each_criterion_as_the_chained_replacements_do():
    # The engine puts the conversation in the template once for all its criteria: each prompt is
    # still the reference's two replacements, a reply that holds either slot included.
    template = load_template("builtin")
    rendered = graded_conversation(
        [{"role": "user", "content": "Is <<conversation>> safe?"}], "Yes <<criterion>>, and <<criterion>>."
    )
    criteria = [(5, "Says when to see a doctor"), (-3, "Recommends <<criterion>> twice"), (2.0, "Is brief")]
    filled = with_conversation(template, rendered)
    for points, criterion in criteria:
        expected = template.text.replace("<<conversation>>", rendered).replace(
            "<<criterion>>", render_criterion(points, criterion)
        )
        assert fill_criterion(template, filled, points, criterion) == expected


def test_a_template_file_may_name_the_criterion_slot_as_the_reference_does(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Judge <<conversation>> against <<rubric_item>>.")
    template = load_template(path)
    assert template.name == str(path) and template.criterion_slot == "<<rubric_item>>"
    assert grader_prompt(template, [{"role": "user", "content": "hi"}], "yo", 3, "Greets") == (
        "Judge user: hi\n\nassistant: yo against [3] Greets."
    )
    both = tmp_path / "both.txt"
    both.write_text("<<conversation>> <<rubric_item>> <<criterion>>")
    with pytest.raises(TemplateError, match="only one of them"):
        load_template(both)


@pytest.mark.parametrize(
    "text, met, explanation",
    [
        ('{"explanation": "ok", "criteria_met": true}', True, "ok"),
        ('```json\n{"explanation": "fenced", "criteria_met": false}\n```', False, "fenced"),
        (
            'Let me think {about it}. {"explanation": "has } and { inside", "criteria_met": true} done',
            True,
            "has } and { inside",
        ),
        ('{"explanation": "quote \\" and brace }", "criteria_met": false}', False, 'quote " and brace }'),
        ('{"outer": {"x": 1}} then {"criteria_met": true}', True, ""),
    ],
)
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
