"""The two small dialogs of presets: name the current settings, pick saved ones."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from hbtui.tui.handle import AppModal
from hbtui.tui.widgets.ordered_input import OrderedInput


class PresetNameModal(AppModal[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="preset_name.cancel")]

    def __init__(
        self, question: str = "Save these settings as preset (API keys are left out):", value: str = ""
    ) -> None:
        super().__init__()
        self.question, self.value = question, value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question))
            yield OrderedInput(self.value, placeholder="preset name", id="preset-name")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PresetPickerModal(AppModal[str | None]):
    """Pick a preset to load; the saved ones can be renamed and deleted here too."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="preset_picker.cancel"),
        Binding("r", "rename", "Rename preset", id="preset_picker.rename"),
        Binding("d,delete", "delete", "Delete preset", id="preset_picker.delete"),
    ]

    def __init__(self, names: list[str], read_only: set[str] | frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.names = names
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text("Load a preset (enter loads, r renames, d deletes, escape cancels):"))
            yield OptionList(id="preset-list")
            yield Static(id="preset-status")

    def on_mount(self) -> None:
        self._list_names()

    def _list_names(self) -> None:
        options = self.query_one("#preset-list", OptionList)
        highlighted = options.highlighted
        options.clear_options()
        options.add_options(
            Option(
                Text(name + (" (built in: requests as simple-evals sends them)" if name in self.read_only else "")),
                id=str(i),
            )
            for i, name in enumerate(self.names)
        )
        if self.names:
            options.highlighted = min(highlighted or 0, len(self.names) - 1)

    def _say(self, message: str) -> None:
        self.query_one("#preset-status", Static).update(Text(message))

    def _highlighted_saved(self, verb: str) -> str | None:
        """The preset under the cursor, if it is one of the user's (built-in ones stay)."""
        index = self.query_one("#preset-list", OptionList).highlighted
        if index is None:
            return None
        name = self.names[index]
        if name in self.read_only:
            self._say(f"{name!r} is built in: it cannot be {verb}")
            return None
        return name

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.names[int(event.option.id or 0)])

    def action_rename(self) -> None:
        from hbtui.core.settings.presets import PresetError, rename_preset

        old = self._highlighted_saved("renamed")
        if old is None:
            return

        def named(new: str | None) -> None:
            if not new or new == old:
                return
            try:
                rename_preset(old, new)
            except PresetError as exc:
                self._say(str(exc))
                return
            self.names = [new if name == old else name for name in self.names]
            self._list_names()
            self._say(f"renamed {old!r} to {new!r}")

        self.app.push_screen(PresetNameModal(f"New name of preset {old!r}:", old), named)

    def action_delete(self) -> None:
        from hbtui.core.settings.presets import PresetError, delete_preset
        from hbtui.tui.screens.confirm import ConfirmModal

        name = self._highlighted_saved("deleted")
        if name is None:
            return

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            try:
                delete_preset(name)
            except PresetError as exc:
                self._say(str(exc))
                return
            self.names = [other for other in self.names if other != name]
            self._list_names()
            self._say(f"deleted preset {name!r}")

        self.app.push_screen(ConfirmModal(f"Delete preset {name!r}?", yes="Delete", no="Keep"), answered)

    def action_cancel(self) -> None:
        self.dismiss(None)
