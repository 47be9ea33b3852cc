"""The engine end to end against the test server: faults, fatal errors, cancel and resume, regrade."""

import asyncio
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from hbtui.core.dataset import load_jsonl
from hbtui.core.grading import grader_prompt, load_template
from hbtui.services import Engine, plan_run, resume_hint
from hbtui.store import RunBusy, Store
from tests.conftest import MAIN_SUBSET, needs_shared, run_engine, settings_for
from tests.support.fake_server import expected_verdict
from tests.support.server_process import FakeServer


def stored_verdicts(db):
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT r.body, c.reply, v.criterion, v.points, v.status, v.error_kind FROM verdicts v"
            " JOIN conversations c ON c.id = v.conversation_id JOIN records r ON r.id = c.record_id"
        ).fetchall()


def assert_verdicts_are_the_servers(db):
    """Every met / not met verdict is the one the server gave; no fault turned into 'not met'."""
    with sqlite3.connect(db) as conn:
        name = json.loads(conn.execute("SELECT settings_json FROM runs").fetchone()[0])["grader_template"]
    template = load_template(name, os.environ["HBTUI_CACHE"])  # the run's own prompt
    checked = 0
    for body, reply, criterion, points, status, _ in stored_verdicts(db):
        if status in ("met", "not_met"):
            prompt = grader_prompt(template, json.loads(body)["prompt"], reply, points, criterion)
            assert (status == "met") == expected_verdict(prompt), criterion
            checked += 1
    return checked


@needs_shared
def test_fault_storm_finishes_and_no_fault_becomes_not_met(server, tmp_path):
    server.control(
        faults={"rate_limit": 0.10, "server_error": 0.05, "drop": 0.02, "hang": 0.01, "bad_json": 0.05},
        reject_json_schema=True,
        hang_seconds=3,
        retry_after=0.01,
        seed=3,
    )
    db = tmp_path / "storm.sqlite"
    settings = settings_for(server, db, timeout=1.0, max_attempts=3, grader_parse_attempts=2, concurrency=16)
    run_id, status = asyncio.run(run_engine(settings, MAIN_SUBSET, limit=40, seed=1))
    stats = server.stats()
    print(
        f"\nfault storm: {stats['requests']} requests, faults injected {stats['faults']},"
        f" json_schema refused {stats['by_status'].get('400', 0)}"
    )
    assert stats["faults"]["rate_limit"] > 0 and stats["faults"]["bad_json"] > 0
    checked = assert_verdicts_are_the_servers(db)
    assert checked > 100
    rows = stored_verdicts(db)
    with sqlite3.connect(db) as conn:
        failed_replies, failed_criteria = conn.execute(
            "SELECT count(*), coalesce(sum(n_criteria), 0) FROM conversations WHERE status = 'failed'"
            " AND error_kind IS NOT NULL"
        ).fetchone()
    # Nothing left pending but the criteria of a reply that failed after its retries (which one
    # does depends on how the concurrent requests met the seeded faults), recorded with its kind.
    pending = [r for r in rows if r[4] == "pending"]
    assert len(pending) == failed_criteria and all(reply is None for _, reply, *_ in pending)
    errors = [r for r in rows if r[4] == "error"]
    # a failure is an error with its kind, never "not met"
    assert all(kind for *_, kind in errors)
    # and a run with such gaps is incomplete, never finished
    assert status == ("incomplete" if errors or failed_replies else "finished")

    # regrade-errors on a healthy server grades what failed, and nothing else is asked again
    server.control(faults={}, reject_json_schema=False)
    server.reset_stats()

    async def regrade():
        async with await Store.open(db) as store:
            reset = await store.reset_errors(run_id)
            run = await store.get_run(run_id)
            status = await Engine(store, run, settings, backoff_base=0.01).execute()
            return reset, status

    (reset, replies), status = asyncio.run(regrade())
    assert status == "finished" and reset == len(errors) and replies == failed_replies
    assert server.stats()["grader"] == len(errors) + failed_criteria
    assert not [r for r in stored_verdicts(db) if r[4] != "met" and r[4] != "not_met"]
    assert_verdicts_are_the_servers(db)


