"""Start ``fake_server.py`` in its own process and drive it from sync test code.

    with FakeServer(api_key="fake-test", config={"latency_ms": 5}) as server:
        client = OpenAICompatClient(base_url=server.base_url, api_key="fake-test")
        server.control(faults={"rate_limit": 0.2}, seed=3)
        ...
        assert server.stats()["by_status"]["429"] > 0

A separate process (not a thread in the test's process) so tests really go
through a socket, a crash harness can kill the client without killing the
server, and benchmarks don't charge the server's CPU to the client.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import httpx

from tests.support.server_lifecycle import ServerProcess

FAKE_SERVER_SCRIPT = Path(__file__).with_name("fake_server.py")
LISTENING_PREFIX = "LISTENING "


class FakeServerError(RuntimeError):
    """The fake server failed to start or answered a control call with an error."""


class FakeServer(ServerProcess):
    """Context manager owning one fake-server subprocess.

    Arguments mirror the script's options: ``api_key`` (require this bearer
    token), ``models`` (restrict model ids; others get 404), ``config`` (any
    keys of ``fake_server.DEFAULT_CONFIG``), ``port`` (0 picks a free one).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: list[str] | None = None,
        config: dict[str, Any] | None = None,
        port: int = 0,
        startup_timeout: float = 15.0,
    ) -> None:
        self.api_key = api_key
        self.models = models
        self.config = config
        self.port = port
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[str] | None = None
        self.root_url = ""  # "http://127.0.0.1:PORT"
        self._stderr_file: IO[str] | None = None
        self._http: httpx.Client | None = None

    # -- lifecycle ---------------------------------------------------------

    def command(self) -> list[str]:
        cmd = [sys.executable, str(FAKE_SERVER_SCRIPT), "--port", str(self.port), "--exit-with-parent"]
        if self.api_key is not None:
            cmd += ["--api-key", self.api_key]
        if self.models is not None:
            cmd += ["--models", ",".join(self.models)]
        if self.config:
            cmd += ["--config", json.dumps(self.config)]
        return cmd

    def start(self) -> FakeServer:
        if self.process is not None:
            raise FakeServerError("already started")
        # stderr goes to a file, not a pipe: nobody drains it during the test, and a
        # full pipe would block the server. It is shown if startup fails.
        self._stderr_file = tempfile.TemporaryFile(mode="w+", prefix="fake_server_stderr")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=self._stderr_file,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        line = self._read_first_line(self.process.stdout, self.startup_timeout)
        if not line.startswith(LISTENING_PREFIX):
            self.stop()
            raise FakeServerError(f"fake server did not start (first line {line!r}); stderr:\n{self._stderr_text()}")
        self.root_url = line[len(LISTENING_PREFIX) :].strip()
        self.port = int(self.root_url.rsplit(":", 1)[1])
        # trust_env=False: an HTTP(S)_PROXY in the environment must not reroute localhost.
        self._http = httpx.Client(base_url=self.root_url, timeout=10.0, trust_env=False)
        return self

    @staticmethod
    def _read_first_line(stream: IO[str] | None, timeout: float) -> str:
        """Read one line with a timeout (a blocking readline could hang the test run)."""
        if stream is None:
            return ""
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True)
        reader.start()
        try:
            return lines.get(timeout=timeout)
        except queue.Empty:
            return ""

    def _stderr_text(self) -> str:
        if self._stderr_file is None:
            return ""
        self._stderr_file.seek(0)
        return self._stderr_file.read()

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 5 s)."""
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.process is not None:
            self.end_process(self.process, timeout=5)
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None

    # -- addresses ---------------------------------------------------------

    # -- control API -------------------------------------------------------

    def _client(self) -> httpx.Client:
        if self._http is None:
            raise FakeServerError("fake server is not running")
        return self._http

    def _checked(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code != 200:
            raise FakeServerError(
                f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}"
            )
        data: dict[str, Any] = response.json()
        return data

    def control(self, **config: Any) -> dict[str, Any]:
        """Merge ``config`` into the server's config; returns the full new config.

        Unknown keys or bad values raise FakeServerError (the server rejects them).
        """
        return self._checked(self._client().post("/__control", json=config))

    def get_config(self) -> dict[str, Any]:
        return self._checked(self._client().get("/__control"))

    def stats(self) -> dict[str, Any]:
        return self._checked(self._client().get("/__stats"))

    def captured_requests(self) -> list[dict[str, Any]]:
        """The chat request bodies received while ``capture_requests`` was on, parsed."""
        return [json.loads(body) for body in self.captured_bodies()]

    def captured_bodies(self) -> list[str]:
        """The same bodies as they came over the socket (decoded as UTF-8)."""
        return self._checked(self._client().get("/__requests"))

    def reset_stats(self) -> dict[str, Any]:
        return self._checked(self._client().post("/__reset_stats"))
