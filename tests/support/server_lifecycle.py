"""What the test servers (the project's fake one, llama.cpp's) share: a child process on
127.0.0.1 used as a context manager, its URLs, and a stop that escalates to SIGKILL."""

from __future__ import annotations

import subprocess
from types import TracebackType


class ServerProcess:
    """Subclasses set ``process`` and ``root_url`` in ``start()`` and clean up in ``stop()``."""

    process: subprocess.Popen | None = None
    root_url = ""

    def start(self):  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    @staticmethod
    def end_process(process: subprocess.Popen, timeout: float) -> None:
        """SIGTERM, then SIGKILL if it has not exited after ``timeout`` seconds."""
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)

    def __enter__(self):
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root_url}/v1"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None
