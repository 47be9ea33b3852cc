"""A run answered by an engine of its own through batch files (`hbtui run --batch-files DIR`):
what the files are named, how each line names its request, and what a run awaiting them says.

The files are OpenAI's batch input format, which vLLM's ``run-batch`` and Ray Data's LLM batch
processing read: one request a line, ``{"custom_id", "method": "POST", "url", "body"}``. A
line's ``custom_id`` names its run (a token of the run's own, so that an output file of another
run, or of another database, is refused), its conversation (``p`` its position in the plan, as
``#N`` counts from 1: ``p0`` is #1), its repeat and, for the grader, its criterion:
``hbtui-1a2b3c4d-p12-r0`` and ``hbtui-1a2b3c4d-p12-r0-c3``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hbtui.core.invocation import invoked_as

GENERATE_FILE = "generate-requests.jsonl"
GRADE_FILE = "grade-requests.jsonl"
MAX_LINES = 50_000  # a provider's limit of one batch file, kept for any engine
MAX_BYTES = 200 * 1024 * 1024
DEFAULT_LABEL = "offline"  # what the verdict cache's key holds in place of an endpoint
PLAN_KEY = "batch_files"  # the run's plan records {"folder", "label", "token"} under it
# A run through a provider's batch API (hbtui.engine.batch_api) records the same under this key,
# with "uuid": the run's id across databases, which each batch's metadata carries.
API_PLAN_KEY = "batch_api"
API_LABEL = "batch API"
CUSTOM_ID = re.compile(r"^hbtui-(?P<token>[0-9a-f]{8})-p(?P<position>\d+)-r(?P<repeat>\d+)(?:-c(?P<idx>\d+))?$")


@dataclass(frozen=True, slots=True)
class BatchFiles:
    folder: Path
    label: str
    token: str
    # The sha256 of each output file imported: the same file again is known, and changes nothing.
    imported: tuple[str, ...] = ()
    # A run through a provider's batch API: its id across databases (a UUID); None: offline files.
    uuid: str | None = None

    @classmethod
    def of(cls, plan: dict[str, Any]) -> BatchFiles | None:
        """The batch files a run's plan records for an engine of the user's own, or None."""
        return cls._from(plan.get(PLAN_KEY))

    @classmethod
    def online_of(cls, plan: dict[str, Any]) -> BatchFiles | None:
        """The batch files of a run through a provider's batch API (`hbtui run --batch`), or None."""
        return cls._from(plan.get(API_PLAN_KEY))

    @classmethod
    def _from(cls, entry: Any) -> BatchFiles | None:
        if not isinstance(entry, dict):
            return None
        return cls(
            Path(entry["folder"]), entry["label"], entry["token"], tuple(entry.get("imported") or ()), entry.get("uuid")
        )

    @property
    def online(self) -> bool:
        return self.uuid is not None

    def as_plan(self) -> dict[str, Any]:
        plan = {"folder": str(self.folder), "label": self.label, "token": self.token, "imported": list(self.imported)}
        return plan if self.uuid is None else {**plan, "uuid": self.uuid}


def generation_id(token: str, position: int, repeat: int) -> str:
    return f"hbtui-{token}-p{position}-r{repeat}"


def grading_id(token: str, position: int, repeat: int, idx: int) -> str:
    return f"{generation_id(token, position, repeat)}-c{idx}"


def file_name(base: str, number: int) -> str:
    """``grade-requests.jsonl``, then ``grade-requests-2.jsonl``... past a file's limits."""
    if number == 1:
        return base
    stem = base.removesuffix(".jsonl")
    return f"{stem}-{number}.jsonl"


def awaiting_hint(run_id: int, plan: dict[str, Any], status: str | None = None) -> str:
    """What a batch-files run says where a resume is asked of it: awaiting its answers, or ended
    (``status``): finished, or incomplete, which regrade-errors asks again through new files."""
    if status == "finished":
        return f"run {run_id} is finished: every request of its batch files has its answer"
    if status == "incomplete":
        return (
            f"run {run_id} is incomplete: {invoked_as()} regrade-errors {run_id} writes what failed into new"
            " request files, for your engine"
        )
    if BatchFiles.online_of(plan) is not None:
        return (
            f"run {run_id} awaits its batches at the provider: {invoked_as()} resume {run_id} looks at them and"
            f" stores their answers as they end ({invoked_as()} cancel {run_id} cancels them)"
        )
    batch = BatchFiles.of(plan)
    folder = f" (its requests are in {batch.folder})" if batch else ""
    return (
        f"run {run_id} awaits the answers to its batch files{folder}: run them through your engine,"
        f" then {invoked_as()} batch import {run_id} OUTPUT_FILE"
    )
