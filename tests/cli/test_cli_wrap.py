"""What a command prints on an 80-column terminal is wrapped where words end (issue 25, item 11):
the terminal itself cut `healthbench_m` / `ain_subset.jsonl` in two."""

from __future__ import annotations

import fcntl
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios

from hbtui.cli.common import wrapped
from tests.cli.test_cli import SECRET, clean_env, hbtui


def test_a_long_line_breaks_at_spaces_and_keeps_a_path_whole():
    line = "run 1 small  model test-model graded by grader-model  dataset /data/healthbench_main_subset.jsonl  seed 0"
    lines = wrapped(line, 40).splitlines()
    assert all(len(part) <= 40 or " " not in part.strip() for part in lines)
    assert "  dataset /data/healthbench_main_subset.jsonl" not in lines  # the path is on a line of its own
    assert any(part.strip() == "/data/healthbench_main_subset.jsonl" for part in lines)
    assert " ".join(" ".join(lines).split()) == " ".join(line.split())  # nothing lost
    assert lines[1].startswith("  ")  # the rest indented under the first
    assert wrapped("short", 40) == "short"
    assert wrapped("a  b   aligned", 40) == "a  b   aligned"  # the spaces of a table kept


def test_show_on_an_80_column_terminal_never_cuts_a_word(tmp_path, server, small_dataset):
    data = tmp_path / "healthbench_main_subset_with_a_long_file_name_indeed.jsonl"
    shutil.copy(small_dataset, data)
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nAPI_KEY={SECRET}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n"
    )
    hbtui("run", "--data", str(data), "--name", "wrapped", cwd=tmp_path, check=True)
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    shown = subprocess.run(
        [sys.executable, "-m", "hbtui", "show", "1"],
        cwd=tmp_path,
        env=clean_env({"COLUMNS": "80"}),
        stdin=secondary,
        stdout=secondary,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(primary)
    assert shown.returncode == 0, shown.stderr
    lines = out.decode().replace("\r\n", "\n").splitlines()
    assert all(len(line) <= 80 for line in lines if " " in line.strip()), [ln for ln in lines if len(ln) > 80]
    assert any(data.name in line for line in lines), "the file's name whole on one line"
