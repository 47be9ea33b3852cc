"""Worst-at-k, the length-adjusted score, tokens and cost: each number checked against one
computed another way in the test (every subset enumerated, the arithmetic done by hand)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from hbtui.analysis.run_stats import complete_groups, length_adjusted, worst_at_k
from hbtui.cli import main
from hbtui.core import scoring
from hbtui.core.settings.config import Settings
from hbtui.core.settings.loading import load_settings
from hbtui.core.settings.prices import Price, PriceError, load_prices, model_usage, total_cost
from tests.conftest import REFERENCE_EVAL, make_record, run_engine, settings_for, write_jsonl

# Scores of 4 prompts over 3 repeats, unclipped (HealthBench scores go below 0).
TABLE = [
    [0.9, 0.2, 0.5],
    [-0.4, 1.0, 0.6],
    [0.3, 0.3, 0.3],
    [1.0, 0.75, -0.1],
]


def brute_force_worst_at_k(table: list[list[float]], k: int) -> float:
    per_prompt = []
    for scores in table:
        subsets = list(combinations(scores, k))
        per_prompt.append(sum(min(s) for s in subsets) / len(subsets))
    return min(1.0, max(0.0, sum(per_prompt) / len(per_prompt)))


def test_worst_at_k_is_the_mean_over_every_subset_of_its_minimum():
    result = worst_at_k(TABLE, 3)
    assert result is not None and result.n_prompts == 4 and [k for k, _ in result.by_k()] == [1, 2, 3]
    for k, score in result.by_k():
        assert score == pytest.approx(brute_force_worst_at_k(TABLE, k), abs=1e-12)
    # By hand, k = 3 is the mean of each prompt's minimum: (0.2 - 0.4 + 0.3 - 0.1) / 4.
    assert result.scores[2] == pytest.approx(0.0)
    assert result.scores[0] == pytest.approx(np.mean(TABLE))


def test_worst_at_k_of_five_repeats_with_ties_and_its_clip():
    table = [[0.5, -0.5, 0.5, 0.25, -1.0], [0.0, 0.0, 1.0, -0.75, 0.5]]
    result = worst_at_k(table, 5)
    assert result is not None and result.repeats == 5
    for k, score in result.by_k():
        assert score == pytest.approx(brute_force_worst_at_k(table, k), abs=1e-12)
    assert result.scores[4] == 0.0  # the mean of the minima is -0.875: clipped like every metric


def test_worst_at_k_needs_repeats_and_complete_prompts():
    assert worst_at_k(TABLE, 1) is None
    empty = worst_at_k([], 3)
    assert empty is not None and empty.as_json() == {"1": None, "2": None, "3": None, "n_prompts": 0}
    # (position, repeat, score) of 3 records x 2 repeats; record 2 lacks a score in repeat 1.
    outcomes = [(0, 0, 0.5), (1, 0, 0.1), (2, 0, 0.9), (3, 1, 0.7), (4, 1, None), (5, 1, 0.3)]
    assert complete_groups(outcomes, 2) == [[0.5, 0.7], [0.9, 0.3]]


def test_length_adjusted_scores_by_hand():
    # penalty 0.03 per 500 characters, centre 2000: a 3,000-character reply loses 0.06, a
    # 1,000-character one gains 0.06, one of 2,000 keeps its score.
    assert length_adjusted([(0.5, 3000), (0.2, 1000), (0.7, 2000)], 0.03, 2000) == pytest.approx([0.44, 0.26, 0.7])


def test_cost_arithmetic():
    prices = {"gpt-4.1-2025-04-14": Price(input=2.0, output=8.0)}
    usage = model_usage("gpt-4.1-2025-04-14", 1_500_000, 250_000, prices)
    assert usage.cost == pytest.approx(1.5 * 2.0 + 0.25 * 8.0)  # 5.0
    unpriced = model_usage("local-model", 10, 10, prices)
    assert unpriced.cost is None
    assert total_cost([usage, unpriced]) is None  # a partial sum would read as the whole
    assert total_cost([usage, usage]) == pytest.approx(10.0)


@pytest.mark.parametrize(
    "text, named",
    [
        ('{"m": {"input": 1, "output": 2}', "prices.json:1:32: not valid JSON"),
        ('{\n  "m": {"input": 1,, "output": 2}\n}', "prices.json:2:20: not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"m": 3}', "'m': must be an object"),
        ('{"m": {"input": 1}}', "'m'.output is missing"),
        ('{"m": {"input": -1, "output": 2}}', "'m'.input: -1 is not a price"),
        ('{"m": {"input": "2", "output": 2}}', "'m'.input: '2' is not a price"),
        ('{"m": {"input": true, "output": 2}}', "'m'.input: True is not a price"),
        ('{"m": {"input": 1, "output": NaN}}', "'m'.output: nan is not a price"),
    ],
)
def test_a_bad_price_table_is_named_with_its_line_or_key(tmp_path, text, named):
    path = tmp_path / "prices.json"
    path.write_text(text)
    with pytest.raises(PriceError) as caught:
        load_prices(path)
    assert str(caught.value).startswith(str(path)) and named in str(caught.value)


def test_no_price_table_is_an_empty_one(tmp_path):
    assert load_prices(tmp_path / "prices.json") == {}


# ---- end to end: the engine against the test server, then `show` -----------------------------


@pytest.fixture
def repeated_run(server, tmp_path, monkeypatch):
    """Four prompts run 3 times; replies differ between repeats (numbered), so do verdicts."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    server.control(numbered_replies=True)
    records = [
        make_record(
            f"p{i}",
            [(f"Criterion {i}.{j}", points, ["axis:accuracy"]) for j, points in enumerate((5, 3, 4, -4, -2))],
            user=f"Question {i}?",
        )
        for i in range(4)
    ]
    data = write_jsonl(tmp_path / "four.jsonl", records)
    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db)
    run_id, status = asyncio.run(run_engine(settings, data, repeats=3, name="thrice"))
    assert status == "finished"
    return db, run_id