def test_bad_key_stops_the_run_at_once(tmp_path, small_dataset):
    from tests.support.server_process import FakeServer

    with FakeServer(api_key="fake-right") as server:
        settings = settings_for(server, tmp_path / "db.sqlite", api_key="fake-wrong", concurrency=2)
        _run_id, status = asyncio.run(run_engine(settings, small_dataset))
        assert status == "failed"
        assert server.stats()["requests"] <= 2  # one per worker in flight, no retries
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        (error,) = conn.execute("SELECT error FROM runs").fetchone()
        pending = conn.execute("SELECT count(*) FROM conversations WHERE status = 'pending'").fetchone()[0]
    assert "auth" in error and "Incorrect API key" in error
    assert pending == 3  # nothing recorded as failed: resumable with the right key
    assert "fake-right" not in error and "fake-wrong" not in error


def test_refused_generation_is_excluded_not_graded(server, tmp_path, small_dataset):
    records = [json.loads(line) for line in small_dataset.read_text().splitlines()]
    records[2]["prompt"][0]["content"] = "Please read my lab report. " * 150  # ~4,000 characters
    small_dataset.write_text("".join(json.dumps(r) + "\n" for r in records))
    server.control(context_chars=3500)  # the grader prompts of p1 and p2 fit, p3's question does not
    db = tmp_path / "db.sqlite"
    _run_id, status = asyncio.run(run_engine(settings_for(server, db), small_dataset))
    assert status == "finished"
    with sqlite3.connect(db) as conn:
        failed = conn.execute("SELECT prompt_id, error_kind, error FROM conversations WHERE status='failed'").fetchall()
        report = json.loads(conn.execute("SELECT report_json FROM runs").fetchone()[0])
    assert [(p, k) for p, k, _ in failed] == [("p3", "context_length")]
    assert "maximum context length" in failed[0][2]
    assert server.stats()["grader"] == 6  # p3's two criteria were never graded
    assert report["conversations"]["excluded"] == 1 and report["metrics"]["overall_score"]["n"] == 2


@needs_shared
def test_cancel_then_resume_does_only_missing_work(server, tmp_path):
    server.control(latency_ms=20)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db, concurrency=8)
    dataset = load_jsonl(MAIN_SUBSET)

    async def cancel_midway():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, dataset, limit=10, seed=4, name="interrupted")
            engine = Engine(store, await store.get_run(run_id), settings, backoff_base=0.01)
            task = asyncio.create_task(engine.execute())
            while server.stats()["grader"] < 40:
                await asyncio.sleep(0.02)
            task.cancel()
            return run_id, await task

    run_id, status = asyncio.run(cancel_midway())
    assert status == "interrupted"
    first = server.stats()["requests"]
    with sqlite3.connect(db) as conn:
        done = conn.execute("SELECT count(*) FROM verdicts WHERE status != 'pending'").fetchone()[0]
        replies = conn.execute("SELECT count(*) FROM conversations WHERE status = 'generated'").fetchone()[0]
    assert 0 < done < 130

    async def resume():
        async with await Store.open(db) as store:
            return await Engine(store, await store.get_run(run_id), settings, backoff_base=0.01).execute()

    assert asyncio.run(resume()) == "finished"
    total = server.stats()["requests"]
    with sqlite3.connect(db) as conn:
        criteria = conn.execute("SELECT count(*) FROM verdicts").fetchone()[0]
        conversations = conn.execute("SELECT count(*) FROM conversations").fetchone()[0]
    # Resume asked exactly what was not stored; the cancelled calls in flight are the only repeats.
    assert total - first == (criteria - done) + (conversations - replies)
    assert total <= criteria + conversations + 8 * 2

    # The same seed uninterrupted gives the same verdicts and score.
    other = tmp_path / "other.sqlite"
    asyncio.run(run_engine(settings_for(server, other), MAIN_SUBSET, limit=10, seed=4))
    with sqlite3.connect(db) as a, sqlite3.connect(other) as b:
        query = "SELECT c.prompt_id, v.idx, v.status FROM verdicts v JOIN conversations c ON c.id = v.conversation_id ORDER BY 1, 2"
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
        assert a.execute("SELECT score FROM runs").fetchone() == b.execute("SELECT score FROM runs").fetchone()


