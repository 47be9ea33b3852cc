"""The keys of the screen underneath and of the app, with what each does."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from hbtui.tui.handle import AppModal


class HelpModal(AppModal[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", id="help.close"),
    ]

    def __init__(self, under: Screen) -> None:
        super().__init__()
        # Read now: once this modal is on top, the screen below has no active bindings.
        self.rows = self.bindings_of(under)
        self.title_text = f"keys: {under.__class__.__name__.removesuffix('Screen').lower() or 'app'}"

    def bindings_of(self, screen: Screen) -> list[tuple[str, str, str]]:
        rows: dict[tuple[str, str], tuple[str, str, str]] = {}
        # A screen may leave out keys that do nothing where it is (repeats 3 to 9 of a run of 2).
        lists = getattr(screen, "help_lists", None)
        for node, _, binding in self.app.bindings_for(screen):
            if binding.action == "screen.copy_text":
                continue  # Textual's ctrl+c for a mouse selection: the app's ctrl+c row says it
            if lists is not None and node is screen and not lists(binding):
                continue
            where = "app" if node is self.app else "screen"
            key = (binding.action, where)
            keys = self.app.get_key_display(binding)
            if key in rows:  # one line per action: "j, ↓"
                keys = f"{rows[key][0]}, {keys}"
            rows[key] = (keys, binding.description, where)
        ordered = sorted(rows.values(), key=lambda row: row[2] != "screen")
        ordered.append(("ctrl+p", "Command palette: every action by name", "app"))
        return ordered

    def compose(self) -> ComposeResult:
        # Headed by where the keys work, once each: a third column said "screen" on every row.
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        headings = {"screen": "on this screen", "app": "everywhere"}
        shown = ""
        for key, description, where in self.rows:
            if where != shown:
                table.add_row(Text(headings[where], style="dim italic"), Text(""))
                shown = where
            table.add_row(Text(key), Text(description))
        with VerticalScroll(id="help-body") as body:
            body.border_title = self.title_text
            body.border_subtitle = "escape closes"
            yield Static(table, id="help-table")
            yield KeymapView(id="help-keymap")

    @staticmethod
    def keymap() -> Table:
        """Every screen's keys, as docs/app.md lists them: a key seen elsewhere is found here."""
        from hbtui.tui.keymap import EVERY_SCREEN, rows

        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim")
        table.add_column(style="bold")
        table.add_column()
        table.add_row(Text("every screen's keys", style="bold"), Text(""), Text(""))
        shown = ""
        for screen, keys, description in rows():
            if screen == EVERY_SCREEN:
                continue  # the app's own keys: listed above, under "everywhere"
            table.add_row(Text("" if screen == shown else screen), Text(keys), Text(description))
            shown = screen
        return table

    def action_close(self) -> None:
        self.dismiss(None)


# Every screen's keys, drawn at a width: the same for every opening of the help (the bindings are
# the classes'), so laid out once. As a Rich table it was most of the time from `?` to the help
# on screen (the table measured and wrapped its 150 rows twice at each opening).
_KEYMAP_LINES: dict[int, list[Strip]] = {}


class KeymapView(Widget):
    """Every screen's keys (see HelpModal.keymap), drawn line by line from lines laid out once."""

    DEFAULT_CSS = "KeymapView { height: auto; }"

    def lines(self, width: int) -> list[Strip]:
        if width not in _KEYMAP_LINES:
            console = self.app.console
            rendered = console.render_lines(HelpModal.keymap(), console.options.update_width(width), pad=False)
            _KEYMAP_LINES[width] = [Strip(line) for line in rendered]
        return _KEYMAP_LINES[width]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self.lines(width)
        style = self.rich_style
        if y >= len(lines):
            return Strip.blank(width, style)
        return lines[y].apply_style(style).extend_cell_length(width, style)
