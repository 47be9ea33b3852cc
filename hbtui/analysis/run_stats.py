"""The reference's other statistics of a run, beside its score: worst-at-k over repeats, the
length-adjusted score, and the tokens and cost of both models.

None of these changes what a run measures: they are computed when a run is reported, from
what the store holds, so `show`, the run's screen and `description.md` say the same thing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from math import comb

from hbtui.core import scoring
from hbtui.core.batch_files import BatchFiles
from hbtui.core.settings.config import LENGTH_PENALTIES, Settings
from hbtui.core.settings.prices import ModelUsage, Price, model_usage, usage_json
from hbtui.store import RunRow, Store


@dataclass(frozen=True, slots=True)
class WorstAtKScores:
    """The expected worst score of k repeats of a prompt, for k = 1..repeats (None while no
    prompt has every repeat scored), over ``n_prompts`` prompts."""

    scores: tuple[float | None, ...]
    n_prompts: int

    @property
    def repeats(self) -> int:
        return len(self.scores)

    def by_k(self) -> list[tuple[int, float | None]]:
        return list(enumerate(self.scores, start=1))

    def as_json(self) -> dict[str, float | int | None]:
        """``{"1": ..., "2": ..., "n_prompts": ...}``, as `show --json` prints it."""
        return {**{str(k): score for k, score in self.by_k()}, "n_prompts": self.n_prompts}


def worst_at_k(groups: Sequence[Sequence[float]], repeats: int) -> WorstAtKScores | None:
    """Worst-at-k for k = 1..``repeats``, as the HealthBench paper defines it.

    For each prompt, the expected minimum conversation score (unclipped) over a size-k subset of
    its repeats drawn uniformly; then the mean over prompts, clipped to [0, 1]. ``groups`` holds
    the prompts whose ``repeats`` scores are all there. With a prompt's scores sorted ascending
    s_1..s_K, the minimum of a k-subset is s_i with probability C(K-i, k-1) / C(K, k): the subset
    holds s_i and k-1 of the K-i scores above it.
    """
    import numpy as np  # loaded when first needed: `hbtui run` starts without it

    if repeats < 2:
        return None
    if not groups:
        return WorstAtKScores(scores=(None,) * repeats, n_prompts=0)
    ordered = np.sort(np.asarray(groups, dtype=float), axis=1)
    scores = []
    for k in range(1, repeats + 1):
        chance = [comb(repeats - i, k - 1) / comb(repeats, k) for i in range(1, repeats + 1)]
        scores.append(float(np.clip((ordered @ np.asarray(chance)).mean(), 0, 1)))
    return WorstAtKScores(scores=tuple(scores), n_prompts=len(groups))


def complete_groups(outcomes: Sequence[tuple[int, int, float | None]], repeats: int) -> list[list[float]]:
    """Each prompt's scores over its repeats, for the prompts whose every repeat is scored.

    ``outcomes`` are (position, repeat, score). A run lays its repeats out as whole copies of the
    sampled list (position = repeat * records + slot), so a prompt is its slot: two identical
    records sampled twice stay two prompts.
    """
    records = sum(1 for _, repeat, _ in outcomes if repeat == 0)
    slots: dict[int, list[float | None]] = {}
    for position, repeat, score in outcomes:
        slots.setdefault(position - repeat * records, []).append(score)
    complete = []
    for scores in slots.values():
        known = [s for s in scores if s is not None]
        if len(scores) == repeats and len(known) == repeats:
            complete.append(known)
    return complete


OVERALL_LENGTH_ADJUSTED = scoring.OVERALL_LENGTH_ADJUSTED


def length_adjusted(scored: Sequence[tuple[float, int]], penalty: float, centre: float) -> list[float]:
    """Per conversation: score - penalty * (reply characters - centre) / 500 (unclipped)."""
    return [scoring.length_adjusted_score(score, chars, penalty, centre) for score, chars in scored]


def penalty_label(penalty: float, short: bool = False) -> str:
    """A named default says so (``0.0299 (main)``, and where the number comes from unless
    ``short``); any other penalty is the number alone."""
    names = [name for name, value in LENGTH_PENALTIES.items() if value == penalty]
    if not names:
        return f"{penalty:g}"
    return (
        f"{penalty:g} ({names[0]})"
        if short
        else f"{penalty:g} ({names[0]}, MedARC-AI/medmarks #132's value; simple-evals ships none)"
    )


@dataclass(frozen=True, slots=True)
class RunStatistics:
    worst_at_k: WorstAtKScores | None  # None unless the run has 2 repeats or more
    length_adjusted: scoring.Metric | None  # None unless a penalty is set (or nothing is scored)
    penalty: float | None
    centre: float
    test: ModelUsage
    grader: ModelUsage
    # False for a run of the records' own completions: no model under test was called.
    replies_generated: bool = True

    def called(self) -> list[tuple[str, ModelUsage]]:
        """(role, usage) of each model the run called: a completions run's "model under test"
        generated nothing, so its 0 tokens are not a line to print."""
        tested = [("model under test", self.test)] if self.replies_generated else []
        return [*tested, ("grader", self.grader)]

    def metrics_json(self, metrics: Mapping[str, object]) -> dict[str, object]:
        """The report's ``metrics`` with ``overall_score_length_adjusted`` after the overall score
        when a length penalty is set: simple-evals' name for it since 652c89d, computed as it
        computes it (each conversation's score less the penalty, then the clipped mean)."""
        if self.penalty is None or self.length_adjusted is None:
            return dict(metrics)
        out: dict[str, object] = {}
        for name, value in metrics.items():
            out[name] = value
            if name == scoring.OVERALL:
                out[OVERALL_LENGTH_ADJUSTED] = self.length_adjusted.as_dict()
        return out

    def as_json(self) -> dict:
        """What `show --json` adds to the report."""
        out: dict = {}
        if self.worst_at_k is not None:
            out["worst_at_k"] = self.worst_at_k.as_json()
        if self.penalty is not None:
            adjusted = self.length_adjusted.as_dict() if self.length_adjusted else {"value": None, "n": 0}
            out["length_adjusted_score"] = {
                **adjusted,
                "penalty_per_500_chars": self.penalty,
                "centre_chars": self.centre,
            }
        return {**out, **usage_json(self.test, self.grader)}


def reporting_settings(run: RunRow, settings: Settings, told: bool = False) -> Settings:
    """``settings`` with the length adjustment to report ``run`` with: the one it was made with
    (recorded in its settings, as --preset professional sets it), unless ``told`` otherwise (a
    flag of `show`), or unless it recorded none (then the current settings' own)."""
    recorded = run.recorded_length
    if told or recorded is None:
        return settings
    return replace(settings, length_penalty=recorded[0], length_centre=recorded[1])


async def run_statistics(store: Store, run: RunRow, settings: Settings, prices: Mapping[str, Price]) -> RunStatistics:
    """The statistics of ``run`` with the length settings of ``settings`` and the given prices."""
    repeats = run.planned.repeats
    groups = None
    if repeats >= 2:
        groups = complete_groups(await store.repeat_outcomes(run.id), repeats)
    adjusted_values = None
    if settings.length_penalty is not None:
        adjusted_values = length_adjusted(
            await store.scored_reply_lengths(run.id), settings.length_penalty, settings.length_centre
        )
    progress = await store.progress(run.id)
    batch = BatchFiles.online_of(run.plan) is not None  # paid at the batch API's price

    def compute() -> tuple[WorstAtKScores | None, scoring.Metric | None]:
        worst = worst_at_k(groups, repeats) if groups is not None else None
        return worst, scoring.metric(adjusted_values) if adjusted_values else None

    worst, adjusted = await asyncio.to_thread(compute)  # a bootstrap: off the event loop
    return RunStatistics(
        worst_at_k=worst,
        length_adjusted=adjusted,
        penalty=settings.length_penalty,
        centre=settings.length_centre,
        test=model_usage(run.model_test, progress.prompt_tokens_test, progress.completion_tokens_test, prices, batch),
        grader=model_usage(
            run.model_grader, progress.prompt_tokens_grader, progress.completion_tokens_grader, prices, batch
        ),
        replies_generated=not run.planned.completions,
    )