def test_second_process_cannot_drive_a_live_run(server, tmp_path, small_dataset):
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="claimed")
            await store.claim_run(run_id, "otherhost:4242")
            engine = Engine(store, await store.get_run(run_id), settings)
            with pytest.raises(RunBusy, match="otherhost:4242"):
                await engine.execute()

    asyncio.run(go())


def test_engine_and_store_never_import_textual():
    code = "import sys, hbtui.engine, hbtui.store, hbtui.cli, hbtui.render.export; print('textual' in sys.modules, 'rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@needs_shared
@pytest.mark.slow
def test_full_run_of_all_738_real_records(server, tmp_path):
    db = tmp_path / "full.sqlite"
    _run_id, status = asyncio.run(run_engine(settings_for(server, db, concurrency=64), MAIN_SUBSET))
    assert status == "finished"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM verdicts WHERE status IN ('met','not_met')").fetchone()[0] == 8807
        assert conn.execute("SELECT count(*) FROM conversations WHERE score IS NOT NULL").fetchone()[0] == 738
    assert assert_verdicts_are_the_servers(db) == 8807


def test_cut_off_verdict_is_asked_again_with_twice_the_budget(server, tmp_path, small_dataset):
    server.control(truncate_grader_below=150)  # verdicts asked with fewer tokens come back cut
    db = tmp_path / "db.sqlite"
    _run_id, status = asyncio.run(
        run_engine(settings_for(server, db, max_tokens_grader=100, grader_parse_attempts=1), small_dataset)
    )
    assert status == "finished"
    with sqlite3.connect(db) as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM verdicts GROUP BY status"))
        attempts = conn.execute("SELECT sum(attempts) FROM verdicts").fetchone()[0]
    assert statuses == {"met": 5, "not_met": 3}  # even with a single parse attempt allowed
    assert server.stats()["grader"] == 16 and attempts == 16  # each asked at 100 tokens, then at 200


def test_truncated_reply_is_graded_and_flagged(server, tmp_path, small_dataset):
    server.control(truncate_generation=True)
    db = tmp_path / "db.sqlite"
    _run_id, status = asyncio.run(run_engine(settings_for(server, db), small_dataset))
    assert status == "finished"
    with sqlite3.connect(db) as conn:
        assert {r for (r,) in conn.execute("SELECT finish_reason FROM conversations")} == {"length"}
        assert conn.execute("SELECT count(*) FROM verdicts WHERE status IN ('met', 'not_met')").fetchone()[0] == 8


def test_unreachable_endpoint_stops_the_run_instead_of_failing_every_conversation(tmp_path, small_dataset):
    db = tmp_path / "db.sqlite"
    settings = settings_for(type("Down", (), {"base_url": "http://127.0.0.1:9/v1"})(), db, max_attempts=2)
    _run_id, status = asyncio.run(run_engine(settings, small_dataset))
    assert status == "failed"
    with sqlite3.connect(db) as conn:
        (error,) = conn.execute("SELECT error FROM runs").fetchone()
        statuses = {s for (s,) in conn.execute("SELECT status FROM conversations")}
    assert "cannot reach http://127.0.0.1:9/v1" in error
    assert statuses == {"pending"}  # nothing recorded as failed: a resume does it all


def test_an_unreachable_endpoint_stops_after_one_call_has_given_up(tmp_path, small_dataset):
    """The calls waiting their turn are not each retried to the end once the run is failing."""
    db = tmp_path / "db.sqlite"
    down = "http://127.0.0.1:9/v1"
    settings = settings_for(type("Down", (), {"base_url": down})(), db, max_attempts=3, concurrency=8)

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="down")
            engine = Engine(store, await store.get_run(run_id), settings, backoff_base=0.01)
            status = await engine.execute()
            return status, engine.live.endpoints[down]

    status, stats = asyncio.run(go())
    assert status == "failed"
    # One call's attempts; before, each of the three conversations ran its own to the end (9).
    assert stats.successes == 0 and stats.calls == settings.max_attempts, stats


def test_a_fatal_grader_error_lets_the_paid_replies_in_flight_finish(server, tmp_path, small_dataset):
    """A 401 from the grader stops the run, but generations already sent elsewhere are answers
    paid for: they are stored, not cancelled and asked again on resume."""
    server.control(latency_ms=300)
    db = tmp_path / "db.sqlite"
    with FakeServer(api_key="fake-right") as guarded:
        settings = settings_for(
            server, db, concurrency=3, grader_base_url=guarded.base_url, grader_api_key="fake-wrong-key"
        )
        _run_id, status = asyncio.run(run_engine(settings, small_dataset))
    assert status == "failed"
    with sqlite3.connect(db) as conn:
        generated = conn.execute("SELECT count(*) FROM conversations WHERE status = 'generated'").fetchone()[0]
    assert generated == 3, generated  # all three replies kept, though grading stopped at the first