def show_json(capsys, db: Path, *flags: str) -> dict:
    capsys.readouterr()
    assert main(["show", "thrice", "--json", "--db", str(db), "--env-file", os.devnull, *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_repeats_report_worst_at_k_computed_from_the_stored_scores(repeated_run, capsys):
    db, run_id = repeated_run
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT prompt_id, score FROM conversations WHERE run_id = ? ORDER BY position", (run_id,)
        ).fetchall()
    by_prompt: dict[str, list[float]] = {}
    for prompt_id, score in rows:
        by_prompt.setdefault(prompt_id, []).append(score)
    table = list(by_prompt.values())
    assert any(len(set(scores)) > 1 for scores in table)  # repeats that differ: k matters

    shown = show_json(capsys, db)
    worst = shown["worst_at_k"]
    assert worst["n_prompts"] == 4
    for k in (1, 2, 3):
        assert worst[str(k)] == pytest.approx(brute_force_worst_at_k(table, k), abs=1e-12)
    assert worst["1"] >= worst["2"] >= worst["3"]

    capsys.readouterr()
    assert main(["show", "thrice", "--db", str(db), "--env-file", os.devnull]) == 0
    text = capsys.readouterr().out
    assert "worst-at-k over 3 repeats (4 prompts with every repeat scored)" in text
    assert f"score  {worst['1']:.3f}  {worst['2']:.3f}  {worst['3']:.3f}" in text


def test_length_adjusted_score_of_a_run_by_hand(repeated_run, capsys):
    db, run_id = repeated_run
    assert "length_adjusted_score" not in show_json(capsys, db)  # off unless set
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT score, reply FROM conversations WHERE run_id = ? AND score IS NOT NULL ORDER BY position", (run_id,)
        ).fetchall()
    assert len({len(reply) for _, reply in rows}) > 1
    expected = [score - 0.0299 * (len(reply) - 100) / 500 for score, reply in rows]

    shown = show_json(capsys, db, "--length-penalty", "main", "--length-centre", "100")
    adjusted = shown["length_adjusted_score"]
    reference = scoring.metric(expected)
    assert adjusted["value"] == pytest.approx(min(1.0, max(0.0, sum(expected) / len(expected))))
    assert adjusted["ci95"] == pytest.approx(list(reference.ci95)) and adjusted["n"] == 12
    assert adjusted["penalty_per_500_chars"] == 0.0299 and adjusted["centre_chars"] == 100

    capsys.readouterr()
    assert (
        main(
            [
                "show",
                "thrice",
                "--db",
                str(db),
                "--env-file",
                os.devnull,
                "--length-penalty",
                "0.0299",
                "--length-centre",
                "100",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert f"length-adjusted score {adjusted['value']:.4f}" in text
    assert (
        "penalty 0.0299 (main, MedARC-AI/medmarks #132's value; simple-evals ships none) per 500 characters from 100"
        in text
    )


REFERENCE_2026 = REFERENCE_EVAL.parent / "652c89d"


@pytest.mark.skipif(not (REFERENCE_2026 / "healthbench_eval.py").exists(), reason="../shared/reference/652c89d absent")
def test_overall_score_length_adjusted_is_the_references_of_652c89d(repeated_run, capsys):
    """`show --json`'s metrics carry simple-evals' overall_score_length_adjusted (652c89d) when a
    penalty is set: each conversation's score adjusted by the reference's own function, then the
    reference's clipped mean and count; absent otherwise."""
    from tests.support.reference_modules import reference_modules

    db, run_id = repeated_run
    assert "overall_score_length_adjusted" not in show_json(capsys, db)["metrics"]
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT score, reply FROM conversations WHERE run_id = ? AND score IS NOT NULL ORDER BY position", (run_id,)
        ).fetchall()
    with reference_modules(REFERENCE_2026, "healthbench_eval") as (ref,):
        adjusted = [
            ref.calculate_length_adjusted_score(score, reply, center=100, penalty_per_500_chars=0.0299)
            for score, reply in rows
        ]
        mean, n = (ref._compute_clipped_stats(adjusted, stat) for stat in ("mean", "n_samples"))
    shown = show_json(capsys, db, "--length-penalty", "main", "--length-centre", "100")
    metrics = shown["metrics"]
    assert list(metrics)[:2] == ["overall_score", "overall_score_length_adjusted"]
    metric = metrics["overall_score_length_adjusted"]
    assert metric["value"] == pytest.approx(float(mean), abs=1e-12) and metric["n"] == n == 12
    assert 0 < metric["bootstrap_std"] and metric["ci95"][0] <= metric["value"] <= metric["ci95"][1]
    assert metric == {k: v for k, v in shown["length_adjusted_score"].items() if k in metric}  # one computation


def test_tokens_and_cost_of_a_run(repeated_run, capsys, tmp_path):
    db, run_id = repeated_run
    with sqlite3.connect(db) as conn:
        test_in, test_out = conn.execute(
            "SELECT sum(prompt_tokens), sum(completion_tokens) FROM conversations WHERE run_id = ?", (run_id,)
        ).fetchone()
        grader_in, grader_out = conn.execute(
            "SELECT sum(prompt_tokens), sum(completion_tokens) FROM verdicts WHERE run_id = ?", (run_id,)
        ).fetchone()
    assert min(test_in, test_out, grader_in, grader_out) > 0
    shown = show_json(capsys, db)  # no price table yet: tokens only
    assert shown["tokens"]["test"] == {
        "model": "test-model",
        "input_tokens": test_in,
        "output_tokens": test_out,
        "cost": None,
    }
    assert shown["tokens"]["grader"]["input_tokens"] == grader_in
    assert shown["cost"] == {"test": None, "grader": None, "total": None}

    prices = tmp_path / "config" / "hbtui" / "prices.json"
    prices.parent.mkdir(parents=True)
    prices.write_text(json.dumps({"grader-model": {"input": 2.0, "output": 8.0}}))
    shown = show_json(capsys, db)
    grader_cost = (grader_in * 2.0 + grader_out * 8.0) / 1e6
    assert shown["cost"] == {"test": None, "grader": pytest.approx(grader_cost), "total": None}

    prices.write_text(
        json.dumps({"grader-model": {"input": 2.0, "output": 8.0}, "test-model": {"input": 0.5, "output": 1.5}})
    )
    shown = show_json(capsys, db)
    test_cost = (test_in * 0.5 + test_out * 1.5) / 1e6
    assert shown["cost"]["total"] == pytest.approx(test_cost + grader_cost)
    capsys.readouterr()
    assert main(["show", "thrice", "--db", str(db), "--env-file", os.devnull]) == 0
    text = capsys.readouterr().out
    assert "model under test test-model: " in text and f"cost    {test_cost + grader_cost:.4f} in all" in text


def test_description_md_has_the_statistics_of_the_run(server, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    server.control(numbered_replies=True)
    data = write_jsonl(
        tmp_path / "one.jsonl", [make_record("only", [("Criterion", 5, ["axis:accuracy"]), ("Other", 5, [])])]
    )
    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db, length_penalty=0.0392, length_centre=10.0)
    run_id, _ = asyncio.run(run_engine(settings, data, repeats=2, name="described"))
    with sqlite3.connect(db) as conn:
        folder = conn.execute("SELECT folder FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    text = (Path(folder) / "description.md").read_text()
    assert "### Worst-at-k over 2 repeats (1 prompts with every repeat scored)" in text
    assert "| k | 1 | 2 |" in text
    # Made with a length adjustment: its length-adjusted score is the description's headline.
    assert "## Length-adjusted score: " in text and "penalty 0.0392 (hard, MedARC-AI" in text
    assert "- score before the length adjustment: " in text and "## Score:" not in text
    assert "- tokens of the model under test: " in text and "(no price)" in text


def test_reply_length_counts_every_character_a_nul_too(repeated_run):
    db, run_id = repeated_run
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE conversations SET reply = ? WHERE run_id = ? AND position = 0", ("ab\x00cd", run_id))

    async def lengths():
        from hbtui.store import Store

        async with await Store.open(db) as store:
            return await store.scored_reply_lengths(run_id)

    assert asyncio.run(lengths())[0][1] == 5


@pytest.mark.parametrize(
    "raw, penalty",
    [("main", 0.0299), ("HARD", 0.0392), ("consensus", 0.002), ("0.05", 0.05), ("off", None), ("", None), ("0", 0.0)],
)
def test_length_penalty_names_and_numbers(tmp_path, raw, penalty):
    env = tmp_path / ".env"
    env.write_text(f"LENGTH_PENALTY={raw}\nLENGTH_CENTRE=hard\n")
    settings = load_settings(env, environ={})
    assert settings.length_penalty == penalty and settings.length_centre == 2000.0
    assert Settings(length_penalty=0.1).with_overrides(length_penalty="off").length_penalty is None
