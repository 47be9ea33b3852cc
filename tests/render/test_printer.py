"""The headless progress lines (issue 13): every line fits 80 columns, whatever the names and
counts, and names a conversation as the browser numbers it."""

from __future__ import annotations

import io

from hbtui.core.events import CallFailed, CriterionGraded, GenerationFailed, Noted, RunFinished, RunStarted
from hbtui.core.numbering import conversation_label
from hbtui.render.printer import ProgressPrinter

LONG_MODEL = "meta-llama/Llama-3.3-70B-Instruct-Turbo-Free-with-a-very-long-provider-suffix"


def a_big_run_printed() -> list[str]:
    out = io.StringIO()
    printer = ProgressPrinter(out, every=1e9)  # one progress line: at the end
    name = f"{LONG_MODEL}-graded-by-{LONG_MODEL}-2026-11-30T18:00:00"
    printer.on_event(RunStarted(7, name, 5000, 60000, 1200, 37, 14000, 420, 12, scores=[0.5] * 1000))
    failed = conversation_label(4211, repeat=1, repeats=2)
    printer.on_event(GenerationFailed(7, 98765, "context_length", "context too long: " + "x" * 300, 12, failed))
    for _ in range(1234):
        printer.on_event(CallFailed(7, "http://127.0.0.1:1/v1", "transient", "HTTP 503"))
    printer.on_event(CriterionGraded(7, 98765, 3, None, "unparseable", 0.0, 0, 0, "no JSON"))
    printer.on_event(Noted(7, "warning", "y" * 500))
    printer.on_event(RunFinished(7, "finished", 0.4, None))
    return out.getvalue().splitlines()


def test_every_headless_line_fits_80_columns_with_long_model_names():
    lines = a_big_run_printed()
    # But the run's name, printed whole on a line of its own (it is what other commands take).
    assert lines[0] == f"run 7 {LONG_MODEL}-graded-by-{LONG_MODEL}-2026-11-30T18:00:00"
    lines = lines[1:]
    assert lines and all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    text = "\n".join(lines)
    # Nothing is dropped to fit: the figures a long line carried wrap onto an indented line.
    for figure in ("replies 1238/5000", "verdicts 14001/59568", "mean score 0.500", "38 without a reply"):
        assert figure in text
    assert "13 failed to grade" in text and "432 skipped: no reply" in text and "failed attempts 1234" in text
    assert lines[0].strip() == "5000 conversations, 60000 criteria"


def test_a_run_name_that_fits_shares_its_line_with_the_counts():
    out = io.StringIO()
    ProgressPrinter(out, every=1e9).on_event(RunStarted(3, "gpt-4.1-main-20261130-191851", 5, 60, 0, 0, 0, 0, 0))
    assert out.getvalue().splitlines()[0] == "run 3 gpt-4.1-main-20261130-191851: 5 conversations, 60 criteria"


def test_a_conversation_without_a_reply_is_named_as_the_browser_numbers_it():
    lines = a_big_run_printed()
    failed = next(line for line in lines if "no reply (context_length)" in line)
    assert failed.startswith("conversation #4212 (repeat 2 of 2): no reply")
    assert "98765" not in "\n".join(lines)  # the database key never shows


def test_show_names_a_long_run_whole(tmp_path, capsys):
    """A default name grows with the model's and the data's (physician-completions-…-192408 is
    61 characters): `show` prints it whole, as `resume` and `export` take it."""
    import asyncio

    from hbtui.cli import main
    from hbtui.store import Store
    from tests.support.synth import synthesize_run

    name = "physician-completions-healthbench_main_subset-20261130-192408-" + "x" * 30

    async def make():
        async with await Store.open(tmp_path / "db.sqlite") as store:
            await synthesize_run(store, conversations=2, criteria_per=2, name=name)

    asyncio.run(make())
    assert main(["show", name, "--db", str(tmp_path / "db.sqlite")]) == 0
    assert capsys.readouterr().out.startswith(f"run 1 {name} (")
