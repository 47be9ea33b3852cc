"""`hbtui estimate`: a run's calls, tokens, cost and time before it starts, without a call.

Against the project's test server (which counts a request's characters / 4 + 1 as its prompt
tokens) and a real SQLite file: an earlier run of the same models calibrates the estimate, which
must then give the tokens the server counted for the same records."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from hbtui import cli
from tests.conftest import make_record, user_folder, write_jsonl


def records(count: int, criteria: int = 3) -> list[dict]:
    return [
        make_record(
            f"p{i}",
            [(f"[[MET]] criterion {i}.{k} " + "words " * (i + k), k + 1, ["axis:accuracy"]) for k in range(criteria)],
            user="I have had a headache for three days, what should I do? " * (1 + i % 4),
        )
        for i in range(count)
    ]


def estimate_json(capsys, *flags: str) -> dict:
    capsys.readouterr()
    assert cli.main(["estimate", *flags, "--json"]) == cli.EXIT_OK
    return json.loads(capsys.readouterr().out)


def prices(tmp_path, table: dict) -> None:
    folder = tmp_path / "config" / "hbtui"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prices.json").write_text(json.dumps(table))
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # own_config_home restores it


def test_an_estimate_calls_no_model_and_writes_no_database(server, tmp_path, monkeypatch, capsys):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(6))
    server.reset_stats()
    assert cli.main(["estimate", "--data", str(data), "--repeats", "2"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert server.stats()["requests"] == 0
    assert not (tmp_path / "runs").exists()
    assert "estimate of hbtui run: 6 conversations of data.jsonl x 2 repeats = 12" in out
    assert "an estimate, not a bill" in out
    lines = out.splitlines()
    test_line = next(line for line in lines if line.startswith("test "))
    grader_line = next(line for line in lines if line.startswith("grader "))
    # A reply each; a verdict a criterion.
    assert test_line.split()[1:3] == ["test-model", "12"] and grader_line.split()[1:3] == ["grader-model", "36"]
    assert all(len(line) <= 80 for line in lines[:5]), lines[:5]
    assert "uncalibrated, 4 characters a token (3.5-4.5 in common tokenizers)" in out
    assert "replies' length unknown (no earlier run of test-model)" in out
    assert "cost of the grader: unknown: grader-model has no price in prices.json" in out
    assert "time: unknown" in out and "--latency" in out


def test_the_calls_are_the_runs_exactly_repeats_and_the_records_own_completions_too(
    server, tmp_path, monkeypatch, capsys
):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(10, criteria=4))
    shown = estimate_json(capsys, "--data", str(data), "--limit", "7", "--repeats", "3")
    assert shown["conversations"] == 21
    assert (shown["test"]["calls"], shown["grader"]["calls"]) == (21, 84)
    # Run it: the store holds as many conversations and verdicts as were estimated.
    assert cli.main(["run", "--data", str(data), "--limit", "7", "--repeats", "3"]) == cli.EXIT_OK
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        counted = conn.execute("SELECT count(*), (SELECT count(*) FROM verdicts) FROM conversations").fetchone()
    assert counted == (21, 84)


def test_an_earlier_run_calibrates_the_tokens_to_what_the_endpoint_counted(server, tmp_path, monkeypatch, capsys):
    """After a run of the same models, the estimate of the same records gives the input tokens
    the server counted (calibrated by that run), its output tokens, its replies' length (in the
    grader's input), and a time from its latency."""
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(12))
    before = estimate_json(capsys, "--data", str(data))
    assert before["test"]["output_tokens"] is None and before["grader"]["output_tokens"] is None
    assert before["time_seconds"] is None
    server.control(latency_ms=40)
    assert cli.main(["run", "--data", str(data)]) == cli.EXIT_OK
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        test_in, test_out = conn.execute(
            "SELECT sum(prompt_tokens), sum(completion_tokens) FROM conversations"
        ).fetchone()
        grader_in, grader_out = conn.execute(
            "SELECT sum(prompt_tokens), sum(completion_tokens) FROM verdicts"
        ).fetchone()
    after = estimate_json(capsys, "--data", str(data))
    assert after["test"]["earlier_runs"] == after["grader"]["earlier_runs"] == 1
    assert after["test"]["input_tokens"]["value"] == pytest.approx(test_in, rel=1e-9)
    assert after["test"]["output_tokens"]["value"] == pytest.approx(test_out, rel=1e-9)
    assert after["grader"]["output_tokens"]["value"] == pytest.approx(grader_out, rel=1e-9)
    # The grader's input reads each reply at the earlier replies' mean length: close, not exact.
    assert after["grader"]["input_tokens"]["value"] == pytest.approx(grader_in, rel=0.02)
    # Before, the replies' length unknown: each counted at its limit (an upper estimate), the range
    # from empty replies, which held what the server counted.
    assert before["grader"]["replies_known"] is False and after["grader"]["replies_known"] is True
    assert before["grader"]["input_tokens"]["low"] <= grader_in <= before["grader"]["input_tokens"]["high"]
    assert before["grader"]["input_tokens"]["value"] >= grader_in
    assert after["time_seconds"] is not None and "median of 1 earlier run" in after["time_bound"]
    capsys.readouterr()
    assert cli.main(["estimate", "--data", str(data)]) == cli.EXIT_OK
    assert "calibrated by one earlier run of the model (12 calls; factor" in capsys.readouterr().out
    # A token limit asked now caps what earlier runs took a call.
    capped = estimate_json(capsys, "--data", str(data), "--max-tokens-test", "1")
    assert capped["test"]["output_tokens"]["value"] == 12


