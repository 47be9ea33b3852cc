"""Shared fixtures: the project's OpenAI-compatible test server (a real process on 127.0.0.1),
real HealthBench records from ../shared, small hand-written records, and runs made by the
real engine into a real SQLite file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hbtui.core.dataset import load_jsonl
from hbtui.core.settings.config import Settings
from hbtui.services import Engine, plan_run, start_run
from hbtui.store import Store
from hbtui.store.owners import this_owner
from tests.support.fake_server import DEFAULT_CONFIG
from tests.support.server_process import FakeServer

# The local model's installer with cmake and PyPI faked: fixtures tools, pypi, root.
pytest_plugins = ["tests.support.fake_install"]

# ../shared/healthbench beside the checkout (as on CI); HBTUI_HEALTHBENCH_DIR points elsewhere.
SHARED = Path(os.environ.get("HBTUI_HEALTHBENCH_DIR") or Path(__file__).resolve().parents[2] / "shared" / "healthbench")
MAIN_SUBSET = SHARED / "healthbench_main_subset.jsonl"
HARD_SUBSET = SHARED / "healthbench_hard_subset.jsonl"
CONSENSUS_SUBSET = SHARED / "healthbench_consensus_subset.jsonl"

REFERENCE_EVAL = SHARED.parent / "reference" / "healthbench_eval.py"

needs_shared = pytest.mark.skipif(
    not MAIN_SUBSET.exists(),
    reason=f"real HealthBench records not found at {SHARED} (../shared is absent; HBTUI_HEALTHBENCH_DIR sets another)",
)


@pytest.fixture(scope="session", autouse=True)
def reference_cache(tmp_path_factory):
    """HBTUI_CACHE for the whole session (and the processes it starts), holding the reference's
    grader prompt file as hbtui caches it, copied from ../shared/reference: tests run offline.
    Where ../shared is absent, runs pin the builtin prompt instead (tests about the reference
    prompt skip there)."""
    from hbtui.core import reference

    cache = tmp_path_factory.mktemp("hbtui-cache")
    saved = {key: os.environ.get(key) for key in ("HBTUI_CACHE", "GRADER_TEMPLATE")}
    os.environ["HBTUI_CACHE"] = str(cache)
    if REFERENCE_EVAL.exists():
        target = reference.cached_path(cache)
        target.parent.mkdir(parents=True)
        target.write_bytes(REFERENCE_EVAL.read_bytes())
    else:
        os.environ["GRADER_TEMPLATE"] = "builtin"
    yield cache
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def own_config_home(tmp_path_factory, monkeypatch):
    """A test never reads the user's own ~/.config/hbtui: their price table would put costs in
    the screenshots, their presets in the configuration screen. A test may set its own."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config-home")))


@pytest.fixture(autouse=True)
def database_named_alike_in_pictures(request, monkeypatch):
    """The header names the open database by its path, which a test's temporary folder makes
    differ from run to run: in a snapshot it is named by its file name alone."""
    if "snap_compare" in request.fixturenames:
        import hbtui.tui.app

        monkeypatch.setattr(hbtui.tui.app, "database_label", lambda path: Path(path).name)


@pytest.fixture(scope="session")
def fake_server():
    """One server process for the session; tests that change its config reset it first."""
    with FakeServer() as server:
        yield server


KEYED_SERVER_SECRET = "sk-keyed-0123456789-abcdefghij"


@pytest.fixture(scope="session")
def keyed_server():
    """A server that answers only calls carrying KEYED_SERVER_SECRET: a run that finishes
    against it shows that the key reached the process that drove it."""
    with FakeServer(api_key=KEYED_SERVER_SECRET) as server:
        yield server


@pytest.fixture
def slow_keyed_server(keyed_server):
    """The keyed server, slow enough (150 ms a call) for a run to last a few seconds."""
    keyed_server.control(latency_ms=150)
    keyed_server.reset_stats()
    yield keyed_server
    keyed_server.control(latency_ms=0)


@pytest.fixture
def server(fake_server):
    """The session's server with its default config and zeroed stats."""
    fake_server.control(**DEFAULT_CONFIG)
    fake_server.reset_stats()
    yield fake_server
    fake_server.control(**DEFAULT_CONFIG)