@pytest.mark.parametrize(
    "error, says",
    [
        ("connection: cannot reach http://127.0.0.1:9/v1: refused", "hbtui resume 7 --base-url URL"),
        ("auth: HTTP 401: key rejected", "set the key (API_KEY, or GRADER_API_KEY"),
        ("not_found: HTTP 404: model x not served", "hbtui resume 7 --model-test NAME"),
        ("RuntimeError: something else", "fix the cause, then: hbtui resume 7"),
    ],
)
def test_the_hint_after_a_failed_run_names_what_fixes_it(error, says):
    assert says in resume_hint(7, error)


def test_pause_stops_new_requests_until_resumed(server, tmp_path, small_dataset):
    server.control(latency_ms=100)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db, concurrency=2)

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="paused")
            engine = Engine(store, await store.get_run(run_id), settings, backoff_base=0.01)
            task = asyncio.create_task(engine.execute())
            while server.stats()["requests"] < 3:
                await asyncio.sleep(0.01)
            engine.pause()
            await asyncio.sleep(0.3)  # the calls in flight at the pause finish
            paused_at = server.stats()["requests"]
            await asyncio.sleep(0.5)
            still = server.stats()["requests"]
            engine.resume()
            return paused_at, still, await task

    paused_at, still, status = asyncio.run(go())
    assert paused_at == still and status == "finished"


def test_resume_asks_again_what_got_no_answer(server, tmp_path, small_dataset):
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)
    run_id, _status = asyncio.run(run_engine(settings, small_dataset))
    with sqlite3.connect(db) as conn:  # as a run ends after its retries ran out, or a refusal
        conn.execute("UPDATE verdicts SET status = 'error', error_kind = 'server_error' WHERE idx = 0")
        conn.execute("UPDATE verdicts SET status = 'error', error_kind = 'content_filter' WHERE idx = 1")
        # What older versions stored for any 4xx: no verdict on the criterion, so asked again.
        conn.execute("UPDATE verdicts SET status = 'error', error_kind = 'refused' WHERE idx = 2")
        unanswered = conn.execute("SELECT count(*) FROM verdicts WHERE idx IN (0, 2)").fetchone()[0]
    server.reset_stats()

    async def resume():
        async with await Store.open(db) as store:
            return await Engine(store, await store.get_run(run_id), settings, backoff_base=0.01).execute()

    # The content filter's refusal stays an error (an answer, kept until regrade-errors): incomplete.
    assert asyncio.run(resume()) == "incomplete"
    assert server.stats()["requests"] == unanswered  # what got no answer; not the refused
    with sqlite3.connect(db) as conn:
        kinds = [k for (k,) in conn.execute("SELECT error_kind FROM verdicts WHERE status = 'error'")]
    assert kinds and set(kinds) == {"content_filter"}


def test_a_key_is_never_sent_to_another_host_on_resume(finished_run_db):
    from hbtui.core.settings.config import Settings, SettingsError
    from hbtui.services import settings_for_run

    async def load():
        async with await Store.open(finished_run_db) as store:
            return await store.resolve_run("small-run")

    run = asyncio.run(load())
    elsewhere = Settings(base_url="https://other.example/v1", api_key="fake-other-provider-key-0000", db_path="x.db")
    with pytest.raises(SettingsError, match="not sent to another host"):
        settings_for_run(run, elsewhere)
    same = Settings(base_url=run.settings["base_url"], api_key="fake-right", db_path="moved.db")
    settings = settings_for_run(run, same)
    assert settings.api_key == ("fake-right",) and settings.db_path == "moved.db"
    assert settings_for_run(run, Settings(db_path="y.db")).api_key is None


