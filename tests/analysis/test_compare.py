"""Comparing two runs: the numbers by hand, the pairing rules, and `hbtui compare` end to end."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from hbtui import cli
from hbtui.analysis.compare import Conversation, Criterion, NothingToCompare, compare, paired_difference
from hbtui.core.verdicts import Kappa, kappa_of
from hbtui.store import RunRow, Store
from tests.cli.test_cli import hbtui
from tests.conftest import (
    CONSENSUS_SUBSET,
    HARD_SUBSET,
    MAIN_SUBSET,
    make_record,
    needs_shared,
    run_engine,
    settings_for,
    write_jsonl,
)

# ---- the numbers, by hand ----------------------------------------------------------------------


def test_paired_bootstrap_is_the_direct_numpy_computation():
    a = [0.2, 0.5, 1.0, -0.3, 0.8]
    b = [0.4, 0.5, 0.9, 0.1, 1.2]
    result = paired_difference(a, b, seed=7)
    # by hand: mean a = 2.2 / 5 = 0.44, mean b = 3.1 / 5 = 0.62, both inside [0, 1]
    assert (result.n, result.score_a, result.score_b) == (5, pytest.approx(0.44), pytest.approx(0.62))
    assert result.value == pytest.approx(0.18)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, 5, size=(1000, 5))  # one set of indices for both runs: the pairs stay pairs
    resampled = np.clip(np.array(b)[picks].mean(axis=1), 0, 1) - np.clip(np.array(a)[picks].mean(axis=1), 0, 1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    assert result.ci95 == (pytest.approx(low, abs=1e-15), pytest.approx(high, abs=1e-15))
    assert low < 0.18 < high


def test_paired_difference_clips_each_mean_before_subtracting():
    # mean a = -0.2 -> 0; mean b = 1.1 -> 1: the difference of clipped means is 1, not 1.3
    result = paired_difference([-0.5, -0.2, 0.1], [1.2, 1.0, 1.1])
    assert (result.score_a, result.score_b, result.value) == (0.0, 1.0, 1.0)
    assert result.ci95[1] <= 1.0


def test_paired_bootstrap_uses_the_runs_seed():
    """Unseeded, two reports of the same runs would differ; seeded as scoring is (seed 0), they agree."""
    values = np.linspace(0, 1, 40)
    first, second = paired_difference(values, values[::-1]), paired_difference(values, values[::-1])
    assert first.ci95 == second.ci95
    rng = np.random.default_rng(0)
    picks = rng.integers(0, 40, size=(1000, 40))
    direct = np.clip(values[::-1][picks].mean(axis=1), 0, 1) - np.clip(values[picks].mean(axis=1), 0, 1)
    assert first.ci95[0] == pytest.approx(np.percentile(direct, 2.5), abs=1e-15)


def test_kappa_of_a_two_by_two_table_by_hand():
    # 20 criteria: both met 8, only A met 2, only B met 3, neither 7.
    verdicts = [(True, True)] * 8 + [(True, False)] * 2 + [(False, True)] * 3 + [(False, False)] * 7
    kappa = kappa_of(verdicts)
    # observed 15/20 = 0.75; A met 10/20 = 0.5, B met 11/20 = 0.55;
    # by chance 0.5 * 0.55 + 0.5 * 0.45 = 0.5; kappa (0.75 - 0.5) / (1 - 0.5) = 0.5
    assert (kappa.n, kappa.observed, kappa.expected) == (20, 0.75, pytest.approx(0.5))
    assert kappa.kappa == pytest.approx(0.5)
    assert kappa.undefined is None


def test_kappa_is_undefined_with_the_reason_where_a_grader_is_constant():
    one_constant = kappa_of([(True, True)] * 10 + [(True, False)] * 5)
    assert one_constant.kappa is None
    assert one_constant.undefined == "grader A gave every criterion met (a constant grader)"
    both = kappa_of([(False, False)] * 4)
    assert both.kappa is None and "grader A gave every criterion not met" in both.undefined
    assert "grader B gave every criterion not met" in both.undefined
    assert kappa_of([]).undefined == "no criterion graded by both"
    assert Kappa(0, 0, 0, 0, 0).as_dict()["kappa"] is None


# ---- pairing ---------------------------------------------------------------------------------


def run_row(run_id: int, dataset: str = "main.jsonl", sha: str = "d" * 64) -> RunRow:
    return RunRow(
        run_id,
        f"run-{run_id}",
        "finished",
        0.0,
        None,
        dataset,
        None,
        sha,
        "m",
        "g",
        {},
        {},
        0,
        0,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
    )


def conversation(
    conv_id: int,
    prompt_id: str,
    line: str,
    verdicts: list[bool | None],
    repeat: int = 0,
    points: list[float] | None = None,
) -> Conversation:
    points = points or [5.0] * len(verdicts)
    criteria = [
        Criterion(i, f"criterion {i}", p, ("axis:accuracy",), "met" if m else "not_met" if m is False else "pending", m)
        for i, (p, m) in enumerate(zip(points, verdicts))
    ]
    return Conversation(
        conv_id,
        conv_id,
        repeat,
        prompt_id,
        hashlib.sha256(line.encode()).hexdigest(),
        "hedging",
        ["theme:hedging"],
        True,
        criteria=criteria,
    )


def test_same_prompt_id_with_another_rubric_does_not_pair():
    main = [conversation(1, "p1", "main line of p1", [True, False])]
    consensus = [conversation(2, "p1", "consensus line of p1", [True, True])]
    with pytest.raises(NothingToCompare, match=r"different datasets .*share no conversation"):
        compare(run_row(1, "main.jsonl", "a" * 64), run_row(2, "consensus.jsonl", "c" * 64), main, consensus)


def test_an_identical_record_pairs_across_files_and_repeats_pair_with_their_own():
    main = [
        conversation(1, "p1", "line of p1", [True, False]),
        conversation(2, "p1", "line of p1", [True, True], 1),
        conversation(3, "p2", "line of p2", [False, False]),
    ]
    hard = [conversation(11, "p1", "line of p1", [True, True]), conversation(12, "p1", "line of p1", [True, True], 1)]
    result = compare(run_row(1, "main.jsonl", "a" * 64), run_row(2, "hard.jsonl", "h" * 64), main, hard)
    assert result.overall.n == 2  # p1 repeat 0 and repeat 1; p2 is not in the hard run
    assert (result.overall.score_a, result.overall.score_b) == (0.75, 1.0)
    assert [(m.prompt_id, m.repeat, m.score_a, m.score_b) for m in result.moved] == [("p1", 0, 0.5, 1.0)]
    assert [(d.conversation_a, d.idx, d.met_a, d.met_b) for d in result.agreement.disagreements] == [
        (1, 1, False, True)
    ]


def test_only_conversations_both_graded_in_full_are_scored_but_every_shared_verdict_counts_for_agreement():
    a = [conversation(1, "p1", "l1", [True, False]), conversation(2, "p2", "l2", [True, None])]
    b = [conversation(3, "p1", "l1", [True, True]), conversation(4, "p2", "l2", [False, True])]
    result = compare(run_row(1), run_row(2), a, b)
    assert result.overall.n == 1
    assert result.agreement.overall.n == 3  # p2's criterion 1 is pending in A


def test_nothing_graded_in_common_and_a_run_with_itself_are_refused():
    a = [conversation(1, "p1", "l1", [None])]
    b = [conversation(2, "p1", "l1", [True])]
    with pytest.raises(NothingToCompare, match="no conversation that both graded in full"):
        compare(run_row(1), run_row(2), a, b)
    with pytest.raises(NothingToCompare, match="compared with itself"):
        compare(run_row(1), run_row(1), b, b)


# ---- end to end: the real engine, the test server, the command ---------------------------------


def template(path: Path, wording: str) -> Path:
    # The test server's verdicts hash the grader prompt: two wordings, two sets of verdicts.
    path.write_text(
        f"{wording}\n\n<<conversation>>\n\nCriterion: <<criterion>>\n\n"
        'Answer with JSON: {"explanation": "...", "criteria_met": true or false}\n',
        encoding="utf-8",
    )
    return path


def unmarked_records(count: int) -> list[dict]:
    themes = ("hedging", "context_seeking", "emergency_referrals")
    return [
        make_record(
            f"q{i}",
            [
                (f"Criterion {i}.{j}", [5, 3, 7, -4, 2][j], [f"axis:{['accuracy', 'completeness'][j % 2]}"])
                for j in range(5)
            ],
            theme=themes[i % 3],
            user=f"Question number {i}?",
        )
        for i in range(count)
    ]


@pytest.fixture
def two_graded_runs(server, tmp_path) -> Path:
    db = tmp_path / "runs" / "hbtui.sqlite"
    data = write_jsonl(tmp_path / "data.jsonl", unmarked_records(12))
    for name, wording in (("first", "You grade replies, strictly."), ("second", "Grade the reply below, leniently.")):
        settings = settings_for(server, db, grader_template=str(template(tmp_path / f"{name}.txt", wording)))
        assert asyncio.run(run_engine(settings, data, name=name))[1] == "finished"
    return db


def compare_json(db: Path, capsys, *refs: str) -> dict:
    assert cli.main(["compare", *refs, "--json", "--db", str(db)]) == 0
    return json.loads(capsys.readouterr().out)


def test_compare_two_runs_with_different_graders(two_graded_runs, capsys):
    db = two_graded_runs
    shown = compare_json(db, capsys, "1", "second")
    with sqlite3.connect(db) as conn:
        scores = dict(conn.execute("SELECT id, score FROM runs"))
        pairs = conn.execute(
            "SELECT a.status, b.status, a.tags FROM verdicts a JOIN conversations ca ON ca.id = a.conversation_id"
            " JOIN conversations cb ON cb.run_id = 2 AND cb.position = ca.position"
            " JOIN verdicts b ON b.conversation_id = cb.id AND b.idx = a.idx WHERE a.run_id = 1"
        ).fetchall()
    assert set(shown) >= {"n", "score_a", "score_b", "difference", "themes", "axes", "moved", "agreement"}
    assert shown["n"] == 12
    # every conversation pairs, so each side's score is its run's own overall score
    assert (shown["score_a"], shown["score_b"]) == (pytest.approx(scores[1]), pytest.approx(scores[2]))
    assert shown["difference"]["value"] == pytest.approx(scores[2] - scores[1])
    low, high = shown["difference"]["ci95"]
    assert low <= shown["difference"]["value"] <= high
    assert set(shown["themes"]) == {"hedging", "context_seeking", "emergency_referrals"}
    assert set(shown["axes"]) == {"accuracy", "completeness"}
    assert sum(t["n"] for t in shown["themes"].values()) == 12
    # agreement, counted here straight from the verdicts table
    verdicts = [(a == "met", b == "met") for a, b, _ in pairs]
    both = sum(1 for x, y in verdicts if x and y)
    neither = sum(1 for x, y in verdicts if not x and not y)
    a_met, b_met = sum(x for x, _ in verdicts) / 60, sum(y for _, y in verdicts) / 60
    observed, expected = (both + neither) / 60, a_met * b_met + (1 - a_met) * (1 - b_met)
    agreement = shown["agreement"]
    assert agreement["criteria"] == 60 and agreement["observed"] == pytest.approx(observed)
    assert agreement["kappa"] == pytest.approx((observed - expected) / (1 - expected))
    assert len(agreement["disagreements"]) == 60 - both - neither > 0
    assert set(agreement["axes"]) == {"accuracy", "completeness"}
    assert shown["moved"] and all(m["difference"] == pytest.approx(m["score_b"] - m["score_a"]) for m in shown["moved"])
    changes = [abs(m["difference"]) for m in shown["moved"]]
    assert changes == sorted(changes, reverse=True)
    # Each names the conversation as the browser numbers it in each run (issue 25, item 10).
    with sqlite3.connect(db) as conn:
        number = dict(conn.execute("SELECT prompt_id, position + 1 FROM conversations WHERE run_id = 1"))
    assert all(
        m["conversation_number_a"] == m["conversation_number_b"] == number[m["prompt_id"]]
        for m in shown["moved"] + agreement["disagreements"]
    )
    assert cli.main(["compare", "1", "second", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    text = out.split("moved most:", 1)[1]
    first = shown["moved"][0]
    assert f"#{first['conversation_number_a']}  {first['prompt_id']}" in text
    disagreement = agreement["disagreements"][0]
    assert f"(#{disagreement['conversation_number_a']}  {disagreement['prompt_id']})" in out.split("moved most:")[0]
    # B against A is the mirror image
    mirrored = compare_json(db, capsys, "2", "1")
    assert mirrored["difference"]["value"] == pytest.approx(-shown["difference"]["value"])


def test_the_stored_scores_give_the_same_overall_themes_and_moves_as_the_verdicts(two_graded_runs):
    """The screen first shows a comparison of the stored scores, then the full one: they agree."""
    from hbtui.analysis.compare import compare_runs, compare_scores
    from hbtui.store import Store

    async def both():
        async with await Store.open(two_graded_runs, create=False) as store:
            a, b = await store.get_run(1), await store.get_run(2)
            return await compare_scores(store, a, b), await compare_runs(store, a, b)

    quick, full = asyncio.run(both())
    assert quick.overall == full.overall and quick.themes == full.themes and quick.moved == full.moved
    assert quick.agreement is None and quick.axes == {} and full.agreement is not None and full.axes


def test_compare_as_text(two_graded_runs, capsys):
    assert cli.main(["compare", "1", "2", "--db", str(two_graded_runs)]) == 0
    out = capsys.readouterr().out
    assert "A  run 1 first" in out and "B  run 2 second" in out
    assert "paired conversations 12" in out and "95% CI" in out
    assert "by theme" in out and "by axis" in out and "grader agreement over 60 criteria" in out


def database_state(db: Path) -> tuple:
    files = sorted(p for p in db.parent.iterdir() if p.name.startswith(db.name))
    return tuple((p.name, hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in files)


@pytest.mark.parametrize(
    "refs, message",
    [
        (("1", "1"), "run 1 compared with itself: give two different runs"),
        (("first", "latest"), "runs 1 and 3 are on different datasets"),
        (("1", "nine"), "no run 'nine'"),
    ],
)
def test_bad_comparisons_are_one_line_and_touch_nothing(two_graded_runs, server, tmp_path, capsys, refs, message):
    db = two_graded_runs
    other = write_jsonl(tmp_path / "other.jsonl", [make_record("elsewhere", [("[[MET]] x", 1, [])])])
    asyncio.run(run_engine(settings_for(server, db), other, name="other"))
    capsys.readouterr()
    before = database_state(db)
    assert cli.main(["compare", *refs, "--db", str(db)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hbtui: error: ") and message in lines[0]
    assert database_state(db) == before


def test_a_missing_database_is_one_line_and_not_created(tmp_path, capsys):
    db = tmp_path / "none.sqlite"
    assert cli.main(["compare", "1", "2", "--db", str(db)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert not db.exists()


@needs_shared
def test_real_records_pair_hard_with_main_and_never_consensus_with_main(server, tmp_path, capsys):
    """HealthBench's hard lines are main lines; consensus shares prompt_ids with other rubrics."""
    main_lines = {json.loads(line)["prompt_id"]: line for line in MAIN_SUBSET.read_text(encoding="utf-8").splitlines()}
    hard = [line for line in HARD_SUBSET.read_text(encoding="utf-8").splitlines()][:2]
    consensus = [
        line
        for line in CONSENSUS_SUBSET.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["prompt_id"] in main_lines
    ][:1]
    ids = [json.loads(line)["prompt_id"] for line in hard + consensus]
    files = {}
    for name, lines in (("main", [main_lines[i] for i in ids]), ("hard", hard), ("consensus", consensus)):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    db = tmp_path / "runs" / "hbtui.sqlite"
    for name in ("main", "hard", "consensus"):
        asyncio.run(run_engine(settings_for(server, db), files[name], name=name))
    capsys.readouterr()
    shown = compare_json(db, capsys, "main", "hard")
    assert shown["n"] == 2 and shown["difference"]["value"] == 0.0  # same replies, same grader: same verdicts
    assert shown["agreement"]["disagreements"] == [] and shown["moved"] == []
    assert cli.main(["compare", "main", "consensus", "--db", str(db)]) == 2
    assert "share no conversation" in capsys.readouterr().err