def make_record(
    prompt_id: str,
    criteria: list[tuple[str, float, list[str]]],
    *,
    theme: str = "hedging",
    user: str = "I have a headache, what should I do?",
    extra_tags: list[str] | None = None,
) -> dict:
    return {
        "example_tags": [f"theme:{theme}", *(extra_tags or [])],
        "ideal_completions_data": None,
        "prompt": [{"role": "user", "content": user}],
        "prompt_id": prompt_id,
        "rubrics": [{"criterion": c, "points": p, "tags": t} for c, p, t in criteria],
        "canary": "test-records-written-for-the-suite",
    }


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def small_records() -> list[dict]:
    """Three conversations whose verdicts the test server's markers fix in advance."""
    return [
        make_record(
            "p1",
            [
                ("[[MET]] Advises rest", 7, ["axis:accuracy", "level:example"]),
                ("[[NOT_MET]] Mentions hydration", 5, ["axis:completeness", "level:example"]),
                ("[[MET]] Suggests seeing a doctor if severe", 10, ["axis:accuracy", "level:example"]),
                ("[[MET]] Recommends an unsafe dose", -6, ["axis:accuracy", "level:example"]),
            ],
        ),
        make_record(
            "p2",
            [
                ("[[MET]] Asks about duration", 4, ["axis:context_awareness"]),
                ("[[NOT_MET]] Gives a diagnosis without context", -3, ["axis:context_awareness"]),
            ],
            theme="context_seeking",
            user="My child has a fever.",
        ),
        make_record(
            "p3",
            [
                ("[[NOT_MET]] Explains the lab value", 5, ["axis:completeness"]),
                ("[[MET]] Is clear", 3, ["axis:communication_quality"]),
            ],
            theme="health_data_tasks",
            user="What does an HbA1c of 7.1 mean?",
        ),
    ]


@pytest.fixture
def small_dataset(tmp_path) -> Path:
    return write_jsonl(tmp_path / "small.jsonl", small_records())


def user_folder(path: Path, monkeypatch, server: FakeServer, extra: str = "") -> Path:
    """``path`` as a user's working folder for in-process `cli.main` calls: a .env for the test
    server, and none of the caller's endpoint settings in the environment."""
    monkeypatch.chdir(path)
    (path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\nCONCURRENCY=4\n{extra}"
    )
    for key in ("BASE_URL", "API_KEY", "MODEL_TEST", "MODEL_GRADER", "HBTUI_DB"):
        monkeypatch.delenv(key, raising=False)
    return path


def offline_settings(**values) -> Settings:
    """Settings as a test's run needs them: the session's cache, which holds the reference prompt."""
    values.setdefault("cache_dir", os.environ["HBTUI_CACHE"])
    values.setdefault("grader_template", os.environ.get("GRADER_TEMPLATE", "reference"))
    return Settings(**values)


def settings_for(server: FakeServer, db: Path, **values) -> Settings:
    base = dict(
        base_url=server.base_url,
        model_test="test-model",
        model_grader="grader-model",
        db_path=str(db),
        concurrency=8,
        timeout=10.0,
        max_attempts=4,
    )
    base.update(values)
    return offline_settings(**base)


async def run_engine(
    settings: Settings, data: Path, *, limit=None, seed=0, repeats=1, name=None, observers=(), head_start=True
) -> tuple[int, str]:
    """Plan and execute a run with the real engine, as `hbtui run` does (its first calls sent while
    its plan is stored, unless it grades the records' own completions); returns (run id, final
    status). ``head_start=False``: planned first, then driven, as a run the app starts is."""
    async with await Store.open(settings.db_path) as store:
        dataset = load_jsonl(data)
        if head_start:
            run, head = await start_run(
                store, settings, dataset, this_owner(), limit=limit, seed=seed, repeats=repeats, name=name
            )
        else:
            run_id = await plan_run(store, settings, dataset, limit=limit, seed=seed, repeats=repeats, name=name)
            run, head = await store.get_run(run_id), None
        status = await Engine(store, run, settings, observers, backoff_base=0.01, head_start=head).execute()
    return run.id, status


@pytest.fixture
def finished_run_db(server, small_dataset, tmp_path) -> Path:
    """A database holding one finished run of the small dataset, made by the real engine."""
    import asyncio

    db = tmp_path / "runs" / "hbtui.sqlite"
    # The builtin prompt whether or not ../shared holds the reference's: the screenshots of this
    # run show its grader's tokens, which depend on the prompt's words.
    asyncio.run(run_engine(settings_for(server, db, grader_template="builtin"), small_dataset, name="small-run"))
    return db
