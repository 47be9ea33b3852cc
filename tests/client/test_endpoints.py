"""Several endpoints of one model: calls spread over them, each with its own limit; one that
dies mid-run is set aside and the run finishes on the other, nothing lost and nothing paid twice
(counted by the servers themselves); the connection check names each one; bad lists get one line."""

import asyncio
import json
import sqlite3
from collections import Counter

import pytest
from conftest import make_record, run_engine, settings_for, write_jsonl

from hbtui import cli
from hbtui.client.checks import check_connection
from hbtui.core.settings.config import Settings, SettingsError
from hbtui.engine.endpoint_pool import EndpointPool
from hbtui.store import Store
from tests.support.server_process import FakeServer


def many_records(count: int) -> list[dict]:
    return [
        make_record(
            f"p{n}",
            [
                (f"[[MET]] criterion {n}.1", 5, ["axis:accuracy"]),
                (f"[[NOT_MET]] criterion {n}.2", 3, ["axis:accuracy"]),
            ],
            user=f"Question number {n}?",
        )
        for n in range(count)
    ]


def answers(log) -> Counter:
    """How many times each request body was answered 200, by (kind, sha256)."""
    if not log.exists():
        return Counter()
    return Counter((entry["kind"], entry["sha256"]) for entry in map(json.loads, log.read_text().splitlines()))


@pytest.fixture
def second_server():
    with FakeServer() as other:
        yield other


def test_a_replica_that_dies_mid_run_loses_nothing_and_pays_nothing_twice(server, second_server, tmp_path):
    conversations = 24
    data = write_jsonl(tmp_path / "many.jsonl", many_records(conversations))
    dying_log, living_log = tmp_path / "dying.jsonl", tmp_path / "living.jsonl"
    server.control(latency_ms=20, answers_log=str(living_log))
    second_server.control(latency_ms=20, answers_log=str(dying_log), die_after_answers=15)
    db = tmp_path / "runs.sqlite"
    settings = settings_for(
        server, db, base_url=f"{second_server.base_url},{server.base_url}", concurrency=4, max_attempts=3
    )

    _, status = asyncio.run(run_engine(settings, data))

    assert status == "finished"
    dying, living = answers(dying_log), answers(living_log)
    # It answered some before it died (those already being answered when it began to die, too).
    assert sum(dying.values()) >= 15
    both = dying + living
    assert max(both.values()) == 1, "a call answered was sent again"
    kinds = Counter(kind for kind, _ in both)
    assert kinds == {"generation": conversations, "grader": 2 * conversations}
    with sqlite3.connect(db) as conn:
        replies = dict(conn.execute("SELECT status, count(*) FROM conversations GROUP BY status"))
        verdicts = dict(conn.execute("SELECT status, count(*) FROM verdicts GROUP BY status"))
        answered_by = Counter(
            row[0]
            for row in conn.execute(
                "SELECT endpoint FROM conversations UNION ALL SELECT endpoint FROM verdicts WHERE from_cache = 0"
            )
        )
    assert replies == {"generated": conversations}
    assert verdicts == {"met": conversations, "not_met": conversations}
    died_after = sum(dying.values())
    assert answered_by == {second_server.base_url: died_after, server.base_url: 3 * conversations - died_after}


def test_calls_spread_over_endpoints_each_within_its_own_limit(server, second_server, tmp_path):
    data = write_jsonl(tmp_path / "many.jsonl", many_records(16))
    server.control(latency_ms=250)  # long enough for 3 calls to overlap on a busy machine
    second_server.control(latency_ms=250)
    settings = settings_for(server, tmp_path / "runs.sqlite", base_url=f"{server.base_url},{second_server.base_url}")
    settings = Settings(**{**settings.__dict__, "concurrency": 3})

    _, status = asyncio.run(run_engine(settings, data))

    assert status == "finished"
    first, second = server.stats(), second_server.stats()
    assert first["max_in_flight"] <= 3 and second["max_in_flight"] <= 3
    # Both took a fair share, and together more than one endpoint's limit at once.
    assert first["requests"] >= 16 and second["requests"] >= 16
    assert first["max_in_flight"] == 3 and second["max_in_flight"] == 3


