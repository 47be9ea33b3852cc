"""One numbering everywhere (issue 13, defect 1): a message names a conversation and a
criterion as the browser shows them (#15, criterion 4, repeat 1 of 2), never by a database key
or a 0-based index."""

from __future__ import annotations

import asyncio
import io
import re
import sqlite3

from hbtui.core.numbering import conversation_label, criterion_label, repeat_label
from hbtui.render.printer import ProgressPrinter
from hbtui.store import Store
from hbtui.tui.monitor_data import RunCounters
from tests.conftest import make_record, run_engine, settings_for, write_jsonl


def test_the_labels_are_one_based_and_repeats_say_of_how_many():
    assert conversation_label(14) == "conversation #15"
    assert conversation_label(14, repeat=0, repeats=2) == "conversation #15 (repeat 1 of 2)"
    assert criterion_label(3, 14, repeat=1, repeats=2) == "criterion 4 of conversation #15 (repeat 2 of 2)"
    assert repeat_label(0, 1) == ""


def test_failures_are_named_as_the_browser_numbers_them_in_the_lines_the_monitor_and_the_store(server, tmp_path):
    # Every third record is too long for the model's context: no reply, for each of its two repeats
    # (and some verdicts fail too: the grader's context is as small).
    records = [
        make_record(f"r{i}", [("c one", 5, []), ("c two", 3, [])], user=f"q{i}" + ("x" * 400) * (i % 3 == 0))
        for i in range(6)
    ]
    data = write_jsonl(tmp_path / "data.jsonl", records)
    server.control(context_chars=300)
    db = tmp_path / "db.sqlite"
    out, counters = io.StringIO(), RunCounters()
    asyncio.run(run_engine(settings_for(server, db), data, repeats=2, observers=[ProgressPrinter(out), counters]))
    with sqlite3.connect(db) as conn:
        failed = conn.execute("SELECT id, position, repeat FROM conversations WHERE status = 'failed'").fetchall()
    assert len(failed) == 4
    expected = {f"conversation #{position + 1} (repeat {repeat + 1} of 2)" for _, position, repeat in failed}

    async def from_store():
        async with await Store.open(db) as store:
            return await store.recent_errors(1, 100)  # what the monitor of another process lists

    printed = {line.split(": no reply")[0] for line in out.getvalue().splitlines() if ": no reply (" in line}
    stored_errors = asyncio.run(from_store())
    stored = {m.split(": no reply")[0] for _, _, m in stored_errors if ": no reply" in m}
    assert printed == expected and stored == expected
    # The monitor of this process keeps the latest few: verdicts that failed, named the same way.
    labelled = re.compile(r"(criterion \d+ of )?conversation #\d+ \(repeat [12] of 2\): ")
    assert counters.recent_errors and all(labelled.match(m) for _, _, m in counters.recent_errors)
    keys = {str(conversation_id) for conversation_id, _, _ in failed}
    shown = out.getvalue() + " ".join(m for _, _, m in [*counters.recent_errors, *stored_errors])
    assert not keys & set(re.findall(r"conversation (\d+)", shown))


def test_the_conversation_header_and_the_comparison_label_every_repeat_of_how_many():
    from hbtui.render.compare_report import repeated
    from hbtui.store.rows import ConversationDetail, ConversationSummary
    from hbtui.tui.screens.conversation import header_text

    def header(repeat: int, repeats: int) -> str:
        summary = ConversationSummary(355, 14, repeat, "p-1", None, "", "generated", 0.5, 3, 1, 0, 0, None)
        return header_text(ConversationDetail(summary, [], [], "reply", None, None, None), 0, 30, repeats).plain

    assert "#15 (repeat 1 of 2)" in header(0, 2) and "#15 (repeat 2 of 2)" in header(1, 2)
    assert "repeat" not in header(0, 1) and "355" not in header(0, 2)
    assert repeated(0, 2) == " repeat 1 of 2" and repeated(0, 1) == ""
