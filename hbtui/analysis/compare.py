"""Two runs side by side: the same conversations, their scores, and how their graders agree.

Conversations pair by (prompt_id, the record's sha256, repeat): HealthBench's main and
consensus files share prompt_ids with different rubrics, which must not pair, while a hard
record is the very line of its main version, which must. Only conversations both runs graded
in full are scored; the difference B - A of the two clipped means gets a paired bootstrap
interval (the pairs resampled jointly, seeded as a run's own bootstrap), so that it measures
the change, not the spread of the prompts.

Grader agreement (Cohen's kappa) is over the criteria both runs graded, conversation by
conversation: for a regrade (same replies, another grader) it says how far two graders agree.

Pure computation over what the store reads; no Textual, no printing.

Longer than most modules (about 570 lines) because it is one comparison: the pairing of two runs'
conversations, the paired bootstrap of every metric in one pass, the graders' kappa and the
settings the runs differ in; its text is in render/compare_report.py.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hbtui.core.errors import HbtuiError
from hbtui.core.numbering import conversation_number
from hbtui.core.redact import without_credentials
from hbtui.core.run_kinds import IMPORTED
from hbtui.core.scoring import (
    BOOTSTRAP_SAMPLES,
    BOOTSTRAP_SEED,
    OVERALL,
    OVERALL_LENGTH_ADJUSTED,
    bootstrap_picks,
    clipped_mean,
    conversation_metrics,
    length_adjusted_score,
)
from hbtui.core.settings.config import UNRECORDED_SETTINGS, setting_for
from hbtui.core.verdicts import GENERATED, Kappa, cell
from hbtui.store.rows import MET, NOT_MET, RunRow, verdict_met
from hbtui.store.run_report import CATEGORY_PREFIXES

THEME, AXIS = "theme:", "axis:"
# Example tags compared as themes are: the themes, and HealthBench Professional's categories.
COMPARED = (THEME, *CATEGORY_PREFIXES, AXIS)
MOVED_LISTED = 20  # in `hbtui compare` and its JSON; the screen lists more


class NothingToCompare(HbtuiError, ValueError):
    """Two runs that cannot be compared: the same run, or no conversation in common."""


@dataclass(slots=True)
class Criterion:
    """A criterion with its verdict; it has what scoring reads of a GradedCriterion."""

    idx: int
    text: str
    points: float
    tags: tuple[str, ...]
    status: str
    met: bool | None  # None: not graded (pending, or its grading failed)


@dataclass(slots=True)
class Conversation:
    """One conversation of one run, as a comparison needs it."""

    id: int
    position: int
    repeat: int
    prompt_id: str
    sha256: str
    theme: str | None
    example_tags: list[str]
    replied: bool
    score: float | None = None  # as stored: scoring's score of its verdicts, when all are graded
    criteria: list[Criterion] | None = None  # None: its verdicts were not read
    completion: str | None = None  # which of the record's own completions the reply is; None: a model's
    # A run made with a length adjustment, compared with another such: (penalty, centre) and the
    # reply's characters, for its length-adjusted score (None: not compared by it).
    length: tuple[float, float] | None = None
    reply_chars: int = 0

    @property
    def key(self) -> tuple[str, str, int]:
        return self.prompt_id, self.sha256, self.repeat

    def metrics(self) -> dict[str, float] | None:
        """The reference's per-conversation values (overall, tags); None unless graded in full.
        Without its verdicts: the stored score, the overall and example-tag (theme) values."""
        if not self.replied:
            return None
        if self.criteria is None:
            if self.score is None:
                return None
            return self._adjusted({OVERALL: self.score, **{tag: self.score for tag in self.example_tags}})
        result = conversation_metrics(self.example_tags, self.criteria)  # type: ignore[arg-type]
        return None if result is None else self._adjusted(result.values)

    def _adjusted(self, values: dict[str, float]) -> dict[str, float]:
        if self.length is None:
            return values
        adjusted = length_adjusted_score(values[OVERALL], self.reply_chars, *self.length)
        return {**values, OVERALL_LENGTH_ADJUSTED: adjusted}


def conversations_from_rows(
    conversation_rows: Iterable[tuple], verdict_rows: Iterable[tuple] | None = None
) -> list[Conversation]:
    """Rows of ``StoreReads.comparison_conversations`` as conversations, with their criteria
    from ``comparison_verdicts`` when given."""
    tag_lists: dict[str, tuple[str, ...]] = {}  # a run repeats a handful of tag lists thousands of times
    conversations: dict[int, Conversation] = {}
    for row in conversation_rows:
        conv_id, position, repeat, prompt_id, sha256, theme, example_tags, status, score, completion = row
        conversations[conv_id] = Conversation(
            conv_id,
            position,
            repeat,
            prompt_id,
            sha256,
            theme,
            list(_parsed(tag_lists, example_tags)),
            status == GENERATED,
            score,
            None if verdict_rows is None else [],
            completion,
        )
    for conv_id, idx, text, points, tags, status in verdict_rows or ():
        conversation = conversations.get(conv_id)
        if conversation is not None and conversation.criteria is not None:
            conversation.criteria.append(
                Criterion(idx, text, points, _parsed(tag_lists, tags), status, verdict_met(status))
            )
    return list(conversations.values())


def _parsed(seen: dict[str, tuple[str, ...]], tags: str) -> tuple[str, ...]:
    """The themes and axes of a tag list. The other tags (level:, cluster:, categories) are not
    compared, and scoring them cost 40% of the scoring time; leaving them out changes no value:
    a tag's value depends only on the criteria carrying it."""
    parsed = seen.get(tags)
    if parsed is None:
        parsed = seen[tags] = tuple(tag for tag in json.loads(tags) if tag.startswith(COMPARED))
    return parsed


