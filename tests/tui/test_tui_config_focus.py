"""The configuration screen's focus (issue 25, item 2): among some thirty fields in one Tab chain
the focused one is seen at a glance, and ctrl+down, ctrl+up and ctrl+f reach a section or a
field without tabbing through the rest."""

from __future__ import annotations

import pytest
from textual.widgets import Label, OptionList

from hbtui.tui.app import HBTuiApp
from hbtui.tui.screens.config_form import SECTION_OF, SECTIONS
from hbtui.tui.screens.picker import PickerModal
from tests.conftest import offline_settings
from tests.support.tui import wait_for
from tests.tui.test_tui_config_form import SIZES, open_form


def label_look(screen, name: str) -> tuple:
    """How the label of field ``name`` is drawn: its colours and text style."""
    label = screen.query_one(f"#row-{name}").query_one(Label)
    style = label.rich_style
    return style.color, style.bgcolor, style.reverse, style.bold


@pytest.mark.parametrize("size", SIZES)
async def test_the_focused_fields_label_is_drawn_apart_from_every_other(tmp_path, size):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=size) as pilot:
        screen = await open_form(pilot, app)
        for name in ("seed", "limit", "temperature_grader"):
            screen.query_one(f"#field-{name}").focus()
            await pilot.pause()
            focused = label_look(screen, name)
            others = {label_look(screen, other) for other in ("timeout", "max_attempts", "repeats") if other != name}
            assert len(others) == 1, "unfocused labels look alike"
            assert focused not in others, f"{name}'s label is drawn as the unfocused ones are"
            assert focused[2], "the focused label is reversed: a marker in the label column"


async def test_ctrl_down_and_up_go_to_the_first_field_of_each_section(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_form(pilot, app)
        titles = [title for title, _ in SECTIONS]
        visited = []
        form = app.screen.query_one("#config-form")
        for index, _ in enumerate(titles):
            await pilot.press("ctrl+down")
            await pilot.pause()
            visited.append(SECTION_OF[app.focused.id.removeprefix("field-")])
            # The section's heading is in view above its field: "Base URL" alone does not say whose.
            heading = app.screen.query_one(f"#section-{(index + 1) % len(titles)}")
            assert form.region.y <= heading.region.y < app.focused.region.y, visited[-1]
        assert visited == titles[1:] + titles[:1], "each section once, in order, then around"
        first_of_grader = next(f.name for title, section in SECTIONS if title == "Grader" for f in section)
        while SECTION_OF[app.focused.id.removeprefix("field-")] != "Grader":
            await pilot.press("ctrl+up")
            await pilot.pause()
        assert app.focused.id == f"field-{first_of_grader}"
        assert app.focused.region.y < 24, "the field is scrolled into view"
        await pilot.pause()
        # Its section's heading is in view above it: "Base URL" alone would not say whose.
        heading, form = app.screen.query_one("#section-1"), app.screen.query_one("#config-form")
        assert str(heading.render()) == "Grader"
        assert form.region.y <= heading.region.y < app.focused.region.y


async def test_ctrl_f_lists_every_field_and_goes_to_the_one_picked(tmp_path):
    app = HBTuiApp(settings=offline_settings(db_path=str(tmp_path / "none.sqlite")), env_file=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_form(pilot, app)
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerModal), what="the field list")
        options = app.screen.query_one(OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert "Data and run: Seed" in labels
        options.highlighted = labels.index("Data and run: Seed")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "field-seed", what="Seed focused")