def test_costs_at_the_online_and_the_batch_price_and_never_a_guessed_discount(server, tmp_path, monkeypatch, capsys):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(5))
    assert cli.main(["run", "--data", str(data)]) == cli.EXIT_OK  # outputs known from here on
    prices(
        tmp_path,
        {
            "test-model": {"input": 1.0, "output": 2.0, "batch_input": 0.5, "batch_output": 1.0},
            "grader-model": {"input": 4.0, "output": 8.0},
        },
    )
    shown = estimate_json(capsys, "--data", str(data))
    test, grader = shown["test"], shown["grader"]
    tokens_in, tokens_out = test["input_tokens"]["value"], test["output_tokens"]["value"]
    assert test["cost"]["value"] == pytest.approx((tokens_in * 1.0 + tokens_out * 2.0) / 1e6)
    assert test["batch_cost"]["value"] == pytest.approx((tokens_in * 0.5 + tokens_out * 1.0) / 1e6)
    assert grader["cost"]["value"] == pytest.approx(
        (grader["input_tokens"]["value"] * 4.0 + grader["output_tokens"]["value"] * 8.0) / 1e6
    )
    assert grader["batch_cost"] is None and shown["batch_cost"] is None  # the grader has no batch price
    assert shown["cost"]["value"] == pytest.approx(test["cost"]["value"] + grader["cost"]["value"])
    capsys.readouterr()
    assert cli.main(["estimate", "--data", str(data)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "cost of the grader: " in out and "batch price unknown (no batch_input and batch_output for it)" in out
    assert "by batch" in next(line for line in out.splitlines() if line.startswith("cost of the model under test"))


def test_an_unknown_output_is_a_range_up_to_every_call_at_its_limit(server, tmp_path, monkeypatch, capsys):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(4))
    prices(tmp_path, {"test-model": {"input": 1, "output": 1}, "grader-model": {"input": 1, "output": 1}})
    shown = estimate_json(capsys, "--data", str(data), "--max-tokens-test", "100", "--max-tokens-grader", "50")
    assert shown["test"]["output_tokens"] is None
    assert shown["test"]["output_tokens_at_most"] == 400 and shown["grader"]["output_tokens_at_most"] == 600
    low, high = shown["cost"]["low"], shown["cost"]["high"]
    inputs = shown["test"]["input_tokens"], shown["grader"]["input_tokens"]
    assert low == pytest.approx((inputs[0]["low"] + inputs[1]["low"]) / 1e6)
    assert high == pytest.approx((inputs[0]["high"] + inputs[1]["high"] + 1000) / 1e6)
    capsys.readouterr()
    assert cli.main(["estimate", "--data", str(data), "--max-tokens-test", "100"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "(a range: see the notes) online" in out
    assert "counts each at its limit (MAX_TOKENS_TEST 100), an upper estimate" in out


def test_the_time_is_the_slowest_of_concurrency_and_the_endpoints_limits(server, tmp_path, monkeypatch, capsys):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(10, criteria=2))  # 10 replies, 20 verdicts
    at_latency = estimate_json(capsys, "--data", str(data), "--latency", "3", "--concurrency", "5")
    # One set of endpoints for both: (10 x 3 s + 20 x 3 s) / 5 in flight.
    assert at_latency["time_seconds"] == pytest.approx(18.0)
    limited = estimate_json(capsys, "--data", str(data), "--latency", "3", "--concurrency", "5", "--rpm", "6")
    assert limited["time_seconds"] == pytest.approx(300.0)  # 30 calls at 6 a minute
    assert "30 calls at RPM 6" in limited["time_bound"]
    # Through the batch API neither bounds it: the provider's windows do, and no figure is made up.
    by_batch = estimate_json(capsys, "--data", str(data), "--latency", "3", "--batch")
    assert by_batch["time_seconds"] is None and by_batch["time_bound"].startswith("at most 48 h through the batch API")
    assert cli.main(["estimate", "--data", str(data), "--batch"]) == cli.EXIT_OK
    assert "the batch price is the one it pays" in capsys.readouterr().out


def test_the_completions_of_the_records_cost_no_model_under_test(server, tmp_path, monkeypatch, capsys):
    from tests.conftest import MAIN_SUBSET, needs_shared

    if not MAIN_SUBSET.exists():
        pytest.skip(needs_shared.kwargs["reason"])
    user_folder(tmp_path, monkeypatch, server)
    shown = estimate_json(capsys, "--data", str(MAIN_SUBSET), "--completions", "physician", "--limit", "5")
    assert shown["test"] is None
    assert shown["conversations"] > 0 and shown["grader"]["calls"] > shown["conversations"]
    by_batch = estimate_json(capsys, "--data", str(MAIN_SUBSET), "--completions", "physician", "--batch")
    assert by_batch["time_bound"].startswith("at most 24 h through the batch API: the grading")
    assert cli.main(["run", "--data", str(MAIN_SUBSET), "--completions", "physician", "--limit", "5"]) in (
        cli.EXIT_OK,
        cli.EXIT_INCOMPLETE,
    )
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM verdicts").fetchone()[0] == shown["grader"]["calls"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"input": 1, "output": 2, "batch_input": 0.5}, "'m'.batch_output is missing: batch prices are given both"),
        ({"input": 1, "output": 2, "batch_inptu": 0.5}, "'m'.batch_inptu: not a price field"),
        ({"input": 1, "output": 2, "batch_input": -1, "batch_output": 1}, "'m'.batch_input: -1 is not a price"),
    ],
)
def test_a_broken_batch_price_is_one_line_naming_its_key(server, tmp_path, monkeypatch, capsys, entry, says):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(2))
    prices(tmp_path, {"m": entry})
    assert cli.main(["estimate", "--data", str(data)]) != cli.EXIT_OK
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and "prices.json" in err