# ---- the scores ------------------------------------------------------------------------------


@dataclass(slots=True)
class Difference:
    """Two runs' clipped means over the same conversations, and B - A with its 95% interval."""

    n: int
    score_a: float
    score_b: float
    value: float
    ci95: tuple[float, float]

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "score_a": self.score_a,
            "score_b": self.score_b,
            "difference": {"value": self.value, "ci95": [self.ci95[0], self.ci95[1]]},
        }


def paired_difference(
    a: Sequence[float], b: Sequence[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> Difference:
    """clip(mean b) - clip(mean a), and the 2.5th and 97.5th percentiles of the same difference
    over ``samples`` resamples of the pairs (one set of indices picks from both runs)."""
    return paired_differences({"": (a, b)}, samples, seed)[""]


def paired_differences(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Difference]:
    """``paired_difference`` of each (a, b); series of one length share their resample indices,
    which one seed makes identical anyway, drawn once (a third of a bootstrap's time)."""
    import numpy as np  # loaded when first needed: `hbtui run` starts without it

    arrays = {name: (np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for name, (a, b) in series.items()}
    by_length: dict[int, list[str]] = {}
    for name, (a, _b) in arrays.items():
        by_length.setdefault(len(a), []).append(name)
    differences = {name: np.empty(samples) for name in arrays}
    for length, names in by_length.items():
        for start, stop, picks in bootstrap_picks(length, samples, seed):
            for name in names:
                a, b = arrays[name]
                # np.take: the same values as a[picks], a third faster at 5,000 pairs
                differences[name][start:stop] = np.clip(np.take(b, picks).mean(axis=1), 0, 1) - np.clip(
                    np.take(a, picks).mean(axis=1), 0, 1
                )
    results = {}
    for name, (a, b) in arrays.items():
        low, high = np.percentile(differences[name], [2.5, 97.5])
        score_a, score_b = clipped_mean(a), clipped_mean(b)
        results[name] = Difference(len(a), score_a, score_b, score_b - score_a, (float(low), float(high)))
    return results


@dataclass(slots=True)
class Disagreement:
    prompt_id: str
    repeat: int
    theme: str | None
    idx: int
    criterion: str
    points: float
    met_a: bool
    met_b: bool
    conversation_a: int
    conversation_b: int
    position: int  # in run A
    position_b: int

    @property
    def numbers(self) -> str:
        """Where to find it in each run, as the browser numbers conversations (see Moved)."""
        a, b = conversation_number(self.position), conversation_number(self.position_b)
        return f"#{a}" if a == b else f"#{a} in A, #{b} in B"

    def as_dict(self) -> dict:
        return {
            "prompt_id": self.prompt_id,
            "conversation_number_a": conversation_number(self.position),
            "conversation_number_b": conversation_number(self.position_b),
            "repeat": self.repeat,
            "theme": self.theme,
            "idx": self.idx,
            "criterion": self.criterion,
            "points": self.points,
            "a": verdict_word(self.met_a),
            "b": verdict_word(self.met_b),
        }


def verdict_word(met: bool) -> str:
    return MET if met else NOT_MET


# ---- the comparison ----------------------------------------------------------------------------


@dataclass(slots=True)
class Moved:
    prompt_id: str
    repeat: int
    theme: str | None
    score_a: float
    score_b: float
    conversation_a: int
    conversation_b: int
    position: int  # in run A
    position_b: int

    @property
    def change(self) -> float:
        return self.score_b - self.score_a

    @property
    def numbers(self) -> str:
        """Where to find it in each run, as the browser numbers conversations: "#15", or
        "#15 in A, #17 in B" where the two runs list it apart."""
        a, b = conversation_number(self.position), conversation_number(self.position_b)
        return f"#{a}" if a == b else f"#{a} in A, #{b} in B"

    def as_dict(self) -> dict:
        return {
            "prompt_id": self.prompt_id,
            "conversation_number_a": conversation_number(self.position),
            "conversation_number_b": conversation_number(self.position_b),
            "repeat": self.repeat,
            "theme": self.theme,
            "score_a": self.score_a,
            "score_b": self.score_b,
            "difference": self.change,
        }


@dataclass(slots=True)
class Agreement:
    overall: Kappa
    axes: dict[str, Kappa]
    disagreements: list[Disagreement]  # the most points first

    def as_dict(self) -> dict:
        return {
            **self.overall.as_dict(),
            "axes": {name: k.as_dict() for name, k in self.axes.items()},
            "disagreements": [d.as_dict() for d in self.disagreements],
        }


@dataclass(slots=True)
class Comparison:
    run_a: RunRow
    run_b: RunRow
    overall: Difference
    themes: dict[str, Difference]
    axes: dict[str, Difference]
    moved: list[Moved]  # every pair whose score changed, the largest change first
    agreement: Agreement | None  # None: compared by stored scores alone (no axes either)
    totals: tuple[int, int] = (0, 0)  # each run's conversations: what the pairs are a part of
    pairs: str = ""  # what a pair is, in words, where a run grades the records' own completions
    # Both runs made with a length adjustment: B - A of their length-adjusted scores, the headline.
    length_adjusted: Difference | None = None

    @property
    def settings_differ(self) -> list[SettingDifference]:
        return settings_differ(self.run_a, self.run_b)

    @property
    def repeats(self) -> int:
        """The runs' --repeats (paired runs have the same): a repeat is labelled "repeat 1 of 2"."""
        return self.run_a.planned.repeats

    def as_json(self) -> dict:
        return {
            "run_a": {
                "id": self.run_a.id,
                "name": self.run_a.name,
                "kind": self.run_a.kind,
                "conversations": self.totals[0],
            },
            "run_b": {
                "id": self.run_b.id,
                "name": self.run_b.name,
                "kind": self.run_b.kind,
                "conversations": self.totals[1],
            },
            **self.overall.as_dict(),
            **({"length_adjusted": self.length_adjusted.as_dict()} if self.length_adjusted else {}),
            "themes": {name: d.as_dict() for name, d in self.themes.items()},
            "axes": {name: d.as_dict() for name, d in self.axes.items()},
            "settings_differ": {d.name: d.as_dict() for d in self.settings_differ},
            "moved": [m.as_dict() for m in self.moved[:MOVED_LISTED]],
            "agreement": self.agreement.as_dict() if self.agreement else None,
            **({"pairs": self.pairs} if self.pairs else {}),
        }


# Named on the runs' own lines (model, grader, dataset): not said twice.
NAMED_ON_THE_RUN_LINE = {"model_test", "model_grader"}


@dataclass(frozen=True, slots=True)
class SettingDifference:
    """A setting the two runs were made with apart: a grader's temperature, an endpoint..."""

    name: str  # as show --json names it (temperature_grader)
    a: Any
    b: Any

    @property
    def key(self) -> str:
        """As .env and the settings' documentation name it (TEMPERATURE_GRADER)."""
        try:
            return setting_for(self.name).key
        except KeyError:  # a setting of an older hbtui, stored with its run
            return self.name.upper()

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b}


def settings_differ(run_a: RunRow, run_b: RunRow) -> list[SettingDifference]:
    """The settings recorded with each run that differ, by name; keys, paths and the like are not
    recorded, and URLs lose any user:password part."""

    def shown(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [without_credentials(item) for item in value]
        return without_credentials(value)

    names = sorted((set(run_a.settings) | set(run_b.settings)) - UNRECORDED_SETTINGS - NAMED_ON_THE_RUN_LINE)
    pairs = [
        SettingDifference(name, shown(run_a.settings.get(name)), shown(run_b.settings.get(name))) for name in names
    ]
    return [pair for pair in pairs if pair.a != pair.b]


def compare(
    run_a: RunRow,
    run_b: RunRow,
    conversations_a: Sequence[Conversation],
    conversations_b: Sequence[Conversation],
    seed: int = BOOTSTRAP_SEED,
) -> Comparison:
    if run_a.id == run_b.id:
        raise NothingToCompare(f"run {run_a.id} compared with itself: give two different runs")
    matched = pair_up(run_a, run_b, conversations_a, conversations_b)
    scored = []
    for a, b in matched:
        values_a, values_b = a.metrics(), b.metrics()
        if values_a is not None and values_b is not None:
            scored.append((a, b, values_a, values_b))
    if not scored:
        raise NothingToCompare(nothing_in_common(run_a, run_b, matched))
    # Every metric in one call: the overall score and the axes mostly have one n, and share draws.
    differences = paired_differences(tag_values(scored), seed=seed)
    moved = [
        Moved(a.prompt_id, a.repeat, a.theme, va[OVERALL], vb[OVERALL], a.id, b.id, a.position, b.position)
        for a, b, va, vb in scored
        if va[OVERALL] != vb[OVERALL]
    ]
    moved.sort(key=lambda m: (-abs(m.change), m.position))
    verdicts_read = all(a.criteria is not None and b.criteria is not None for a, b in matched)
    return Comparison(
        run_a,
        run_b,
        differences[OVERALL],
        by_theme(differences),
        named(differences, AXIS),
        moved,
        agreement(matched) if verdicts_read else None,
        (len(conversations_a), len(conversations_b)),
        pairs_meaning(run_a, run_b),
        differences.get(OVERALL_LENGTH_ADJUSTED),
    )


def completions_of_run(run: RunRow) -> str | None:
    """The records' own completions a run grades (physician, reference), or None: a model's replies."""
    return (run.plan or {}).get("completions")


def pair_up(
    run_a: RunRow, run_b: RunRow, conversations_a: Sequence[Conversation], conversations_b: Sequence[Conversation]
) -> list[tuple[Conversation, Conversation]]:
    """The pairs, in A's plan order. Runs whose replies come from the same place pair one to one,
    by the key and, for the records' own completions, by which completion. Otherwise a record's
    several reference completions each pair with the other run's one reply to that record."""
    same_source = completions_of_run(run_a) == completions_of_run(run_b)
    by_key: dict[tuple, list[Conversation]] = {}
    for b in conversations_b:
        by_key.setdefault((*b.key, b.completion) if same_source else b.key, []).append(b)
    return [(a, b) for a in conversations_a for b in by_key.get((*a.key, a.completion) if same_source else a.key, [])]


SIDES = {
    None: "the model's reply",
    "physician": "the physicians' ideal completion (of the record's group)",
    "reference": "one of the four reference completions physicians of Groups 2 and 3 were shown",
}


def pairs_meaning(run_a: RunRow, run_b: RunRow) -> str:
    """What a pair is when a run grades the records' own completions; empty for two model runs."""
    mode_a, mode_b = completions_of_run(run_a), completions_of_run(run_b)
    if mode_a is None and mode_b is None:
        return ""
    if mode_a == mode_b:
        return f"each pair is the same {mode_a} completion of a record, graded in both runs"
    several = (
        " (each of a record's reference completions pairs with the other run's reply to it)"
        if "reference" in (mode_a, mode_b)
        else ""
    )
    return (
        f"each pair is A's {SIDES.get(mode_a, mode_a)} and B's {SIDES.get(mode_b, mode_b)} for the same"
        f" prompt, each graded by its own run{several}: B - A is how far one answer's score is from the other's"
    )


def tag_values(scored: list[tuple]) -> dict[str, tuple[list[float], list[float]]]:
    """Per metric (overall, themes, axes), the values of the pairs where both runs define it (a
    rubric tag is left out where its criteria have no positive points)."""
    values: dict[str, tuple[list[float], list[float]]] = {}
    for _a, _b, values_a, values_b in scored:
        for name, value in values_a.items():
            if (name in (OVERALL, OVERALL_LENGTH_ADJUSTED) or name.startswith(COMPARED)) and name in values_b:
                pair = values.setdefault(name, ([], []))
                pair[0].append(value)
                pair[1].append(values_b[name])
    return values


def named(differences: dict[str, Difference], prefix: str) -> dict[str, Difference]:
    return {name[len(prefix) :]: d for name, d in sorted(differences.items()) if name.startswith(prefix)}


def by_theme(differences: dict[str, Difference]) -> dict[str, Difference]:
    """The themes, then HealthBench Professional's categories named with theirs ("use_case:
    consult"), which take the themes' place in a run of its records."""
    found = named(differences, THEME)
    for prefix in CATEGORY_PREFIXES:
        found |= {f"{prefix[:-1]}: {name}": d for name, d in named(differences, prefix).items()}
    return found


def agreement(matched: Sequence[tuple[Conversation, Conversation]]) -> Agreement:
    """Over every criterion both runs graded (met or not met), in conversations they share."""
    overall = [0, 0, 0, 0]
    by_axis: dict[str, list[int]] = {}
    axes_of: dict[tuple[str, ...], list[list[int]]] = {}  # tag list -> the counts of its axes
    disagreements: list[Disagreement] = []
    for a, b in matched:
        if a.criteria is None or b.criteria is None:  # not read: compared by stored scores alone
            continue
        criteria_b: list[Criterion | None] = list(b.criteria)
        if [c.idx for c in a.criteria] != [c.idx for c in b.criteria]:  # a partial row set: match by idx
            by_idx = {c.idx: c for c in b.criteria}
            criteria_b = [by_idx.get(c.idx) for c in a.criteria]
        for criterion, other in zip(a.criteria, criteria_b):
            if criterion.met is None or other is None or other.met is None:
                continue
            index = cell(criterion.met, other.met)
            overall[index] += 1
            counts = axes_of.get(criterion.tags)
            if counts is None:
                counts = axes_of[criterion.tags] = [
                    by_axis.setdefault(tag[len(AXIS) :], [0, 0, 0, 0])
                    for tag in dict.fromkeys(criterion.tags)
                    if tag.startswith(AXIS)
                ]
            for axis_counts in counts:
                axis_counts[index] += 1
            if index in (1, 2):
                disagreements.append(
                    Disagreement(
                        a.prompt_id,
                        a.repeat,
                        a.theme,
                        criterion.idx,
                        criterion.text,
                        criterion.points,
                        criterion.met,
                        other.met,
                        a.id,
                        b.id,
                        a.position,
                        b.position,
                    )
                )
    disagreements.sort(key=lambda d: (-abs(d.points), d.position, d.idx))
    return Agreement(
        Kappa(sum(overall), *overall),
        {name: Kappa(sum(counts), *counts) for name, counts in sorted(by_axis.items())},
        disagreements,
    )


def nothing_in_common(run_a: RunRow, run_b: RunRow, matched: Sequence) -> str:
    runs = f"runs {run_a.id} and {run_b.id}"
    if matched:
        return f"{runs} have no conversation that both graded in full yet ({len(matched)} in common)"
    unjoined = [run.id for run in (run_a, run_b) if run.kind == IMPORTED and not run.dataset_sha256]
    if unjoined:
        return (
            f"{runs} share no conversation: run {unjoined[0]} was imported without --dataset, so its records"
            " are made from its file and pair only with records made alike; import it again with --dataset PATH"
            " (the HealthBench file of the other run) to pair it"
        )
    if run_a.dataset_sha256 != run_b.dataset_sha256:
        return (
            f"{runs} are on different datasets ({run_a.dataset_name} and {run_b.dataset_name}) and share no"
            " conversation: a record pairs only with the identical record (prompt_id, rubric) and repeat"
        )
    return f"{runs} share no conversation (different samples of {run_a.dataset_name})"


async def compare_runs(store, run_a: RunRow, run_b: RunRow, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """Read both runs from ``store`` (a StoreReads) and compare them."""
    rows_a = await store.comparison_conversations(run_a.id), await store.comparison_verdicts(run_a.id)
    rows_b = await store.comparison_conversations(run_b.id), await store.comparison_verdicts(run_b.id)
    lengths = await reply_lengths(store, run_a, run_b)

    def computed() -> Comparison:
        with collector_paused():
            conversations_a, conversations_b = conversations_from_rows(*rows_a), conversations_from_rows(*rows_b)
            with_lengths(conversations_a, run_a, lengths)
            with_lengths(conversations_b, run_b, lengths)
            return compare(run_a, run_b, conversations_a, conversations_b, seed)

    # Off the event loop: the bootstraps of two 5,000-conversation runs take a few hundred ms of
    # CPU, and the app's screen keeps drawing meanwhile.
    return await asyncio.to_thread(computed)


async def compare_scores(store, run_a: RunRow, run_b: RunRow, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """The comparison of the stored conversation scores alone (overall, themes, what moved), a
    tenth of the reading of ``compare_runs``: what a screen shows while the rest is computed."""
    conversations_a = conversations_from_rows(await store.comparison_conversations(run_a.id))
    conversations_b = conversations_from_rows(await store.comparison_conversations(run_b.id))
    lengths = await reply_lengths(store, run_a, run_b)
    with_lengths(conversations_a, run_a, lengths)
    with_lengths(conversations_b, run_b, lengths)
    return await asyncio.to_thread(compare, run_a, run_b, conversations_a, conversations_b, seed)


async def reply_lengths(store, run_a: RunRow, run_b: RunRow) -> dict[int, int] | None:
    """Each conversation's reply characters, by conversation id, when both runs were made with a
    length adjustment (their headline is the length-adjusted score); None otherwise: a length-
    adjusted score beside a plain one would compare two different measures."""
    if run_a.recorded_length is None or run_b.recorded_length is None:
        return None
    return {**await store.reply_lengths(run_a.id), **await store.reply_lengths(run_b.id)}


def with_lengths(conversations: Sequence[Conversation], run: RunRow, lengths: dict[int, int] | None) -> None:
    """Each conversation given its run's length adjustment and its reply's characters."""
    if lengths is None:
        return
    for conversation in conversations:
        conversation.length = run.recorded_length
        conversation.reply_chars = lengths.get(conversation.id, 0)


@contextmanager
def collector_paused():
    """The cyclic garbage collector off while 120,000 acyclic objects are made: its passes over
    them took half the time of building two runs of 5,000 conversations (116-279 ms -> 63 ms)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def differing_criteria(verdicts_a: Sequence, verdicts_b: Sequence) -> list[tuple]:
    """(verdict of A, verdict of B) of each criterion (same idx) whose two verdicts differ, by
    status: met / not met / error / pending. Takes the store's VerdictRows."""
    by_idx = {v.idx: v for v in verdicts_b}
    return [(v, by_idx[v.idx]) for v in verdicts_a if v.idx in by_idx and v.status != by_idx[v.idx].status]
