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


def every_part(parts: list[Text], width: int | None, optional: int | None = None, shorter: Text | None = None) -> Text:
    """A line that must keep each of ``parts`` (a filter bar: a filter left out would hide what
    the list shows), fitted by narrowing the separators, then by ``shorter`` in place of the part
    at index ``optional`` (the sort order without its words in brackets), then by leaving that
    part out, and at last by cutting at a word's end with an ellipsis, never mid-word."""
    wide, narrow = "  \u00b7  ", " \u00b7 "
    candidates = [(parts, wide), (parts, narrow)]
    if optional is not None:
        if shorter is not None:
            candidates.append(([shorter if i == optional else p for i, p in enumerate(parts)], narrow))
        candidates.append(([p for i, p in enumerate(parts) if i != optional], narrow))
    line = Text()
    for chosen, separator in candidates:
        line = Text(separator).join(chosen)
        if width is None or line.cell_len <= width:
            return line
    assert width is not None
    cut = line.plain.rfind(" ", 0, max(width - 1, 1))
    line.truncate(max(cut, 1))
    line.rstrip()
    line.append("…")
    return line
