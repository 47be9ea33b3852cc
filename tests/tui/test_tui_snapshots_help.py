"""The help dialog (`?`) over the runs list, at 80x24 (an SSH session) and 120x40: a picture of
each, and every word of it whole. Rich folds a word longer than its column and Textual cuts a
border title with "…": either leaves a key or a description a reader cannot trust.

Update after an intended change with ``pytest tests/tui/test_tui_snapshots_help.py --snapshot-update``
and look at the SVGs in __snapshots__ before committing them.
"""

from __future__ import annotations

import pytest

from hbtui.core.settings.config import Settings
from hbtui.tui.app import HBTuiApp
from hbtui.tui.keymap import EVERY_SCREEN
from hbtui.tui.keymap import rows as keymap_rows
from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.screens.help import HelpModal
from hbtui.tui.screens.run import RunScreen
from hbtui.tui.screens.runs import RunsScreen
from tests.tui.test_tui_snapshots_app import frozen_run_db, settle, utc  # noqa: F401 - fixtures

SIZES = [(80, 24), (120, 40)]


async def open_help(pilot, depth: int = 0) -> None:
    """`?` over the runs list, or ``depth`` screens further in (the run, then its first conversation)."""
    app = pilot.app
    await settle(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.table.row_count == 1)
    for screen, keys in ((RunScreen, ["enter"]), (ConversationScreen, ["2", "enter"]))[:depth]:
        await pilot.press(*keys)
        await settle(pilot, lambda screen=screen: isinstance(app.screen, screen))
    await pilot.press("question_mark")
    await settle(pilot, lambda: isinstance(app.screen, HelpModal))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_dialog(snap_compare, frozen_run_db, size):  # noqa: F811 - the fixture imported above
    app = HBTuiApp(settings=Settings(db_path=str(frozen_run_db)), env_file=None)
    assert snap_compare(app, terminal_size=size, run_before=open_help)


def rendered_words(widget) -> set[str]:
    """Every word the widget draws, its whole height (the dialog scrolls), one line at a time."""
    lines = widget.render_lines(widget.size.region)
    return {word for strip in lines for word in strip.text.split()}


@pytest.mark.parametrize("depth", [0, 1, 2], ids=["runs", "run", "conversation"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_no_word_of_the_help_is_cut(frozen_run_db, size, depth):  # noqa: F811 - the fixture imported above
    app = HBTuiApp(settings=Settings(db_path=str(frozen_run_db)), env_file=None)
    async with app.run_test(size=size) as pilot:
        await open_help(pilot, depth)
        modal = app.screen
        drawn = rendered_words(modal.query_one("#help-table")) | rendered_words(modal.query_one("#help-keymap"))
        texts = [text for row in modal.rows for text in row]
        # The keymap leaves out the app's own keys: the "everywhere" rows above list them.
        texts += [text for row in keymap_rows() if row[0] != EVERY_SCREEN for text in row]
        cut = sorted({word for text in texts for word in text.split() if word not in drawn})
        assert cut == [], f"words folded or cut at {size}: {cut}"
        frame = "\n".join(strip.text for strip in modal._compositor.render_strips())
        for title in (modal.title_text, "escape closes"):
            assert f" {title} " in frame, f"the border's {title!r} is cut at {size}"


def test_the_help_lists_the_apps_own_keys_once():
    """Under "everywhere" (quit, help, back), not again as the keymap's "every screen" group."""
    from hbtui.tui.screens.help import HelpModal

    groups = [str(cell) for cell in HelpModal.keymap().columns[0]._cells]
    assert "runs" in groups and EVERY_SCREEN not in groups
