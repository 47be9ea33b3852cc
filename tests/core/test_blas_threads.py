"""numpy's BLAS is held to one thread in the `hbtui` command (its threads spun 0.1 s of CPU each
time numpy loaded, for matrix work hbtui never asks for), and a program hbtui starts gets the
environment as the user left it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hbtui.core import blas_threads

TASKS = "/proc/self/task"


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(blas_threads, "_set_here", False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    return monkeypatch


def test_held_to_one_thread_and_given_back_to_children(fresh):
    blas_threads.hold_blas_to_one_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert "OPENBLAS_NUM_THREADS" not in blas_threads.environment_for_children()


@pytest.mark.parametrize("variable", ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"])
def test_a_users_own_setting_is_kept_for_hbtui_and_its_children(fresh, variable):
    fresh.setenv(variable, "4")
    blas_threads.hold_blas_to_one_thread()
    assert os.environ.get("OPENBLAS_NUM_THREADS") == ("4" if variable == "OPENBLAS_NUM_THREADS" else None)
    assert blas_threads.environment_for_children()[variable] == "4"


def threads_after_numpy(hold: bool) -> int:
    """The threads of a fresh process once numpy has loaded, with or without the hold."""
    script = (
        "import os\n"
        "from hbtui.core.blas_threads import hold_blas_to_one_thread\n"
        f"{'hold_blas_to_one_thread()' if hold else ''}\n"
        "import numpy.random\n"
        f"print(len(os.listdir({TASKS!r})))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not os.path.isdir(TASKS) or (os.cpu_count() or 1) < 2, reason="needs Linux and two CPUs")
def test_numpy_loads_without_blas_threads_once_held():
    assert threads_after_numpy(hold=False) > 1  # OpenBLAS's own, one a CPU
    assert threads_after_numpy(hold=True) == 1


def test_the_hbtui_command_holds_it_before_anything_runs():
    script = (
        "import atexit, os, sys\n"
        "atexit.register(lambda: print('blas threads:', os.environ.get('OPENBLAS_NUM_THREADS')))\n"
        "sys.argv = ['hbtui', '--version']\n"
        "from hbtui.cli import entry\n"
        "entry()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "blas threads: 1"
