"""The event loop of the commands that make calls: uvloop's where it is installed, asyncio's where
it is not (Windows, or a user who removed it), with the same run either way."""

import asyncio
import sys

import pytest

from hbtui import cli
from hbtui.engine import driver


@pytest.fixture
def workdir(tmp_path, server, monkeypatch):
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\nCONCURRENCY=4\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_and_see_its_loop(monkeypatch, small_dataset) -> tuple[int, str]:
    """(exit code, module of the loop's class) of `hbtui run` on the small dataset."""
    loops = []
    execute = driver.Engine.execute

    async def execute_and_note_the_loop(self):
        loops.append(type(asyncio.get_running_loop()).__module__)
        return await execute(self)

    monkeypatch.setattr(driver.Engine, "execute", execute_and_note_the_loop)
    code = cli.main(["run", "--data", str(small_dataset), "--name", "loop"])
    return code, loops[0]


def test_a_run_goes_on_uvloop_where_it_is_installed(workdir, small_dataset, monkeypatch):
    pytest.importorskip("uvloop")
    code, loop = run_and_see_its_loop(monkeypatch, small_dataset)
    assert code == cli.EXIT_OK
    assert loop.startswith("uvloop")


def test_a_run_goes_on_asyncio_s_loop_without_uvloop(workdir, small_dataset, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError, as where it is absent
    code, loop = run_and_see_its_loop(monkeypatch, small_dataset)
    assert code == cli.EXIT_OK
    assert loop.startswith("asyncio")
    assert (workdir / "runs" / "hbtui.sqlite").exists()


def test_a_run_collects_cycles_rarely_while_it_calls_and_leaves_the_collector_as_it_was(
    workdir, small_dataset, monkeypatch
):
    # While the calls go: young collections at RUN_GC_THRESHOLD, none while the dataset is read;
    # after the command (a test, the app) the collector is as it was.
    from hbtui.cli import runs

    seen = {}
    execute = driver.Engine.execute

    async def execute_and_note_the_collector(self):
        import gc

        seen["during"] = (gc.isenabled(), gc.get_threshold()[0])
        return await execute(self)

    monkeypatch.setattr(driver.Engine, "execute", execute_and_note_the_collector)
    read = runs.records_of

    def records_noting_the_collector(*args):
        import gc

        seen["reading"] = gc.isenabled()
        return read(*args)

    monkeypatch.setattr(runs, "records_of", records_noting_the_collector)
    import gc

    before = (gc.isenabled(), gc.get_threshold())
    assert cli.main(["run", "--data", str(small_dataset), "--name", "gc"]) == cli.EXIT_OK
    assert seen == {"reading": False, "during": (True, runs.RUN_GC_THRESHOLD)}
    assert (gc.isenabled(), gc.get_threshold()) == before
