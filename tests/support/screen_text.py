"""The current screen as plain text lines, for tests that read what a person would see."""

from __future__ import annotations

from textual.app import App


def screen_lines(app: App) -> list[str]:
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


def screen_text(app: App) -> str:
    return "\n".join(screen_lines(app))
