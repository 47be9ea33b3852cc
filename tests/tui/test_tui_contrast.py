"""The selected criterion is the block a reviewer reads before `w` or `f`: every character of it
must stand out from its background, in truecolor and in the 256 colours an SSH session gives.

The lines are taken as the terminal gets them (the widget's strips through the app's own line
filters), and each character's contrast is WCAG's ratio of relative luminances.
"""

from __future__ import annotations

import pytest
from rich.color import Color as RichColor
from rich.color import ColorSystem
from textual.color import Color
from textual.filter import dim_color

from hbtui.tui.screens.conversation import ConversationScreen
from hbtui.tui.widgets.verdict_list import VerdictList
from tests.support.browser_harness import browser_app
from tests.tui.test_tui_snapshots_browser import browse, snapshot_db  # noqa: F401 - a fixture

MIN_CONTRAST = 4.5  # WCAG AA for body text


def luminance(rgb: tuple[int, int, int]) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def as_drawn(color: RichColor, system: ColorSystem) -> tuple[int, int, int]:
    triplet = color.downgrade(system).get_truecolor()
    return triplet.red, triplet.green, triplet.blue


def weakest_characters(widget: VerdictList, system: ColorSystem) -> list[tuple[float, str]]:
    """(contrast, text) of each run of characters of the selected criterion, weakest first."""
    app = widget.app
    background = widget.background_colors[1]
    default_fg = widget.styles.color
    found = []
    for y in widget.lines_of(widget.selected):
        strip = widget.render_line(y)
        for line_filter in app.get_line_filters():
            strip = strip.apply_filter(line_filter, background)
        for segment in strip:
            if not segment.text.strip(" █▌") or segment.style is None:  # the bar is a swatch, not text
                continue
            style = segment.style
            bg = Color.from_rich_color(style.bgcolor) if style.bgcolor else background
            fg = Color.from_rich_color(style.color) if style.color else default_fg
            if style.dim:  # as the terminal draws dim text: halfway to the background
                fg = dim_color(bg, fg)
            pair = [as_drawn(c.rich_color, system) for c in (fg, bg)]
            found.append((round(contrast(*pair), 2), segment.text.strip()[:30]))
    return sorted(found)


@pytest.mark.parametrize(
    "keys",
    [("2", "p", "enter", "p"), ("2", "e", "enter", "e"), ("2", "p", "enter", "m"), ("2", "p", "enter", "j")],
    ids=["penalty", "grader-error", "missed", "next"],
)
@pytest.mark.parametrize("system", [ColorSystem.TRUECOLOR, ColorSystem.EIGHT_BIT], ids=["truecolor", "256"])
async def test_the_selected_criterion_reads_at_a_contrast_of_at_least_4_5(snapshot_db, keys, system):  # noqa: F811
    db, run_id = snapshot_db
    app = browser_app(db)
    async with app.run_test(size=(120, 40)) as pilot:
        await browse(run_id, *keys[:-1], conversation=True)(pilot)
        await pilot.press(keys[-1])
        await pilot.pause()
        assert isinstance(app.screen, ConversationScreen)
        widget = app.screen.query_one(VerdictList)
        assert widget.selected >= 0, "a criterion is selected"
        weakest = weakest_characters(widget, system)
        assert weakest, "the selected criterion drew text"
        assert weakest[0][0] >= MIN_CONTRAST, weakest[:5]


@pytest.mark.parametrize(
    "picture, snapshot",
    [
        ("conversation.svg", "test_tui_snapshots_review/test_conversation_flipped_and_flagged_by_keyboard[120x40].svg"),
        ("configuration.svg", "test_tui_snapshots_app/test_configuration_screen[80x24].svg"),
    ],
)
def test_the_readmes_pictures_are_the_app_as_it_draws_today(picture, snapshot):
    """The README's selected criterion and focused field are snapshots: a change of the app's
    look changes both, and the test says which picture to copy again."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    shown = root / "tests" / "tui" / "__snapshots__" / snapshot
    assert (root / "docs" / picture).read_bytes() == shown.read_bytes(), f"cp '{shown}' docs/{picture}"
    assert f"docs/{picture}" in (root / "README.md").read_text()