def test_the_endpoint_with_fewest_in_flight_for_its_limit_is_picked():
    settings = Settings(base_url="http://a.invalid/v1,http://b.invalid/v1", api_key="k1,k2")
    pool = EndpointPool(settings, 1, 0.01, lambda m: None, lambda e: None, lambda e, u: None)
    replicas = pool.replicas(settings.test_endpoints, 4)
    first, second = replicas.members
    assert pool.pick(replicas.members) is first
    pool.live.endpoints["http://a.invalid/v1"].assigned = 2  # calls handed to it, sent or not yet
    assert pool.pick(replicas.members) is second
    pool.live.endpoints["http://b.invalid/v1"].assigned = 3
    assert pool.pick(replicas.members) is first
    assert [m.endpoint.api_key for m in replicas.members] == ["k1", "k2"]


def test_a_url_listed_twice_with_two_keys_is_two_endpoints():
    settings = Settings(base_url="http://a.invalid/v1,http://a.invalid/v1", api_key="fake-key-one,fake-key-two")
    pool = EndpointPool(settings, 1, 0.01, lambda m: None, lambda e: None, lambda e, u: None)
    replicas = pool.replicas(settings.test_endpoints, 4)
    labels = [m.endpoint.label for m in replicas.members]
    assert labels == ["http://a.invalid/v1 (key 1)", "http://a.invalid/v1 (key 2)"]
    assert "fake-key" not in json.dumps(pool.snapshot())


