"""The key line at the bottom of every screen: what the keys do here, in one line.

Textual's Footer is a container with a widget per key, composed again each time the focus
moves; on a screen being opened that is a second layout pass, and much of the time of a key
press to the next screen. This bar draws the same bindings as one line of text.

The app's own keys (help, back, quit; f1 and ctrl+q where an input takes `?` and `q` as text)
and the command palette stay at the right end; when the
line is too narrow, the screen's keys are dropped from the end first and a "…" says so, since
`?` lists every key and the palette offers every action.

A short confirmation ("copied the reply", "paused") takes the place of the screen's keys for a
few seconds (``show_status``): a toast at 80 columns covered half of a rubric, and several stacked.

Every screen opened draws one of the same few bars, so the lines are kept app-wide by width,
keys and styles: fitting the keys again was a tenth of the time to draw a run's first frame.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget

from hbtui.core.text import one_line

SEPARATOR = "  "
STATUS_SECONDS = 4.0
STATUS_MOST = 200  # characters of a status the bar shows; a longer one is said in a toast
MORE = " …"
BARS_KEPT = 64

# (width, keys of the screen, keys of the app, styles) -> the line and the spans of its keys
_bars: LRUCache[tuple, tuple[Text, list[tuple[int, int, str]]]] = LRUCache(BARS_KEPT)


class KeyBar(Widget):
    """One line of `key description` pairs for the bindings active on this screen."""

    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description", "key-bar--disabled", "key-bar--status"}

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-bar--key { color: $footer-key-foreground; text-style: bold; }
        & > .key-bar--description { color: $footer-description-foreground; }
        & > .key-bar--disabled { color: $text-disabled; }
        & > .key-bar--status { color: $text; text-style: bold; }
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._spans: list[tuple[int, int, str]] = []  # (start, end, key) of each entry drawn, for clicks
        self.status = ""  # a confirmation shown instead of the screen's keys, until its timer clears it
        self._status_timer: Timer | None = None

    def show_status(self, message: str, seconds: float = STATUS_SECONDS) -> None:
        """``message`` (plain text, one line) where the screen's keys are, for ``seconds``."""
        self.status = one_line(message, STATUS_MOST)
        if self._status_timer is not None:
            self._status_timer.stop()
        self._status_timer = self.set_timer(seconds, self.clear_status)
        self.refresh()

    def holds(self, message: str) -> bool:
        """Whether ``message`` fits beside the app's keys (the palette's key making room), whole."""
        width = self.size.width or self.app.size.width
        _left, app_keys = self._fit([], self.entries()[1], width)
        shown = one_line(message, 10**6)
        _kept, room = self._beside_status(app_keys, width, shown)
        return cell_len(shown) <= min(room, STATUS_MOST)

    def _beside_status(self, app_keys: list, width: int, status: str) -> tuple[list, int]:
        """The app's keys kept beside ``status`` and the room it has: the palette's key gives its
        room to a status that needs it."""
        room = width - self._join(app_keys).cell_len - 1 - len(SEPARATOR)
        if cell_len(status) > room and len(app_keys) > 1:
            app_keys = app_keys[:-1]
            room = width - self._join(app_keys).cell_len - 1 - len(SEPARATOR)
        return app_keys, room

    def clear_status(self) -> None:
        self.status = ""
        self._status_timer = None
        self.refresh()

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def entries(self) -> tuple[list[tuple[str, str, str, bool]], list[tuple[str, str, str, bool]]]:
        """(key, shown key, description, enabled) of the screen's keys and of the app's keys."""
        app = self.app
        screen_keys: list[tuple[str, str, str, bool]] = []
        app_keys: list[tuple[str, str, str, bool]] = []
        seen: set[str] = set()
        active = self.screen.active_bindings
        for namespace, binding, enabled, _tooltip in active.values():
            if not binding.show or not binding.description or binding.action in seen:
                continue
            seen.add(binding.action)
            entry = (binding.key, app.get_key_display(binding), binding.description, enabled)
            (app_keys if namespace is app else screen_keys).append(entry)
        # Where `?` and `q` are typed as text (an input has the focus), help and quit stay on the
        # bar under the keys that reach them there: they are never out of sight.
        if "help" not in seen:
            app_keys.insert(0, ("f1", "f1", "Help", True))
        if "quit" not in seen:
            app_keys.append(("ctrl+q", "^q", "Quit", True))
        palette = active.get(app.COMMAND_PALETTE_BINDING)
        if app.ENABLE_COMMAND_PALETTE and palette is not None and palette.binding.action not in seen:
            app_keys.append((palette.binding.key, app.get_key_display(palette.binding), "Commands", palette.enabled))
        return screen_keys, app_keys

    def render(self) -> Text:
        width = self.size.width
        screen_keys, app_keys = self.entries()
        styles = tuple(
            self.get_component_rich_style(name, partial=True)
            for name in ("key-bar--key", "key-bar--description", "key-bar--disabled")
        )
        if self.status:
            screen_keys = []  # the status has their place; the app's keys stay
        key = (width, tuple(screen_keys), tuple(app_keys), styles, self.status)
        bar = _bars.get(key)
        if bar is None:
            bar = _bars[key] = (self._line(width, screen_keys, app_keys), self._spans)
        line, self._spans = bar
        return line

    def _line(self, width: int, screen_keys: list, app_keys: list) -> Text:
        left_keys, app_keys = self._fit(screen_keys, app_keys, width)
        if len(left_keys) < len(screen_keys) and len(app_keys) > 1:
            # Cramped: the palette's key gives its room to the screen's own (help lists it).
            without_palette = self._fit(screen_keys, app_keys[:-1], width)
            if len(without_palette[0]) > len(left_keys):
                left_keys, app_keys = without_palette
        left = self._join(left_keys, more=len(left_keys) < len(screen_keys))
        if self.status:
            app_keys, room = self._beside_status(app_keys, width, self.status)
            left = Text(
                one_line(self.status, max(room, 1)), self.get_component_rich_style("key-bar--status", partial=True)
            )
        right = self._join(app_keys)
        line = Text(" ", end="")
        line.append_text(left)
        gap = width - line.cell_len - right.cell_len
        line.append(" " * max(gap, 1))
        offset = line.cell_len
        line.append_text(right)
        self._spans = self._spans_of(left_keys, 1) + self._spans_of(app_keys, offset)
        return line

    def _fit(self, screen_keys: list, app_keys: list, width: int) -> tuple[list, list]:
        """The screen's keys that fit beside the app's, from the first; the app's own only
        shortened (from the end) when even they alone do not fit."""
        right = self._join(app_keys)
        while app_keys and right.cell_len > width - 1:
            app_keys = app_keys[:-1]
            right = self._join(app_keys)
        room = width - right.cell_len - 1 - len(SEPARATOR)
        left_keys = list(screen_keys)
        while left_keys and self._join(left_keys, more=len(left_keys) < len(screen_keys)).cell_len > room:
            left_keys = left_keys[:-1]
        return left_keys, app_keys

    def _join(self, keys: list[tuple[str, str, str, bool]], more: bool = False) -> Text:
        key_style = self.get_component_rich_style("key-bar--key", partial=True)
        description_style = self.get_component_rich_style("key-bar--description", partial=True)
        disabled = self.get_component_rich_style("key-bar--disabled", partial=True)
        text = Text(end="")
        for index, (_key, shown, description, enabled) in enumerate(keys):
            if index:
                text.append(SEPARATOR)
            text.append(shown, key_style if enabled else disabled + Style(bold=True))
            text.append(" ")
            text.append(description, description_style if enabled else disabled)
        if more:
            text.append(MORE, description_style)
        return text

    @staticmethod
    def _spans_of(keys: list[tuple[str, str, str, bool]], start: int) -> list[tuple[int, int, str]]:
        spans = []
        for key, shown, description, _enabled in keys:
            end = start + len(shown) + 1 + len(description)
            spans.append((start, end, key))
            start = end + len(SEPARATOR)
        return spans

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                self.app.simulate_key(key)
                return
