"""One ``llama-server`` process on a free loopback port, owned by the process that starts it.

    with LlamaServer(binary, model) as server:
        ... server.base_url, server.model_name ...

It is stopped when the block ends, whether it succeeded, failed or was interrupted by Ctrl-C
(it runs in its own session, so the terminal's Ctrl-C reaches only its owner, which stops it).
On Linux it also dies with its owner, should the owner be killed outright.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from hbtui.core.blas_threads import environment_for_children
from hbtui.core.errors import EXIT_FAILED
from hbtui.local.model import LocalModelError


class LlamaServerError(LocalModelError):
    """llama-server failed to start or did not become healthy in time."""

    exit_code = EXIT_FAILED


def free_port() -> int:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])
    except OSError as exc:
        raise LlamaServerError(
            f"no port can be bound on 127.0.0.1 for the local model ({exc.strerror or exc})"
        ) from None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LlamaServer:
    """``extra_args`` go last on the command line (e.g. ``["--parallel", "4"]``). Once started:
    ``base_url`` ("http://127.0.0.1:PORT/v1"), ``root_url``, ``port``, ``model_name`` (the id
    ``/v1/models`` reports), ``log_path`` (the server's output), ``process``."""

    def __init__(
        self,
        binary: Path | str,
        model: Path | str,
        *,
        extra_args: Sequence[str] = (),
        threads: int = 1,
        ctx_size: int = 4096,
        startup_timeout: float = 120.0,
        keep_log: bool | None = None,
    ) -> None:
        self.binary = Path(binary)
        self.model = Path(model)
        self.extra_args = list(extra_args)
        self.threads = threads
        self.ctx_size = ctx_size
        self.startup_timeout = startup_timeout
        self.keep_log = bool(os.environ.get("HBTUI_LLAMA_KEEP_LOG")) if keep_log is None else keep_log
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.root_url = ""
        self.model_name = ""
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def command(self, port: int) -> list[str]:
        return [
            str(self.binary),
            "-m",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-t",
            str(self.threads),
            "-c",
            str(self.ctx_size),
            "--jinja",
            *self.extra_args,
        ]

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> LlamaServer:
        if self.process is not None:
            raise LlamaServerError("already started")
        # Another process may take the free port between the probe and the server's bind: a
        # server that exits at once is tried again on another port.
        last_error: LlamaServerError | None = None
        for _attempt in range(3):
            try:
                self._start_once(free_port())
                return self
            except LlamaServerError as exc:
                last_error = exc
                died = self.process is not None and self.process.poll() is not None
                self.stop()
                if not died:  # a timeout or a bad /v1/models: another port will not help
                    break
            except BaseException:
                self.stop()  # Ctrl-C while it loads: no server left behind
                raise
        assert last_error is not None
        raise last_error

    def _start_once(self, port: int) -> None:
        fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        self.log_path = Path(name)
        with os.fdopen(fd, "wb") as log:
            self.process = subprocess.Popen(
                self.command(port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                env=environment_for_children(),  # its BLAS threads as the user set them
            )
        self.port = port
        self.root_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.startup_timeout
        # trust_env=False: an HTTP(S)_PROXY in the environment must not reroute localhost.
        with httpx.Client(base_url=self.root_url, timeout=5.0, trust_env=False) as http:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise LlamaServerError(
                        f"llama-server exited with {code} while starting; its last lines: {self.log_tail_line()}"
                    )
                try:
                    if http.get("/health").status_code == 200:  # 503 while the model loads
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise LlamaServerError(
                        f"llama-server did not start within {self.startup_timeout:.0f} s;"
                        f" its last lines: {self.log_tail_line()}"
                    )
                time.sleep(0.25)
            response = http.get("/v1/models")
            data = response.json().get("data") if response.status_code == 200 else None
            if not data or not data[0].get("id"):
                raise LlamaServerError(f"llama-server's /v1/models: HTTP {response.status_code} {response.text[:200]}")
            self.model_name = str(data[0]["id"])

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self.log_path is not None and not self.keep_log:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def log_tail(self, max_chars: int = 4000) -> str:
        """The last ``max_chars`` of the server's output."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - max_chars))
            return handle.read().decode("utf-8", "replace")

    def log_tail_line(self, lines: int = 3) -> str:
        """The server's last lines joined into one, for a one-line error."""
        kept = [line.strip() for line in self.log_tail().splitlines() if line.strip()][-lines:]
        return " | ".join(kept)[-500:] or "(no output)"
