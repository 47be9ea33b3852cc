"""The peak memory of a command, its own: run under a small wrapper process.

ru_maxrss of a child counts the memory of the process it was forked (or vforked) from, up to its
exec: a test process or a bench holding a 50 MB answer would be measured, not hbtui. The wrapper
is a bare Python of a few MB; what it reports for its own child is that child's peak.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

_WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[2:]).returncode\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def run_measured(command: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> tuple[int, float, str]:
    """(exit code, peak RSS in MiB, stdout and stderr) of ``command``."""
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        result = subprocess.run(
            [sys.executable, "-S", "-c", _WRAPPER, str(peak_file), *command],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
        peak_kib = int(peak_file.read_text()) if peak_file.exists() else 0
    return result.returncode, peak_kib / 1024, result.stdout.decode("utf-8", "replace")
