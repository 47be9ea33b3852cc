"""Run a real llama.cpp ``llama-server`` with SmolLM2-135M-Instruct for the e2e tier.

The binary and model are built/fetched by ``scripts/build_llama_server.sh`` into a
cache directory outside the work tree (``$HBTUI_LLAMA_CACHE``, default
``~/.cache/hbtui/llama``):

    paths = llama_paths()
    if paths is None:
        pytest.skip("run scripts/build_llama_server.sh first")
    with LlamaServer() as server:
        client = OpenAICompatClient(base_url=server.base_url, api_key="none")
        ... model=server.model_name ...

The server runs as its own process on 127.0.0.1 with a free port, ``-t 1 -c 4096
--jinja``; its output goes to a temp log file (``server.log_path``), not the
test's stdout. SmolLM2 on one thread does ~45-80 tokens/s: use generous timeouts.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from tests.support.server_lifecycle import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build_llama_server.sh"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def llama_cache_dir() -> Path:
    """The cache dir used by ``scripts/build_llama_server.sh``."""
    env = os.environ.get("HBTUI_LLAMA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "hbtui" / "llama"


def llama_paths() -> tuple[Path, Path] | None:
    """``(binary, model)`` if both exist in the cache dir, else None."""
    cache = llama_cache_dir()
    binary = cache / "bin" / "llama-server"
    model = cache / "models" / MODEL_FILE
    if not model.is_file():
        ggufs = sorted((cache / "models").glob("*.gguf")) if (cache / "models").is_dir() else []
        if not ggufs:
            return None
        model = ggufs[0]
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return None
    return binary, model


class LlamaServerError(RuntimeError):
    """llama-server is missing, failed to start, or did not become healthy in time."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer(ServerProcess):
    """Context manager owning one ``llama-server`` process.

    ``extra_args`` are appended to the command line (e.g. ``["--parallel", "2"]``).
    Attributes once started: ``base_url`` ("http://127.0.0.1:PORT/v1"),
    ``root_url``, ``port``, ``model_name`` (the id ``/v1/models`` reports),
    ``log_path`` (server stdout+stderr), ``process``.
    """

    def __init__(
        self,
        *,
        binary: Path | str | None = None,
        model: Path | str | None = None,
        extra_args: Sequence[str] = (),
        threads: int = 1,
        ctx_size: int = 4096,
        startup_timeout: float = 120.0,
        keep_log: bool | None = None,
    ) -> None:
        if binary is None or model is None:
            paths = llama_paths()
            if paths is None:
                raise LlamaServerError(f"llama-server/model not found under {llama_cache_dir()}; run {BUILD_SCRIPT}")
            binary = binary if binary is not None else paths[0]
            model = model if model is not None else paths[1]
        self.binary = Path(binary)
        self.model = Path(model)
        self.extra_args = list(extra_args)
        self.threads = threads
        self.ctx_size = ctx_size
        self.startup_timeout = startup_timeout
        # Keep the log file after stop (default: only if HBTUI_LLAMA_KEEP_LOG is set).
        self.keep_log = bool(os.environ.get("HBTUI_LLAMA_KEEP_LOG")) if keep_log is None else keep_log
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.root_url = ""
        self.model_name = ""
        self.log_path: Path | None = None

    # -- lifecycle ---------------------------------------------------------

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

    def start(self) -> LlamaServer:
        if self.process is not None:
            raise LlamaServerError("already started")
        # The free-port probe can race with another process grabbing the port; retry
        # a couple of times if the server dies during startup.
        last_error: LlamaServerError | None = None
        for _attempt in range(3):
            try:
                self._start_once(_free_port())
                return self
            except LlamaServerError as e:
                last_error = e
                died = self.process is not None and self.process.poll() is not None
                self.stop()
                if not died:  # timeout or bad /v1/models: retrying will not help
                    break
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
                start_new_session=True,  # Ctrl-C in the test terminal is not sent to it
            )
        self.port = port
        self.root_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.startup_timeout
        # trust_env=False: an HTTP(S)_PROXY in the environment must not reroute localhost.
        with httpx.Client(base_url=self.root_url, timeout=5.0, trust_env=False) as http:
            while True:
                rc = self.process.poll()
                if rc is not None:
                    raise LlamaServerError(
                        f"llama-server exited with {rc} during startup; log tail:\n{self.log_tail()}"
                    )
                try:
                    # 503 while the model loads, 200 when ready.
                    if http.get("/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise LlamaServerError(
                        f"llama-server not healthy after {self.startup_timeout:.0f}s; log tail:\n{self.log_tail()}"
                    )
                time.sleep(0.25)
            resp = http.get("/v1/models")
            if resp.status_code != 200:
                raise LlamaServerError(f"GET /v1/models: {resp.status_code} {resp.text[:500]}")
            data = resp.json().get("data") or []
            if not data or not data[0].get("id"):
                raise LlamaServerError(f"GET /v1/models: no model id in {resp.text[:500]}")
            self.model_name = str(data[0]["id"])

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s)."""
        proc, self.process = self.process, None
        if proc is not None:
            self.end_process(proc, timeout=10)
        if self.log_path is not None and not self.keep_log:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    # -- helpers -----------------------------------------------------------

    def log_tail(self, max_chars: int = 4000) -> str:
        """The last ``max_chars`` of the server's output (for failure messages)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_chars))
            return fh.read().decode("utf-8", "replace")