def test_compare_in_a_real_process(two_graded_runs):
    cwd = two_graded_runs.parent.parent
    result = hbtui("compare", "first", "second", "--json", "--db", str(two_graded_runs), cwd=cwd, check=True)
    assert json.loads(result.stdout)["n"] == 12
    refused = hbtui("compare", "2", "2", "--db", str(two_graded_runs), cwd=cwd)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines() == ["hbtui: error: run 2 compared with itself: give two different runs"]


def test_a_bad_env_value_does_not_keep_a_comparison_from_being_read(two_graded_runs, tmp_path, capsys):
    env = tmp_path / "bad.env"
    env.write_text("CONCURRENCY=abc\n")
    assert cli.main(["compare", "1", "2", "--json", "--db", str(two_graded_runs), "--env-file", str(env)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["n"] == 12 and "CONCURRENCY" in captured.err


def test_a_conversation_listed_apart_in_the_two_runs_is_named_in_each():
    from hbtui.analysis.compare import Moved

    same = Moved("p", 0, None, 0.2, 0.5, 10, 20, position=14, position_b=14)
    apart = Moved("p", 0, None, 0.2, 0.5, 10, 20, position=14, position_b=16)
    assert (same.numbers, apart.numbers) == ("#15", "#15 in A, #17 in B")
    assert (apart.as_dict()["conversation_number_a"], apart.as_dict()["conversation_number_b"]) == (15, 17)
    from hbtui.analysis.compare import Disagreement

    disagreement = Disagreement("p", 0, None, 2, "c", 5.0, True, False, 10, 20, position=14, position_b=16)
    assert disagreement.numbers == "#15 in A, #17 in B"
    assert (disagreement.as_dict()["conversation_number_a"], disagreement.as_dict()["conversation_number_b"]) == (
        15,
        17,
    )


@pytest.fixture
def two_temperatures(server, tmp_path) -> Path:
    """Two runs of one model graded by one grader at temperatures 0.3 and 0.7."""
    db = tmp_path / "runs" / "hbtui.sqlite"
    data = write_jsonl(tmp_path / "data.jsonl", unmarked_records(6))
    for name, temperature in (("cool", 0.3), ("warm", 0.7)):
        settings = settings_for(server, db, temperature_grader=temperature)
        assert asyncio.run(run_engine(settings, data, name=name))[1] == "finished"
    return db


def test_compare_says_which_settings_differ_in_text_json_and_the_app(two_temperatures, capsys):
    """Issue 25, item 4: both sides read 'grader fake-grader' when only the grader's temperature
    differed; description.md knew it, compare did not say it."""
    db = two_temperatures
    shown = compare_json(db, capsys, "cool", "warm")
    assert shown["settings_differ"] == {"temperature_grader": {"a": 0.3, "b": 0.7}}
    assert cli.main(["compare", "cool", "warm", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "settings that differ:" in text
    (line,) = [line for line in text.splitlines() if "TEMPERATURE_GRADER" in line]
    assert "A 0.3" in line and "B 0.7" in line

    async def summary() -> str:
        from hbtui.analysis.compare import compare_runs
        from hbtui.tui.screens.compare import summary_text

        async with await Store.open(db) as store:
            return summary_text(await compare_runs(store, await store.get_run(1), await store.get_run(2))).plain

    assert "TEMPERATURE_GRADER  A 0.3   B 0.7" in asyncio.run(summary())


def test_compare_lists_only_the_setting_that_differs(two_graded_runs, capsys):
    """The grader prompt differs (a file each), and nothing else is listed."""
    shown = compare_json(two_graded_runs, capsys, "1", "second")
    assert list(shown["settings_differ"]) == ["grader_template"]
    assert cli.main(["compare", "1", "second", "--db", str(two_graded_runs)]) == 0
    assert "settings that differ:" in capsys.readouterr().out