def test_each_earlier_run_is_estimated_with_its_own_grader_template(server, tmp_path, monkeypatch, capsys):
    """A run graded with the builtin prompt calibrates an estimate asked with the reference's as
    it calibrates one asked with its own: the factor is of its own requests."""
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(6))
    assert cli.main(["run", "--data", str(data), "--grader-template", "builtin"]) == cli.EXIT_OK
    capsys.readouterr()
    factors = {}
    for template in ("builtin", "reference"):
        assert cli.main(["estimate", "--data", str(data), "--grader-template", template]) == cli.EXIT_OK
        line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("tokens of the grader"))
        factors[template] = line.split("factor ")[1].split(",")[0]
    assert factors["builtin"] == factors["reference"], factors


@pytest.mark.parametrize("latency", ["inf", "nan", "0", "90000"])
def test_a_latency_that_is_no_time_is_one_line(server, tmp_path, monkeypatch, capsys, latency):
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(2))
    assert cli.main(["estimate", "--data", str(data), "--latency", latency]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--latency" in err and "at most a day" in err


def test_retries_of_earlier_runs_do_not_swell_the_calibration(server, tmp_path, monkeypatch, capsys):
    """A verdict that did not parse is asked again, and its tokens add up over the attempts: the
    calibration counts them as the requests they were, not as one request's tokens."""
    user_folder(tmp_path, monkeypatch, server)
    data = write_jsonl(tmp_path / "data.jsonl", records(8))
    server.control(faults={"bad_json": 0.6}, seed=3)
    assert cli.main(["run", "--data", str(data)]) in (cli.EXIT_OK, cli.EXIT_INCOMPLETE)
    with sqlite3.connect(tmp_path / "runs" / "hbtui.sqlite") as conn:
        assert conn.execute("SELECT max(attempts) FROM verdicts").fetchone()[0] >= 2  # it did retry
    capsys.readouterr()
    assert cli.main(["estimate", "--data", str(data)]) == cli.EXIT_OK
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("tokens of the grader"))
    factor = float(line.split("factor ")[1].split(",")[0].split("-")[0])
    assert 0.9 <= factor <= 1.1, line  # the test server counts characters / 4, as the estimate does


def test_an_estimate_needs_no_endpoint(tmp_path, monkeypatch, capsys):
    """A run through batch files has none, and an estimate calls none."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("MODEL_TEST=test-model\nMODEL_GRADER=grader-model\n")
    for key in ("BASE_URL", "API_KEY", "MODEL_TEST", "MODEL_GRADER", "HBTUI_DB"):
        monkeypatch.delenv(key, raising=False)
    data = write_jsonl(tmp_path / "data.jsonl", records(3))
    assert cli.main(["estimate", "--data", str(data)]) == cli.EXIT_OK
    assert "test    test-model" in capsys.readouterr().out
