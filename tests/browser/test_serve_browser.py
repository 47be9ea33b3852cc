"""The served app in a real browser: Debian's Chromium driven by Playwright, as a user opens it.

The terminal is drawn on a canvas, so the page has no text to read. What the browser receives
over the websocket is the app's own terminal output: a terminal emulator (pyte) replays it into
the screen the canvas shows, and a screenshot of the page is kept for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.support.served import ServedApp, TerminalReplay, wait_for_text

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (scripts/test installs it)"
)
pyte = pytest.importorskip("pyte", reason="pyte is not installed (scripts/test installs it)")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (scripts/test installs Debian's chromium)", allow_module_level=True)

README_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "serve.png"


def test_the_printed_url_opens_the_app_and_the_keyboard_reaches_a_verdict_and_its_explanation(
    finished_run_db, tmp_path
):
    with sqlite3.connect(finished_run_db) as db:
        first_verdicts = db.execute(
            "SELECT v.status, v.explanation FROM verdicts v JOIN conversations c ON c.id = v.conversation_id"
            " WHERE c.position = (SELECT min(position) FROM conversations) AND v.points > 0 ORDER BY v.idx"
        ).fetchall()
    assert first_verdicts
    replay = TerminalReplay(pyte)
    with ServedApp(finished_run_db) as served, playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox"] if os.geteuid() == 0 else []
        )
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("websocket", replay.attach)
        page.goto(served.url)
        # The secret traded for a cookie: the address bar no longer shows it.
        assert page.url == f"{served.base}/"
        wait_for_text(page, replay, "small-run")  # the runs list
        # No click first: the terminal has the keyboard from the start (issue 25, item 6).
        assert "xterm-helper-textarea" in page.evaluate("document.activeElement.className")
        page.keyboard.press("Enter")  # open the run
        wait_for_text(page, replay, "Score")
        page.keyboard.press("2")  # its conversations
        page.keyboard.press("Enter")  # the first one
        # Each criterion's verdict and the grader's explanation for it, as the database holds them.
        text = wait_for_text(page, replay, *(explanation for _, explanation in first_verdicts))
        # As many of each mark as the database has criteria of that verdict: each one is shown.
        statuses = [status for status, _ in first_verdicts]
        assert (text.count("✔ met"), text.count("✘ missed")) == (statuses.count("met"), statuses.count("not_met"))
        page.keyboard.press("j")  # the first criterion selected, as a reviewer reads it
        page.wait_for_timeout(500)  # the canvas draws a frame after the bytes arrive
        page.screenshot(path=str(tmp_path / "serve.png"))
        if os.environ.get("HBTUI_UPDATE_SCREENSHOT"):
            README_SCREENSHOT.parent.mkdir(exist_ok=True)
            shutil.copy(tmp_path / "serve.png", README_SCREENSHOT)
        assert replay.sockets == 1
        browser.close()


def test_a_served_tab_asks_its_reviewer_once_since_user_is_the_servers_account(finished_run_db):
    """Under `hbtui serve` $USER is the server's account: the first review of a tab asks for a
    name, and the tab's later reviews carry it without asking again."""
    replay = TerminalReplay(pyte)
    env = {**os.environ, "USER": "server-account"}
    with ServedApp(finished_run_db, env=env) as served, playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox"] if os.geteuid() == 0 else []
        )
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("websocket", replay.attach)
        page.goto(served.url)
        wait_for_text(page, replay, "small-run")
        page.click("#terminal")
        page.keyboard.press("Enter")
        wait_for_text(page, replay, "Score")
        page.keyboard.press("2")
        page.keyboard.press("Enter")
        wait_for_text(page, replay, "RUBRIC")
        page.keyboard.press("j")
        page.keyboard.press("w")
        wait_for_text(page, replay, "Your name on your reviews")
        page.keyboard.type("Dr Who")
        page.keyboard.press("Enter")
        wait_for_text(page, replay, "flipped by Dr Who")
        page.keyboard.press("j")
        page.keyboard.press("f")
        wait_for_text(page, replay, "Flag this verdict")  # the note, not the name: asked once
        page.keyboard.press("Enter")
        wait_for_text(page, replay, "flagged by Dr Who")
        browser.close()
    with sqlite3.connect(finished_run_db) as db:
        assert db.execute("SELECT reviewer, action FROM reviews ORDER BY id").fetchall() == [
            ("Dr Who", "flip"),
            ("Dr Who", "flag"),
        ]
