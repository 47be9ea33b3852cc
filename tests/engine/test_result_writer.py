"""The writer's group commit: answers wait for the interval, unless half the answers the run may
hold unwritten are waiting, which go at once (the gate would otherwise hold a fast endpoint at low
concurrency, or a regrade served from the cache, to max_unwritten answers an interval). The
HBTUI_COMMIT_INTERVAL knob of the tests holds every batch to its interval."""

from __future__ import annotations

import asyncio

import pytest

from hbtui.engine import result_writer
from hbtui.engine.result_writer import ResultWriter
from tests.store.test_answer_journal import a_run_of_one_conversation, verdict

LIMIT = 8  # answers the writer may hold unwritten


async def settle(writer: ResultWriter, seconds: float = 10.0) -> bool:
    """Whether everything handed over is committed within ``seconds``."""
    deadline = asyncio.get_running_loop().time() + seconds
    while writer.committed < writer.queued:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def held_and_hurried(tmp_path, monkeypatch, early: bool) -> tuple[bool, bool, bool]:
    """(the first answer committed at once, three answers held by the interval, the fourth with
    them committed at once) with an interval of ten minutes."""
    monkeypatch.setattr(result_writer, "COMMIT_INTERVAL", 600.0)
    monkeypatch.setattr(result_writer, "COMMIT_EARLY", early)

    async def go():
        store, run, lease = await a_run_of_one_conversation(tmp_path / "runs.sqlite")
        async with store:
            writer = ResultWriter(
                store, run.id, patience=5, max_unwritten=LIMIT, on_written=lambda: None, on_warning=print
            )
            writer.lease = lease
            writing = asyncio.create_task(writer.run())
            writer.put_answer(verdict(0, 10.0))
            first = await settle(writer)  # the first commit goes at once
            for idx in (1, 2, 3):  # 3 of 8 unwritten: under half
                writer.put_answer(verdict(idx, 10.0 + idx))
            held = not await settle(writer, 0.3)
            writer.put_answer(verdict(4, 14.0))  # 4 of 8: half
            hurried = await settle(writer, 10.0 if early else 0.5)
            await writer.close()
            await writing
            return first, held, hurried

    return asyncio.run(go())


def test_half_the_limit_waiting_is_committed_without_waiting_out_the_interval(tmp_path, monkeypatch):
    assert held_and_hurried(tmp_path, monkeypatch, early=True) == (True, True, True)


def test_the_tests_knob_holds_every_batch_to_its_interval(tmp_path, monkeypatch):
    assert held_and_hurried(tmp_path, monkeypatch, early=False) == (True, True, False)


@pytest.mark.parametrize(("given", "expected"), [(None, (0.15, True)), ("600", (600.0, False)), ("x", (0.15, True))])
def test_the_interval_and_the_knob(monkeypatch, given, expected):
    if given is None:
        monkeypatch.delenv("HBTUI_COMMIT_INTERVAL", raising=False)
    else:
        monkeypatch.setenv("HBTUI_COMMIT_INTERVAL", given)
    assert result_writer._commit_interval() == expected
