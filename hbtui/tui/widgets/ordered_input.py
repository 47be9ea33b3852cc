"""An Input whose keys take effect in the order they were typed.

Textual inserts a printable key as soon as the focused Input gets it, but runs the Input's own
bound keys (backspace, delete, end, home, the arrows) only once the key has bubbled up to the
app, a message queue at each parent on the way. A key typed right after one of those overtook it:
`End BSpace 2 Tab`, typed fast or arriving in one packet over SSH, inserted the 2 before the
backspace ran, which then deleted it (a new user's trial lost a field's value that way). Here the
Input's own bindings run as their key arrives, in its turn.

Upstream: Textual issue 6605 ("Input/Textarea action synchronization bug",
https://github.com/Textualize/textual/issues/6605), with its open pull request 6631, which runs a
widget's own bindings inline (``Widget._run_key_bindings``). It reads the private
``_bindings.key_to_bindings``: tests/tui/test_textual_overrides.py fails when Textual keeps the order
itself (then this class can go) or no longer has what it reads.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class OrderedInput(Input):
    async def _on_key(self, event: events.Key) -> None:
        if not event.is_printable:
            for key in event.aliases:
                bindings = self._bindings.key_to_bindings.get(key)
                if bindings and not bindings[0].priority:
                    self._restart_blink()
                    # An action that declines (copy with nothing selected) leaves the key to the
                    # screen's and the app's bindings, as Textual's own pass does: ctrl+c then quits.
                    if await self.app.run_action(bindings[0].action, self):
                        event.stop()
                        event.prevent_default()
                        return
                    break
        await super()._on_key(event)
