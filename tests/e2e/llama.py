"""llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct for the e2e tier, from the one installer
(hbtui/local/model.py; ``scripts/build_llama_server.sh`` runs it):

    if llama_paths() is None:
        pytest.skip("run scripts/build_llama_server.sh first")
    with LlamaServer() as server:
        ... server.base_url, server.model_name ...

SmolLM2 on one thread does ~45-80 tokens/s: use generous timeouts.
"""

from __future__ import annotations

import os
from pathlib import Path

from hbtui.local import llama_server
from hbtui.local import model as local_model
from hbtui.local.llama_server import LlamaServerError

__all__ = ["LlamaServer", "LlamaServerError", "llama_cache_dir", "llama_paths"]

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build_llama_server.sh"

# The session's conftest points HBTUI_CACHE at a temporary folder (for the reference prompt);
# the local model stays where the tier's set-up installed it, for this process and its children.
os.environ.setdefault("HBTUI_LLAMA_CACHE", str(local_model.llama_dir()))


def llama_cache_dir() -> Path:
    return local_model.llama_dir()


def llama_paths() -> tuple[Path, Path] | None:
    """``(binary, model)`` if both are installed, else None."""
    found = local_model.installed()
    return (found.binary, found.model) if found else None


class LlamaServer(llama_server.LlamaServer):
    """The installed binary and model unless given."""

    def __init__(self, *, binary: Path | str | None = None, model: Path | str | None = None, **options) -> None:
        if binary is None or model is None:
            paths = llama_paths()
            if paths is None:
                raise LlamaServerError(f"llama-server/model not found under {llama_cache_dir()}; run {BUILD_SCRIPT}")
            binary, model = binary or paths[0], model or paths[1]
        super().__init__(binary, model, **options)
