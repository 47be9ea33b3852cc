"""The reference implementation's grader prompt, and the facts of what the reference sends.

The prompt is never copied into hbtui: simple-evals' ``healthbench_eval.py`` is downloaded once,
at the pinned commit, checked against its sha256, and cached; the value of its
``GRADER_TEMPLATE`` is then read the way Python would evaluate it (a string literal and its
``.strip()``), from the syntax tree, without running the file. A copy placed in the cache by
hand works offline.
"""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path

COMMIT = "ee3b0318d8d1d9d72755a4120879be65f7c07e9e"
# simple-evals at 652c89d (2026-04-22, pull request 108): the grader prompt is byte-identical to
# ee3b031's; what changed is its GPT-5.4 grader's request (--healthbench-use-gpt-5-4-low-grader):
# POST /v1/responses with the filled template as the one user message and reasoning effort low,
# nothing else (hbtui.core.fidelity.grader_as_2026).
COMMIT_2026 = "652c89d0ca9df547706735883097e9537d40dc47"
GRADER_2026 = "gpt-5.4-2026-03-05"
GRADER_2026_EFFORT = "low"
EVAL_FILE = "healthbench_eval.py"
EVAL_SHA256 = "89909957f005762edaded2f0e39fc9b3b242edd55e3ac0ce4c8dd886ac59d167"
TEMPLATE_SHA256 = "2adffd51fd259554ebcd036ad1072d4aa2b7ce3aec2bbffe36271f911632ed3c"
# HBTUI_SIMPLE_EVALS_URL points at a mirror (the folder holding the file at that commit).
RAW_BASE = f"https://raw.githubusercontent.com/openai/simple-evals/{COMMIT}"

# What the reference sends (its sampler's defaults for the gpt-4.1 models it lists), as facts.
SYSTEM_MESSAGE = "You are a helpful assistant."
TEMPERATURE = 0.5
MAX_TOKENS = 2048

CONNECT_TIMEOUT_SECONDS = 5.0
MAX_REFERENCE_BYTES = 1 << 20  # the pinned file is 30 kB: a server sending more is no mirror of it


class ReferenceUnavailable(Exception):
    """The reference file can be neither found in the cache nor fetched; the message says where."""


def cached_path(cache_dir: str | Path) -> Path:
    return Path(cache_dir).expanduser() / "simple-evals" / COMMIT / EVAL_FILE


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _alternatives(path: Path) -> str:
    return (
        f"place simple-evals' {EVAL_FILE} at commit {COMMIT[:12]} at {path} (it works offline), or set"
        " GRADER_TEMPLATE=builtin (hbtui's own wording) or a file of your own"
    )


def reference_file(cache_dir: str | Path) -> Path:
    """The cached, verified ``healthbench_eval.py``, fetched first if it is not there yet."""
    path = cached_path(cache_dir)
    if path.exists():
        digest = _sha256(path.read_bytes())
        if digest == EVAL_SHA256:
            return path
        raise ReferenceUnavailable(
            f"{path}: sha256 {digest} is not the pinned file's {EVAL_SHA256}; delete it to fetch it again"
        )
    url = os.environ.get("HBTUI_SIMPLE_EVALS_URL", RAW_BASE).rstrip("/") + "/" + EVAL_FILE
    from hbtui.core.downloads import DownloadError, download_to  # a run with the prompt cached starts without httpx

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    try:
        download_to(url, partial, max_bytes=MAX_REFERENCE_BYTES, deadline=120.0, connect=CONNECT_TIMEOUT_SECONDS)
        data = partial.read_bytes()
    except (DownloadError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise ReferenceUnavailable(
            f"the reference grader prompt could not be fetched from {url} ({exc}); {_alternatives(path)}"
        ) from None
    if _sha256(data) != EVAL_SHA256:
        partial.unlink(missing_ok=True)
        raise ReferenceUnavailable(f"{url}: sha256 {_sha256(data)} is not the pinned file's {EVAL_SHA256}")
    os.replace(partial, path)
    return path


def _value(node: ast.expr) -> str:
    """A string expression as Python evaluates it: literals, ``+`` of literals, and ``.strip()``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _value(node.left) + _value(node.right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "strip"
        and not node.args
        and not node.keywords
    ):
        return _value(node.func.value).strip()
    raise ReferenceUnavailable(f"GRADER_TEMPLATE is not a plain string expression in {EVAL_FILE}")


def extract_template(source: str) -> str:
    """The value of the module-level ``GRADER_TEMPLATE = ...`` in ``source``."""
    for statement in ast.parse(source).body:
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id == "GRADER_TEMPLATE"
        ):
            return _value(statement.value)
    raise ReferenceUnavailable(f"no GRADER_TEMPLATE in {EVAL_FILE}")


def reference_template(cache_dir: str | Path) -> str:
    text = extract_template(reference_file(cache_dir).read_text(encoding="utf-8"))
    if _sha256(text.encode()) != TEMPLATE_SHA256:
        raise ReferenceUnavailable(f"the GRADER_TEMPLATE read from {cached_path(cache_dir)} is not the pinned one")
    return text
