"""Providers' rate limits (hbtui.core.rate_limits): headers read, 429s told apart, calls paced; and
`hbtui run` against the test server enforcing limits as providers do (token buckets, the
x-ratelimit-* headers or none, Retry-After, insufficient_quota, a daily limit)."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time

import pytest

from hbtui.core.rate_limits import (
    DAILY,
    QUOTA,
    RATE_LIMIT,
    RatePacer,
    announced_limits,
    classify_refusal,
    limits_line,
    parse_duration,
    refusal_message,
)
from tests.cli.test_cli import hbtui
from tests.conftest import make_record, write_jsonl
from tests.support.server_process import FakeServer

OPENAI_PER_MINUTE = (
    "Rate limit reached for gpt-4.1 in organization org-x on requests per min (RPM): Limit 500, Used 500,"
    " Requested 1. Please try again in 120ms. Visit https://platform.openai.com/account/rate-limits to learn"
    " more. You can increase your rate limit by adding a payment method to your account at"
    " https://platform.openai.com/account/billing."
)
GROQ_PER_DAY = (
    "Rate limit reached for model `llama-3.1-8b-instant` in organization `org_x` service tier `on_demand` on"
    " requests per day (RPD): Limit 14400, Used 14400, Requested 1. Please try again in 2m59s."
)


@pytest.mark.parametrize(
    "text, seconds",
    [("20ms", 0.02), ("1.2s", 1.2), ("6m0s", 360.0), ("1h2m3s", 3723.0), ("7", 7.0), ("0.5", 0.5)],
)
def test_resets_as_providers_write_them(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5 minutes", "1x", "m", "-3", "nan"])
def test_a_reset_that_is_no_duration_is_none(text):
    assert parse_duration(text) is None


def test_openai_headers_give_the_pace_per_minute():
    limits = announced_limits(
        {
            "x-ratelimit-limit-requests": "1800",
            "x-ratelimit-remaining-requests": "1799",
            "x-ratelimit-reset-requests": "33ms",
            "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "199000",
            "x-ratelimit-reset-tokens": "300ms",
        }
    )
    assert limits is not None and limits.requests is not None and limits.tokens is not None
    assert limits.requests.per_second == 30 and not limits.requests.daily
    assert limits.tokens.per_second == pytest.approx(200000 / 60)


def test_a_daily_limit_in_the_headers_is_no_pace():
    """Groq's x-ratelimit-limit-requests is per day: its reset (6 s for one request of 14,400)
    gives its window away."""
    limits = announced_limits(
        {
            "x-ratelimit-limit-requests": "14400",
            "x-ratelimit-remaining-requests": "14399",
            "x-ratelimit-reset-requests": "6s",
        }
    )
    assert limits is not None and limits.requests is not None and limits.requests.daily
    pacer = RatePacer()
    pacer.learn({"x-ratelimit-limit-requests": "14400", "x-ratelimit-remaining-requests": "14399",
                 "x-ratelimit-reset-requests": "6s"})  # fmt: skip
    assert not pacer.paced


def test_anthropic_and_openrouter_headers_are_read():
    anthropic = announced_limits(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-requests-reset": "2026-12-01T20:00:01Z",
            "anthropic-ratelimit-tokens-limit": "40000",
        }
    )
    assert anthropic is not None and anthropic.requests.limit == 50 and anthropic.tokens.limit == 40000
    openrouter = announced_limits({"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "19",
                                   "X-RateLimit-Reset": str(int((time.time() + 3) * 1000))})  # fmt: skip
    assert openrouter is not None and openrouter.requests.limit == 20
    assert 0 < openrouter.requests.reset <= 3.5
    assert announced_limits({"content-type": "application/json"}) is None


@pytest.mark.parametrize(
    "status, code, error_type, message, headers, kind",
    [
        (429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota", {}, QUOTA),
        (429, None, "insufficient_quota", "quota", {}, QUOTA),
        (402, None, None, "Insufficient credits", {}, QUOTA),
        # OpenAI's per-minute text points at billing: the words decide nothing.
        (429, "rate_limit_exceeded", "requests", OPENAI_PER_MINUTE, {"retry-after-ms": "120"}, RATE_LIMIT),
        (429, "rate_limit_exceeded", "requests", GROQ_PER_DAY, {"retry-after": "179"}, DAILY),
        (429, None, None, "slow down", {"retry-after": "7200"}, DAILY),
        (429, None, None, "slow down", {"retry-after": "30"}, RATE_LIMIT),
        (
            429,
            None,
            None,
            "slow down",
            {
                "x-ratelimit-limit-requests": "100",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "3h0m0s",
            },
            DAILY,
        ),
    ],
)
def test_which_refusal_a_429_is(status, code, error_type, message, headers, kind):
    assert classify_refusal(status, code, error_type, message, headers, patience=600).kind == kind


def test_the_stop_lines_name_the_cause_and_when_it_resets():
    quota = classify_refusal(429, "insufficient_quota", None, "", {}, 600)
    assert refusal_message(quota, "GRADER_API_KEY") == (
        "the account behind GRADER_API_KEY is out of credit or quota (insufficient_quota): check its plan and billing"
    )
    daily = classify_refusal(429, None, None, GROQ_PER_DAY, {"retry-after": "7200"}, 600)
    line = refusal_message(daily, "API_KEY", now=0)
    at = time.strftime("%H:%M", time.localtime(7200))
    assert line == f"the endpoint's requests-per-day limit is reached; it resets in 2h0m (at {at} local time)"


def test_calls_are_spread_at_the_pace_not_released_together():
    async def go() -> list[float]:
        pacer = RatePacer(rpm=600)  # 10 a second, at 99 % of it
        sent = []

        async def one() -> None:
            await pacer.turn()
            sent.append(time.monotonic())

        await asyncio.gather(*(one() for _ in range(6)))
        return sent

    sent = asyncio.run(go())
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    # One every 1/10 s (the first at once). A turn's slot is planned, so a call woken late on a busy
    # machine leaves the next one a shorter gap: the pace is read over the whole, and released
    # together (gaps near 0) is what must never happen.
    assert sent[-1] - sent[0] >= 5 * 0.1 - 0.02, gaps
    assert min(gaps) >= 0.05, gaps


def test_a_retry_after_holds_every_call_and_teaches_no_rate_from_a_few_refusals():
    async def go() -> tuple[float, bool]:
        pacer = RatePacer()
        pacer.sent(time.monotonic())
        pacer.refused_now({}, 0.3)
        started = time.monotonic()
        await pacer.turn()
        return time.monotonic() - started, pacer.paced

    waited, paced = asyncio.run(go())
    assert waited >= 0.28 and not paced


def test_limits_line():
    assert limits_line(None) is None
    summary = {"paced": {"m": "1,800 requests/min from the endpoint's headers"}, "refused": 12,
               "waited_seconds": 41.0, "paced_calls": 300}  # fmt: skip
    assert limits_line(summary) == (
        "limits: paced to 1,800 requests/min from the endpoint's headers; 12 answers refused (429);"
        " 300 calls waited for the rate, 41 s summed over them"
    )


# ---- hbtui run against limits, end to end -----------------------------------------------


def records(count: int) -> list[dict]:
    return [
        make_record(f"r{n}", [(f"criterion {n}.{k}", 3, ["axis:accuracy"]) for k in range(4)], user=f"question {n}")
        for n in range(count)
    ]


@pytest.fixture
def limited(tmp_path, server):
    """A user folder whose .env points at the session's server, one model for both roles (one
    limit for every call), and a dataset of 20 conversations (100 calls)."""
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=test-model\nGRADER_TEMPLATE=builtin\n"
    )
    write_jsonl(tmp_path / "data.jsonl", records(20))
    return tmp_path


def verdicts(folder, run_id=1) -> tuple[int, int]:
    """(verdicts given, verdicts failed) of the run."""
    with sqlite3.connect(folder / "runs" / "hbtui.sqlite") as db:
        graded, failed = db.execute(
            "SELECT COUNT(*) FILTER (WHERE status IN ('met', 'not_met')), COUNT(*) FILTER (WHERE status = 'error')"
            " FROM verdicts WHERE run_id = ?",
            (run_id,),
        ).fetchone()
    return graded, failed


@pytest.mark.parametrize("headers", [True, False])
def test_a_concurrency_far_above_the_limit_slows_down_and_finishes(limited, server, headers):
    """64 in flight at 50 ms would send 1,280 calls a second to an endpoint that takes 50: the run
    slows to the limit (bench/bench_limits.py measures the share of it on the main subset)."""
    write_jsonl(limited / "data.jsonl", records(60))  # 300 calls, 6 s at the limit
    server.control(latency_ms=50, rate_limit={"rpm": 3000, "headers": headers})
    result = hbtui("run", "--data", "data.jsonl", "--concurrency", "64", cwd=limited, timeout=120)
    assert result.returncode == 0, result.stderr
    assert verdicts(limited) == (240, 0)
    stats = server.stats()
    refused = stats["rate_refused"] / stats["requests"]
    source = "the endpoint's headers" if headers else "its 429 answers"
    assert refused <= (0.05 if headers else 0.2), stats  # 300 calls: learning is much of it
    shown = json.loads(hbtui("show", "1", "--json", cwd=limited, check=True).stdout)
    limits = shown["requests"]["limits"]
    assert limits["refused"] == stats["rate_refused"]
    if headers or limits.get("paced"):
        # Headers always teach the pace. Without them, a busy machine may send too few calls
        # past the limit, or too unevenly, for the refusals to read as a rate (the run then
        # waits out each Retry-After): the share refused above is what must hold either way.
        assert f"from {source}" in result.stdout
        assert source in json.dumps(limits["paced"])
        assert "limits: paced to" in hbtui("show", "1", cwd=limited, check=True).stdout


def test_a_tpm_limit_that_binds_first_is_kept(limited, server):
    # About 360 tokens a call (prompt and 64 max tokens): 22 calls a second, against 100 for the RPM.
    server.control(latency_ms=20, rate_limit={"rpm": 6000, "tpm": 480000, "headers": True})
    flags = ("--max-tokens-test", "64", "--max-tokens-grader", "64", "--concurrency", "32")
    result = hbtui("run", "--data", "data.jsonl", *flags, cwd=limited, timeout=120)
    assert result.returncode == 0, result.stderr
    assert verdicts(limited) == (80, 0)
    assert "tokens/min" in result.stdout
    stats = server.stats()
    assert stats["rate_refused"] <= 0.05 * stats["requests"], stats


def test_settings_win_over_what_the_endpoint_says(limited, server):
    server.control(latency_ms=10, rate_limit={"rpm": 6000, "headers": True})
    started = time.monotonic()
    result = hbtui("run", "--data", "data.jsonl", "--rpm", "1500", cwd=limited, timeout=120)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 100 / 25 - 0.5  # 100 calls at 25 a second
    assert "1,500 requests/min from the RPM/TPM settings" in result.stdout


def test_a_limit_that_changes_mid_run_is_followed(limited, server):
    write_jsonl(limited / "data.jsonl", records(40))  # 200 calls: 4 s at the first limit
    server.control(latency_ms=30, rate_limit={"rpm": 3000, "headers": True})
    process = __import__("subprocess").Popen(
        [__import__("sys").executable, "-m", "hbtui", "run", "--data", "data.jsonl", "--concurrency", "32"],
        cwd=limited, stdout=-1, stderr=-1, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    server.control(rate_limit={"rpm": 900, "headers": True})
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert verdicts(limited) == (160, 0)
    assert "900 requests/min" in out
    stats = server.stats()
    assert stats["rate_refused"] <= 0.1 * stats["requests"], stats


def test_several_endpoints_each_keep_their_own_limit(tmp_path, server):
    with FakeServer(config={"latency_ms": 30, "rate_limit": {"rpm": 600, "headers": True}}) as slow:
        server.control(latency_ms=30, rate_limit={"rpm": 2400, "headers": True})
        (tmp_path / ".env").write_text(
            f"BASE_URL={server.base_url},{slow.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=test-model\n"
            "GRADER_TEMPLATE=builtin\n"
        )
        write_jsonl(tmp_path / "data.jsonl", records(20))
        result = hbtui("run", "--data", "data.jsonl", "--concurrency", "32", cwd=tmp_path, timeout=120)
        assert result.returncode == 0, result.stderr
        assert verdicts(tmp_path) == (80, 0)
        assert "600 requests/min" in result.stdout and "2,400 requests/min" in result.stdout
        for one in (server, slow):
            stats = one.stats()
            assert stats["rate_refused"] <= 0.05 * max(stats["requests"], 1), stats


@pytest.mark.parametrize("status", [429, 402])
def test_an_account_out_of_credit_stops_at_once_and_resumes(limited, server, status):
    server.control(latency_ms=20, quota_exhausted=True, quota_status=status)
    started = time.monotonic()
    result = hbtui("run", "--data", "data.jsonl", "--concurrency", "8", cwd=limited, timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert (
        "the account behind API_KEY is out of credit or quota (insufficient_quota): check its plan and billing"
        in (lines[-2])
    )
    assert lines[-1] == "then: hbtui resume 1"
    assert server.stats()["requests"] <= 2 * 8
    assert verdicts(limited) == (0, 0)
    server.control(quota_exhausted=False)
    resumed = hbtui("resume", "1", cwd=limited, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert verdicts(limited) == (80, 0)


def test_the_resume_line_is_printed_as_hbtui_was_invoked(limited, server):
    """A venv not activated: `.venv/bin/hbtui run` is told `.venv/bin/hbtui resume 1`, which runs."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).parent / "hbtui"
    if not script.exists():
        pytest.skip("hbtui is not installed as a script beside this python")
    env = {key: value for key, value in os.environ.items() if key not in ("BASE_URL", "MODEL_TEST", "MODEL_GRADER")}
    env["PATH"] = "/usr/bin:/bin"  # the venv's bin is not on it
    server.control(quota_exhausted=True)
    result = subprocess.run([str(script), "run", "--data", "data.jsonl"], cwd=limited, env=env, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1
    hint = result.stderr.strip().splitlines()[-1]
    assert hint == f"then: {script} resume 1"
    server.control(quota_exhausted=False)
    command = hint.removeprefix("then: ").split()
    resumed = subprocess.run(command, cwd=limited, env=env, capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr


def test_a_daily_limit_stops_at_once_saying_when_it_resets_and_resumes(limited, server):
    server.control(latency_ms=20, daily_limit_retry_after=7200)
    started = time.monotonic()
    result = hbtui("run", "--data", "data.jsonl", "--concurrency", "8", cwd=limited, timeout=60)
    assert time.monotonic() - started < 30 and result.returncode == 1
    assert "the endpoint's requests-per-day limit is reached; it resets in 2h0m (at " in result.stderr
    assert server.stats()["requests"] <= 2 * 8
    server.control(daily_limit_retry_after=None)
    resumed = hbtui("resume", "1", cwd=limited, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert verdicts(limited) == (80, 0)


def test_nothing_but_429s_past_the_patience_stops_the_run_with_nothing_failed(limited, server):
    server.control(latency_ms=10, persistent_429_until=10**6, retry_after=0.2)
    result = hbtui("run", "--data", "data.jsonl", cwd=limited, env_extra={"RATE_LIMIT_PATIENCE": "2"}, timeout=60)
    assert result.returncode == 1
    assert "answered nothing but 429 (rate limited)" in result.stderr and "RATE_LIMIT_PATIENCE 2 s" in result.stderr
    assert verdicts(limited) == (0, 0)  # nothing failed on rate limits alone: all of it pending
    server.control(persistent_429_until=0)
    resumed = hbtui("resume", "1", cwd=limited, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert verdicts(limited) == (80, 0)


def test_check_prints_the_limits_and_names_a_quota(limited, server):
    server.control(rate_limit={"rpm": 1800, "tpm": 200000, "headers": True})
    result = hbtui("check", cwd=limited, timeout=60)
    assert "1,800 requests/min, 200,000 tokens/min from the endpoint's headers" in result.stdout, result.stdout
    server.control(rate_limit=None, quota_exhausted=True)
    result = hbtui("check", cwd=limited, timeout=60)
    assert result.returncode != 0
    assert "out of credit or quota (insufficient_quota)" in result.stdout + result.stderr


def test_the_monitor_shows_what_the_limits_did(tmp_path, server):
    """The heartbeat carries the pace and the refusals; once ended, the run's record does."""
    from hbtui.store import Store
    from hbtui.tui.monitor_data import view_from_store
    from tests.conftest import run_engine, settings_for

    server.control(latency_ms=5, rate_limit={"rpm": 1200, "headers": True})
    data = write_jsonl(tmp_path / "data.jsonl", records(4))
    db = tmp_path / "runs" / "hbtui.sqlite"
    settings = settings_for(server, db, grader_template="builtin", model_grader="test-model")
    run_id, status = asyncio.run(run_engine(settings, data))
    assert status == "finished"

    async def view():
        async with await Store.open(str(db)) as store:
            return await view_from_store(store, run_id)

    shown = asyncio.run(view())
    assert shown.limits is not None
    assert shown.limits.startswith("limits: paced to 1,200 requests/min from the endpoint's headers; 0 answers")


def test_an_endpoint_of_nothing_but_429s_is_set_aside_while_another_answers(tmp_path, server):
    with FakeServer(config={"latency_ms": 10, "persistent_429_until": 10**6, "retry_after": 0.2}) as refusing:
        server.control(latency_ms=10)
        (tmp_path / ".env").write_text(
            f"BASE_URL={refusing.base_url},{server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=test-model\n"
            "GRADER_TEMPLATE=builtin\nRATE_LIMIT_PATIENCE=2\n"
        )
        write_jsonl(tmp_path / "data.jsonl", records(20))
        result = hbtui("run", "--data", "data.jsonl", cwd=tmp_path, timeout=120)
        assert result.returncode == 0, result.stderr
        assert verdicts(tmp_path) == (80, 0)
        assert f"endpoint {refusing.base_url} set aside for 2 s: nothing but 429" in result.stdout
