"""numpy's BLAS held to one thread in the `hbtui` command.

hbtui's numbers (bootstraps over a few thousand scores, agreement tables) never multiply
matrices, yet numpy's OpenBLAS starts a thread per core as it loads, which spins waiting for
work that never comes: 0.1 s of CPU each time numpy loads (`python -c "import numpy.random"`:
0.20 s of CPU, with OPENBLAS_NUM_THREADS=1 0.08 s), taken from the core the run's SQLite writes
share. So the command asks OpenBLAS for one thread before numpy can load, unless the user set
OPENBLAS_NUM_THREADS or OMP_NUM_THREADS; a program hbtui starts that may use BLAS itself (llama.cpp's
server) gets the environment as the user left it (``environment_for_children``).
"""

from __future__ import annotations

import os

VARIABLE = "OPENBLAS_NUM_THREADS"
_set_here = False


def hold_blas_to_one_thread() -> None:
    """Before numpy loads (OpenBLAS reads its thread count once, as it loads)."""
    global _set_here
    if VARIABLE not in os.environ and "OMP_NUM_THREADS" not in os.environ:
        os.environ[VARIABLE] = "1"
        _set_here = True


def environment_for_children() -> dict[str, str]:
    """The environment as the user gave it to hbtui, for a program it starts."""
    environment = dict(os.environ)
    if _set_here and environment.get(VARIABLE) == "1":
        del environment[VARIABLE]
    return environment