def test_regrade_is_refused_while_another_process_drives_the_run(finished_run_db):
    import time as clock

    from hbtui.store import RunBusy

    with sqlite3.connect(finished_run_db) as conn:
        conn.execute("UPDATE verdicts SET status = 'error', error_kind = 'unparseable' WHERE idx = 0")
        conn.execute("UPDATE runs SET owner = 'elsewhere:1', heartbeat_at = ?", (clock.time(),))

    async def regrade():
        async with await Store.open(finished_run_db) as store:
            await store.reset_errors(1)

    with pytest.raises(RunBusy, match="elsewhere:1"):
        asyncio.run(regrade())
    with sqlite3.connect(finished_run_db) as conn:
        assert conn.execute("SELECT count(*) FROM verdicts WHERE status = 'error'").fetchone()[0] == 3


def test_a_malformed_answer_is_retried_and_never_leaves_a_finished_run_incomplete(tmp_path, small_dataset):
    """A 200 whose message is not an object: a bad response, retried; the run is not 'finished'
    with criteria left pending."""
    from aiohttp import web

    seen = set()

    async def chat(request):
        body = await request.json()
        last = body["messages"][-1]["content"]
        if "criteria_met" in last and last not in seen:  # each verdict: malformed the first time
            seen.add(last)
            return web.json_response({"choices": [{"message": "oops"}], "usage": "none"})
        content = '{"explanation": "ok", "criteria_met": true}' if "criteria_met" in last else "A reply."
        return web.json_response(
            {
                "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1},
            }
        )

    async def go():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        server = type("Odd", (), {"base_url": f"http://127.0.0.1:{port}/v1"})()
        try:
            return await run_engine(settings_for(server, tmp_path / "db.sqlite", max_attempts=3), small_dataset)
        finally:
            await runner.cleanup()

    _run_id, status = asyncio.run(go())
    assert status == "finished"
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM verdicts WHERE status != 'met'").fetchone()[0] == 0
        assert conn.execute("SELECT sum(attempts) FROM verdicts").fetchone()[0] == 16  # each asked twice


def test_a_regraded_run_keeps_every_token_spent_and_one_folder(server, tmp_path, small_dataset):
    db = tmp_path / "runs" / "db.sqlite"
    server.control(grader_format="broken")
    settings = settings_for(server, db, grader_parse_attempts=1)
    run_id, _ = asyncio.run(run_engine(settings, small_dataset))
    with sqlite3.connect(db) as conn:
        first = conn.execute("SELECT sum(prompt_tokens) FROM verdicts").fetchone()[0]
    server.control(grader_format="json")

    async def regrade():
        async with await Store.open(db) as store:
            await store.reset_errors(run_id)
            return await Engine(store, await store.get_run(run_id), settings, backoff_base=0.01).execute()

    assert asyncio.run(regrade()) == "finished"
    with sqlite3.connect(db) as conn:
        total, attempts = conn.execute("SELECT sum(prompt_tokens), sum(attempts) FROM verdicts").fetchone()
    assert total > first and attempts == 16  # both rounds counted
    folders = [p for p in db.parent.iterdir() if p.is_dir()]
    assert len(folders) == 1 and "0.6250" in (folders[0] / "description.md").read_text()


def test_a_second_cancel_does_not_cut_the_final_writes(server, tmp_path, small_dataset):
    """Ctrl-C twice, or an app stopping a run it just cancelled: the second cancel lands while
    the engine records how the run ended, and must not leave it marked as running."""
    server.control(latency_ms=200)
    db = tmp_path / "db.sqlite"
    settings = settings_for(server, db)

    async def go():
        async with await Store.open(db) as store:
            run_id = await plan_run(store, settings, load_jsonl(small_dataset), name="twice")
            task = asyncio.create_task(Engine(store, await store.get_run(run_id), settings).execute())
            record_end = store.finish_run

            async def cancelled_again_while_recording(*args, **kwargs):
                task.cancel()
                await asyncio.sleep(0.05)  # where the second cancel arrives
                return await record_end(*args, **kwargs)

            store.finish_run = cancelled_again_while_recording
            while server.stats()["requests"] < 2:
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            # The shielded close goes on to its end, however long a busy machine makes it.
            others = asyncio.all_tasks() - {asyncio.current_task()}
            await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), 30)

    asyncio.run(go())
    with sqlite3.connect(db) as conn:
        status, owner = conn.execute("SELECT status, owner FROM runs").fetchone()
    assert status == "interrupted" and owner is None
