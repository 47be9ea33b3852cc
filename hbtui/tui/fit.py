"""A header line of parts fitted to a width: a part that does not fit is left out whole (a
later, shorter one may still fit), so no word is ever cut in half (issue 13: at 80 columns a
header read "1 grader…" and "emergency_referr…")."""

from __future__ import annotations

from rich.text import Text

GAP = "  "


def fitted(parts: list[Text], width: int | None) -> Text:
    """``parts`` in order of importance, joined by two spaces; the first is always kept."""
    line = parts[0].copy()
    for part in parts[1:]:
        if width is None or line.cell_len + len(GAP) + part.cell_len <= width:
            line.append(GAP)
            line.append_text(part)
    return line
