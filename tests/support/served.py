"""`hbtui serve` as a user starts it (a real process on a free loopback port, its printed URL),
and what a browser's page shows of it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

URL = re.compile(r"hbtui: open (http://\S+)")


class ServedApp:
    def __init__(self, db: Path, *extra: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.args = [sys.executable, "-m", "hbtui", "--db", str(db), "serve", "--port", "0", *extra]
        self.cwd = cwd or db.parent
        self.env = env
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> ServedApp:
        env = {**(os.environ if self.env is None else self.env), "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            self.args, cwd=self.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if match := URL.search(line):
                self.url = match.group(1)
                return self
        self.__exit__()
        raise RuntimeError(f"hbtui serve printed no URL: {self.process.stderr.read() if self.process.stderr else ''}")

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def secret(self) -> str:
        return self.url.rsplit("key=", 1)[1]

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def __exit__(self, *exc: object) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class TerminalReplay:
    """The screen the page's terminal shows, rebuilt from the bytes the app sent it."""

    def __init__(self, pyte) -> None:  # the module, imported by the caller (a test may skip without it)
        self.screen = pyte.Screen(80, 24)
        self.stream = pyte.ByteStream(self.screen)
        self.sockets = 0

    def attach(self, websocket) -> None:
        self.sockets += 1
        query = parse_qs(urlsplit(websocket.url).query)
        if "width" in query and "height" in query:
            self.screen.resize(int(query["height"][0]), int(query["width"][0]))
        websocket.on("framesent", self.on_sent)
        websocket.on("framereceived", self.on_received)

    def on_sent(self, payload) -> None:
        if isinstance(payload, str):
            message = json.loads(payload)
            if message[0] == "resize":
                self.screen.resize(message[1]["height"], message[1]["width"])

    def on_received(self, payload) -> None:
        if isinstance(payload, bytes):
            self.stream.feed(payload)

    def text(self) -> str:
        return "\n".join(self.screen.display)


def wait_for_text(page, replay: TerminalReplay, *needles: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = replay.text()
        if all(needle in text for needle in needles):
            return text
        page.wait_for_timeout(100)
    raise AssertionError(f"never on screen: {needles!r}; the screen:\n{replay.text()}")
