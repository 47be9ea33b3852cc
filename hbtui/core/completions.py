"""The records' own completions graded instead of a model's replies, as the reference's
physician-completion modes choose and group them (simple-evals' healthbench_eval.py).

A HealthBench record may carry ``ideal_completions_data``: the group its physicians belonged to,
their ideal completion, and (Groups 2 and 3) the four model completions they were shown first.
The reference runs each group on its own: the group's records, expanded to one completion each
(``physician``) or one per reference completion (``reference``, Groups 2 and 3 only), then
``random.Random(seed).sample`` of that expansion when a limit is smaller than it, and a score
per group. hbtui plans the groups one after the other in one run and scores them apart too.

Pure: no I/O, no store.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from hbtui.core.completion_groups import GROUPS, IDEAL, MODES, PROFESSIONAL_GROUP, REFERENCE, WITH_REFERENCES
from hbtui.core.dataset import Dataset, DatasetError, Record


@dataclass(frozen=True, slots=True)
class Completion:
    """One completion of one record to grade: its group, which one it is, and its text."""

    record: Record
    group: str
    label: str  # "ideal", or "reference 1" to "reference 4" in the record's order
    text: str


@dataclass(frozen=True, slots=True)
class CompletionsPlan:
    mode: str
    chosen: list[Completion]  # group after group, each as the reference samples it
    without: int  # records with no completions of any group: skipped
    records: dict[str, int] = field(default_factory=dict)  # records per group, before the expansion
    expanded: dict[str, int] = field(default_factory=dict)  # completions per group, before sampling
    sampled: dict[str, int] = field(default_factory=dict)

    def as_plan(self) -> dict:
        """What the run's plan records of it."""
        return {
            "completions": self.mode,
            "without_completions": self.without,
            "groups": {
                group: {"records": self.records[group], "completions": self.expanded[group], "sampled": n}
                for group, n in self.sampled.items()
            },
        }


@dataclass(frozen=True, slots=True)
class RecordCompletions:
    group: str
    ideal: str
    references: tuple[str, ...]


def completions_of(dataset: Dataset, record: Record) -> RecordCompletions | None:
    """The record's completions; None where it has none (``ideal_completions_data`` null, or a
    group the reference does not know). A malformed field is one DatasetError naming it."""
    body = json.loads(record.raw)
    if "physician_response" in body and "ideal_completions_data" not in body:
        # A HealthBench Professional record (kept as read into HealthBench's format): its
        # physician response is the physician's completion, in a group of its own.
        physician = body["physician_response"]
        if not isinstance(physician, str):
            raise DatasetError(
                f"{dataset.path}:{record.line}: record {record.prompt_id}: field 'physician_response': not a string"
            )
        return RecordCompletions(PROFESSIONAL_GROUP, physician, ()) if physician.strip() else None
    data = body.get("ideal_completions_data")
    if data is None:
        return None
    where = f"{dataset.path}:{record.line}: record {record.prompt_id}: field 'ideal_completions_data"

    def fail(name: str, problem: str) -> DatasetError:
        return DatasetError(f"{where}{name}': {problem}")

    if not isinstance(data, dict):
        raise fail("", "must be an object or null")
    group = data.get("ideal_completions_group")
    if not isinstance(group, str):
        raise fail(".ideal_completions_group", "missing or not a string")
    if group not in GROUPS:
        return None
    ideal = data.get("ideal_completion")
    if not isinstance(ideal, str):
        raise fail(".ideal_completion", "missing or not a string")
    references = data.get("ideal_completions_ref_completions") or []
    if not isinstance(references, list) or not all(isinstance(text, str) for text in references):
        raise fail(".ideal_completions_ref_completions", "must be a list of strings")
    return RecordCompletions(group, ideal, tuple(references))


def plan_completions(dataset: Dataset, mode: str, limit: int | None, seed: int = 0) -> CompletionsPlan:
    """The completions to grade, group by group, exactly as the reference chooses them: the
    group's records in file order, expanded, then a sample of ``limit`` of that expansion with
    a generator of its own seeded with ``seed`` (the reference makes one per group)."""
    if mode not in MODES:
        raise DatasetError(f"completions {mode!r}: not one of {', '.join(MODES)}")
    if limit is not None and limit < 1:
        raise DatasetError(f"--limit {limit}: must be at least 1")
    by_record = [(record, completions_of(dataset, record)) for record in dataset.records]
    without = sum(1 for _, found in by_record if found is None)
    chosen: list[Completion] = []
    records: dict[str, int] = {}
    expanded: dict[str, int] = {}
    sampled: dict[str, int] = {}
    for group in GROUPS:
        if mode == REFERENCE and group not in WITH_REFERENCES:
            continue
        matching = [(record, found) for record, found in by_record if found is not None and found.group == group]
        if mode == REFERENCE:
            completions = [
                Completion(record, group, f"reference {number}", text)
                for record, found in matching
                for number, text in enumerate(found.references, start=1)
            ]
        else:
            completions = [Completion(record, group, IDEAL, found.ideal) for record, found in matching]
        if not completions:
            continue  # the reference stops on a group without completions; the others still stand
        records[group], expanded[group] = len(matching), len(completions)
        if limit is not None and limit < len(completions):
            completions = random.Random(seed).sample(completions, limit)
        sampled[group] = len(completions)
        chosen += completions
    if not chosen:
        wanted = "reference completions (Groups 2 and 3)" if mode == REFERENCE else "physician completions"
        where = "ideal_completions_data or physician_response"
        raise DatasetError(f"{dataset.path}: no record has {wanted} in {where} ({without} records without any)")
    return CompletionsPlan(mode, chosen, without, records, expanded, sampled)