def test_the_connection_check_asks_each_endpoint_and_names_it(server, tmp_path):
    dead = "http://127.0.0.1:9/v1"
    settings = Settings(
        base_url=f"{server.base_url},{dead}", model_test="test-model", model_grader="grader-model", timeout=5.0
    )
    results = asyncio.run(check_connection(settings))
    live_lines = [r for r in results if r.name.endswith(f"at {server.base_url}")]
    dead_lines = [r for r in results if r.name.endswith(f"at {dead}")]
    assert live_lines and all(r.ok for r in live_lines)
    assert len(dead_lines) == 1 and not dead_lines[0].ok and "connection refused" in dead_lines[0].message


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            "BASE_URL=http://a.invalid/v1,,http://b.invalid/v1\n",
            "hbtui: error: BASE_URL (.env:1): endpoint 2 of 3 is empty (a stray comma?)",
        ),
        (
            "BASE_URL=http://a.invalid/v1,http://b.invalid/v1\nAPI_KEY=fake-k1,fake-k2,fake-k3\n",
            "hbtui: error: API_KEY lists 3 keys for 2 endpoints in BASE_URL (more keys than endpoints): give one"
            " key for every endpoint, or one per endpoint in the same order",
        ),
        (
            "BASE_URL=http://a.invalid/v1,http://b.invalid/v1,http://c.invalid/v1\nAPI_KEY=fake-k1,fake-k2\n",
            "hbtui: error: API_KEY lists 2 keys for 3 endpoints in BASE_URL (neither one key nor one per endpoint):"
            " give one key for every endpoint, or one per endpoint in the same order",
        ),
        (
            "GRADER_BASE_URL=http://g.invalid/v1\nGRADER_API_KEY=fake-g1,fake-g2\n",
            "hbtui: error: GRADER_API_KEY lists 2 keys for 1 endpoint in GRADER_BASE_URL (more keys than endpoints):"
            " give one key for every endpoint, or one per endpoint in the same order",
        ),
        (
            "API_KEY=fake-k1,,fake-k3\n",
            "hbtui: error: API_KEY (.env:2): key 2 of 3 is empty (a stray comma?)",
        ),
    ],
)
def test_a_bad_endpoint_list_gets_one_line(tmp_path, monkeypatch, capsys, small_dataset, env, expected):
    monkeypatch.chdir(tmp_path)
    for key in ("BASE_URL", "API_KEY", "GRADER_BASE_URL", "GRADER_API_KEY", "MODEL_TEST", "MODEL_GRADER"):
        monkeypatch.delenv(key, raising=False)
    base = "BASE_URL=http://a.invalid/v1\n" if not env.startswith("BASE_URL") else ""
    (tmp_path / ".env").write_text(base + env + "MODEL_TEST=m\nMODEL_GRADER=g\n")
    code = cli.main(["run", "--data", str(small_dataset), "--db", str(tmp_path / "x.sqlite")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [expected]
    assert "fake-k" not in "\n".join(err) and "fake-g" not in "\n".join(err)


def test_keys_are_stored_masked_and_never_whole():
    settings = Settings(
        base_url="http://a/v1,http://b/v1", api_key="fake-0123456789abcdefghij,fake-zyxwvutsrq9876543210"
    )
    public = settings.public_dict()
    assert public["base_url"] == "http://a/v1,http://b/v1"
    assert "0123456789" not in json.dumps(public) and "9876543" not in json.dumps(public)
    with pytest.raises(SettingsError, match="2 keys for 1 endpoint"):
        Settings(base_url="http://a/v1", api_key="k1,k2", model_test="m", model_grader="g").require_models()


def test_an_endpoint_is_set_aside_on_a_refused_connection_and_back_when_it_answers(monkeypatch):
    from hbtui.client.chat import CONNECTION, CallRecord
    from hbtui.engine import endpoint_pool

    clock = [1000.0]
    monkeypatch.setattr(endpoint_pool.time, "monotonic", lambda: clock[0])
    notes: list[str] = []
    settings = Settings(base_url="http://a.invalid/v1,http://b.invalid/v1")
    pool = EndpointPool(settings, 1, 0.01, notes.append, lambda e: None, lambda e, u: None)
    first, second = pool.replicas(settings.test_endpoints, 4).members
    pool.on_call(CallRecord("http://a.invalid/v1", True, None, 5.0))
    clock[0] += 1
    pool.on_call(CallRecord("http://b.invalid/v1", False, CONNECTION, 1.0, "connection refused"))
    states = {url: figures["state"] for url, figures in pool.snapshot()["endpoints"].items()}
    assert states == {"http://a.invalid/v1": "live", "http://b.invalid/v1": "set aside"}
    assert pool.pick([first, second]) is first and any("set aside" in note for note in notes)
    clock[0] += endpoint_pool.SET_ASIDE_SECONDS + 0.1  # due a try again: one call
    pool.live.endpoints["http://a.invalid/v1"].assigned = 3
    assert pool.pick([first, second]) is second
    pool.on_call(CallRecord("http://b.invalid/v1", True, None, 5.0))
    clock[0] += 1
    figures = pool.snapshot()["endpoints"]
    assert figures["http://b.invalid/v1"]["state"] == "live"
    assert figures["http://a.invalid/v1"]["rate"] > 0 and figures["http://b.invalid/v1"]["rate"] > 0


def test_one_endpoint_is_never_set_aside():
    from hbtui.client.chat import CONNECTION, CallRecord

    settings = Settings(base_url="http://a.invalid/v1")
    pool = EndpointPool(settings, 1, 0.01, lambda m: None, lambda e: None, lambda e, u: None)
    pool.replicas(settings.test_endpoints, 4)
    pool.on_call(CallRecord("http://a.invalid/v1", False, CONNECTION, 1.0, "connection refused"))
    assert pool.snapshot()["endpoints"]["http://a.invalid/v1"]["state"] == "live"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_monitor_shows_each_endpoints_rate_and_state(tmp_path, size):
    import time

    from hbtui.tui.app import HBTuiApp
    from hbtui.tui.screens.monitor import MonitorScreen
    from tests.support.synth import synthesize_run
    from tests.support.tui import screen_text, wait_for

    db = tmp_path / "hbtui.sqlite"
    endpoints = {
        "http://gpu1.example:8000/v1": {"in_flight": 7, "limit": 8, "calls": 90, "successes": 90, "rate": 12.5},
        "http://gpu2.example:8000/v1": {"in_flight": 0, "limit": 8, "calls": 30, "successes": 20, "rate": 0.0},
    }
    endpoints["http://gpu1.example:8000/v1"]["state"] = "live"
    endpoints["http://gpu2.example:8000/v1"]["state"] = "set aside"
    async with await Store.open(db) as store:
        run_id = await synthesize_run(store, conversations=5, criteria_per=2)
        lease = await store.claim_run(run_id, "gpu-box:4242")
        await store.heartbeat(run_id, lease, {"paused": False, "started_at": time.time(), "endpoints": endpoints})
        run = await store.get_run(run_id)
    app = HBTuiApp(settings=Settings(db_path=str(db)), env_file=None, monitor_run=run.name)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        await pilot.pause(0.2)
        text = screen_text(app)
    lines = text.splitlines()
    gpu1 = next(line for line in lines if "gpu1.exam" in line)
    gpu2 = next(line for line in lines if "gpu2.exam" in line)
    assert "7/8 12.5/s live gpu1.example:8000" in gpu1 and "0/8 set aside gpu2.example:8000" in gpu2
    assert lines.index(gpu2) < lines.index(gpu1)  # set aside first: what to look at


def test_many_endpoints_take_three_rows_at_most():
    from hbtui.tui.screens.monitor import endpoint_rows

    endpoints = {f"http://gpu{n}:8000/v1": (4, 8, 10.0, "live") for n in range(6)}
    endpoints["http://gpu5:8000/v1"] = (0, 8, 0.0, "set aside")
    rows = [text.plain for _, text in endpoint_rows(endpoints)]
    assert len(rows) == 3
    assert rows[0].startswith("0/8 set aside gpu5:8000")
    assert rows[2] == "16 40.0/s  4 more endpoints"


def test_a_database_of_the_schema_before_gets_the_endpoint_columns(tmp_path):
    from hbtui.store import schema
    from tests.support.old_schema import make_database_before

    db = tmp_path / "old.sqlite"
    make_database_before(db, schema.MIGRATE_ADD_ENDPOINTS)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO runs (name, status, created_at, dataset_name, dataset_sha256, model_test,"
            " model_grader, settings_json, plan_json, n_conversations, n_criteria) VALUES"
            " ('old', 'finished', 0, 'd', 'x', 'm', 'g', '{\"base_url\": \"http://a/v1\"}', '{}', 0, 0)"
        )

    async def read():
        async with await Store.open(db) as store:
            return await store.resolve_run("old")

    run = asyncio.run(read())
    assert Settings(base_url=run.settings["base_url"]).test_endpoints == [("http://a/v1", None)]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        for table in ("conversations", "verdicts"):
            assert "endpoint" in [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def test_the_check_command_names_each_endpoint(server, tmp_path, monkeypatch, capsys):
    dead = "http://127.0.0.1:9/v1"
    monkeypatch.chdir(tmp_path)
    for key in ("BASE_URL", "API_KEY", "GRADER_BASE_URL", "GRADER_API_KEY", "MODEL_TEST", "MODEL_GRADER"):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url},{dead}\nAPI_KEY=fake-key-a,fake-key-b\nMODEL_TEST=test-model\n"
        "MODEL_GRADER=grader-model\nTIMEOUT=5\n"
    )
    code = cli.main(["check"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"ok   test endpoint at {server.base_url}: reachable" in out
    assert f"FAIL test endpoint at {dead}: unreachable: connection refused" in out
    assert "fake-key" not in out


async def test_a_call_queued_for_an_endpoint_set_aside_meanwhile_is_not_sent(server):
    from hbtui.client.chat import CONNECTION, ChatClient
    from hbtui.client.limiter import AdaptiveLimiter
    from hbtui.client.wire import ChatError, Endpoint

    client = ChatClient(Endpoint(server.base_url), limiter=AdaptiveLimiter(1))
    try:
        with pytest.raises(ChatError) as moved:
            await client.complete("test-model", [{"role": "user", "content": "hi"}], leave=lambda: True)
    finally:
        await client.aclose()
    assert moved.value.kind == CONNECTION and moved.value.attempts == 0
    assert server.stats()["requests"] == 0 and client.limiter.in_flight == 0


def test_the_check_command_refuses_keys_that_match_no_endpoint_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for key in ("BASE_URL", "API_KEY", "GRADER_BASE_URL", "GRADER_API_KEY", "MODEL_TEST", "MODEL_GRADER"):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / ".env").write_text("BASE_URL=http://a.invalid/v1\nAPI_KEY=fake-key-a,fake-key-b\n")
    assert cli.main(["check"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "hbtui: error: API_KEY lists 2 keys for 1 endpoint in BASE_URL (more keys than endpoints): give one key"
        " for every endpoint, or one per endpoint in the same order"
    ]


def test_the_grader_pairs_its_own_lists_or_shares_the_model_under_tests():
    own = Settings(base_url="http://a/v1", grader_base_url="http://g1/v1,http://g2/v1", grader_api_key="x,y")
    assert own.grader_endpoints == [("http://g1/v1", "x"), ("http://g2/v1", "y")]
    shared = Settings(base_url="http://a/v1,http://b/v1", api_key="k1,k2")
    assert shared.grader_endpoints == shared.test_endpoints == [("http://a/v1", "k1"), ("http://b/v1", "k2")]
    own_key = Settings(base_url="http://a/v1,http://b/v1", api_key="k1,k2", grader_api_key="gk")
    assert own_key.grader_endpoints == [("http://a/v1", "gk"), ("http://b/v1", "gk")]


def test_each_endpoint_has_its_own_adaptive_limit():
    settings = Settings(base_url="http://a.invalid/v1,http://b.invalid/v1")
    pool = EndpointPool(settings, 1, 0.01, lambda m: None, lambda e: None, lambda e, u: None)
    first, second = pool.replicas(settings.test_endpoints, 10).members
    first.limiter.rate_limited()  # a 429 from the first shrinks its limit alone
    assert (first.limiter.limit, second.limiter.limit) == (7, 10)
    figures = pool.snapshot()["endpoints"]
    assert (figures["http://a.invalid/v1"]["limit"], figures["http://b.invalid/v1"]["limit"]) == (7, 10)


async def test_calls_handed_out_at_once_are_spread_before_any_is_sent(server, second_server):
    # At the start every worker asks at once: none is in flight yet, and the first call of each
    # shape goes alone (the others wait before the limiter), so in-flight counts alone would send
    # them all to the first endpoint.
    settings = Settings(base_url=f"{server.base_url},{second_server.base_url}", timeout=10.0)
    server.control(latency_ms=50)
    second_server.control(latency_ms=50)
    pool = EndpointPool(settings, 1, 0.01, lambda m: None, lambda e: None, lambda e, u: None)
    replicas = pool.replicas(settings.test_endpoints, 4)
    try:
        results = await asyncio.gather(
            *(replicas.complete("test-model", [{"role": "user", "content": f"q{n}"}]) for n in range(8))
        )
    finally:
        await pool.aclose()
    assert Counter(result.endpoint for result in results) == {server.base_url: 4, second_server.base_url: 4}


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_monitors_endpoints_panel_as_pictured(snap_compare, tmp_path, size):
    import time

    from hbtui.tui.app import HBTuiApp
    from hbtui.tui.screens.monitor import MonitorScreen
    from tests.support.synth import synthesize_run
    from tests.support.tui import wait_for

    db = tmp_path / "hbtui.sqlite"
    figures = {"calls": 90, "successes": 90}
    endpoints = {
        "http://gpu1.example:8000/v1": {"in_flight": 7, "limit": 8, "rate": 12.5, "state": "live", **figures},
        "http://gpu2.example:8000/v1": {"in_flight": 0, "limit": 8, "rate": 0.0, "state": "set aside", **figures},
        "http://gpu3.example:8000/v1": {"in_flight": 8, "limit": 8, "rate": 13.1, "state": "live", **figures},
    }

    async def make() -> str:
        async with await Store.open(db) as store:
            run_id = await synthesize_run(store, conversations=5, criteria_per=2)
            # A driver named the same on every machine: this host's name and a pid would make the
            # picture differ from one run of the test to the next.
            lease = await store.claim_run(run_id, "gpu-box:4242")
            await store.heartbeat(run_id, lease, {"paused": False, "started_at": time.time(), "endpoints": endpoints})
            return (await store.get_run(run_id)).name

    name = asyncio.run(make())
    app = HBTuiApp(settings=Settings(db_path=str(db)), env_file=None, monitor_run=name)

    async def ready(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.view is not None)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_the_monitor_names_endpoints_by_what_tells_them_apart():
    """At 80 columns the host and port must show whole: the scheme and a path every endpoint
    shares are left out, a path that differs is kept, and a key's position stays."""
    from hbtui.tui.screens.monitor import endpoint_names

    shared = ["http://gpu1.example:8000/v1", "http://gpu2.example:8000/v1 (key 2)"]
    assert list(endpoint_names(shared).values()) == ["gpu1.example:8000", "gpu2.example:8000 (key 2)"]
    differing = ["http://a:1/v1", "https://b:1/openai/v1"]
    assert list(endpoint_names(differing).values()) == ["a:1/v1", "b:1/openai/v1"]
