"""`hbtui compare` as text: the two runs, the paired difference, themes, axes, grader agreement
and what moved. Names, prompt ids and criteria are data: one line each, controls made visible."""

from __future__ import annotations

from hbtui.analysis.compare import MOVED_LISTED, Comparison, Difference, verdict_word
from hbtui.core.numbering import repeat_label
from hbtui.core.run_kinds import MODEL_RUN, kind_label
from hbtui.core.scoring import BOOTSTRAP_SAMPLES
from hbtui.core.text import one_line
from hbtui.core.verdicts import Kappa
from hbtui.store.rows import RunRow
from hbtui.store.run_report import HEADLINE_ADJUSTED

DISAGREEMENTS_LISTED = 20
NAME_WIDTH = 28


def signed(value: float) -> str:
    return f"{value:+.3f}"


def interval(ci: tuple[float, float]) -> str:
    return f"{signed(ci[0])} to {signed(ci[1])}"


def said(met: bool) -> str:
    return verdict_word(met).replace("_", " ")


def run_line(label: str, run: RunRow) -> str:
    kind = "" if run.kind == MODEL_RUN else f" ({one_line(kind_label(run.kind, run.imported), 60)})"
    return (
        f"{label}  run {run.id} {one_line(run.name, 50)}{kind}  model {one_line(run.model_test, 40)}"
        f"  grader {one_line(run.model_grader, 40)}  dataset {one_line(run.dataset_name, 40)}"
    )


def kappa_text(kappa: Kappa) -> str:
    if kappa.kappa is None:
        return f"kappa undefined: {kappa.undefined}"
    return f"kappa {kappa.kappa:.3f} (agreement {kappa.observed:.3f}, by chance {kappa.expected:.3f})"


def difference_rows(title: str, rows: dict[str, Difference]) -> list[str]:
    if not rows:
        return []
    lines = ["", f"{title:<{NAME_WIDTH}} {'n':>6}  {'A':>6}  {'B':>6}  {'B - A':>7}  95% CI"]
    for name, d in rows.items():
        lines.append(
            f"{one_line(name, NAME_WIDTH):<{NAME_WIDTH}} {d.n:>6,}  {d.score_a:>6.3f}  {d.score_b:>6.3f}"
            f"  {signed(d.value):>7}  {interval(d.ci95)}"
        )
    return lines


def repeated(repeat: int, repeats: int) -> str:
    """ " repeat 1 of 2" after a prompt_id, in a run with repeats."""
    label = repeat_label(repeat, repeats)
    return f" {label}" if label else ""


def setting_text(value: object) -> str:
    """A setting's value as a comparison shows it: a list of endpoints joined, none as unset."""
    if value is None:
        return "unset"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value) or "unset"
    return str(value)


def difference_lines(result: Comparison) -> list[str]:
    """The settings the two runs were made with apart, a line each: what else differs between
    them than the models (a grader's temperature, its endpoint, the prompt...)."""
    differ = result.settings_differ
    if not differ:
        return ["settings: the same but for what the lines above name"]
    width = max(len(d.key) for d in differ)
    return ["settings that differ:"] + [
        f"  {d.key:<{width}}  A {one_line(setting_text(d.a), 60)}   B {one_line(setting_text(d.b), 60)}" for d in differ
    ]


def length_settings(result: Comparison) -> str:
    """The length adjustments the two runs were made with, in words: once when they are one."""
    a, b = result.run_a.recorded_length, result.run_b.recorded_length

    def words(length: tuple[float, float] | None) -> str:
        return "none" if length is None else f"penalty {length[0]:g} per 500 characters from {length[1]:g}"

    return words(a) if a == b else f"A {words(a)}, B {words(b)}"


def length_adjusted_alone(result: Comparison) -> str | None:
    """Where one run was made with a length adjustment and the other not: said, since that run's
    headline elsewhere is its length-adjusted score, and here both are compared before it."""
    a, b = result.run_a.recorded_length, result.run_b.recorded_length
    if (a is None) == (b is None):
        return None
    which = "A" if a is not None else "B"
    return (
        f"run {which} alone was made with a length adjustment: both are compared by their scores before it"
        f" (its {HEADLINE_ADJUSTED} is in show)"
    )


def render_comparison(result: Comparison) -> str:
    overall = result.overall
    lines = [
        run_line("A", result.run_a),
        run_line("B", result.run_b),
        *difference_lines(result),
        f"paired conversations {overall.n:,} of A's {result.totals[0]:,} and B's {result.totals[1]:,} (same prompt_id,"
        " record and repeat, graded in full by both); the scores below are over the pairs alone",
        *([f"pairs: {result.pairs}"] if result.pairs else []),
    ]
    adjusted = result.length_adjusted
    one_adjusted = length_adjusted_alone(result)
    if one_adjusted:
        lines.append(one_adjusted)
    if adjusted is not None:  # both made with a length adjustment: their headline first
        lines.append(
            f"{HEADLINE_ADJUSTED} A {adjusted.score_a:.3f}   B {adjusted.score_b:.3f}   B - A"
            f" {signed(adjusted.value)}   95% CI {interval(adjusted.ci95)} ({length_settings(result)})"
        )
    lines.append(
        f"{'score before it' if adjusted else 'score'} A {overall.score_a:.3f}   B {overall.score_b:.3f}"
        f"   B - A {signed(overall.value)}   95% CI {interval(overall.ci95)}"
        f" (paired bootstrap, {BOOTSTRAP_SAMPLES:,} resamples)"
    )
    lines += difference_rows("by theme", result.themes)
    lines += difference_rows("by axis", result.axes)
    agreement = result.agreement
    if agreement is None:  # compared by stored scores alone: no verdict was read
        return "\n".join(lines)
    lines += [
        "",
        f"grader agreement over {agreement.overall.n:,} criteria graded by both: {kappa_text(agreement.overall)}",
    ]
    for name, kappa in agreement.axes.items():
        lines.append(f"  {one_line(name, NAME_WIDTH):<{NAME_WIDTH}} {kappa.n:>6,}  {kappa_text(kappa)}")
    disagreements = agreement.disagreements
    if disagreements:
        lines += [
            "",
            f"criteria the graders disagree on: {len(disagreements):,}"
            + (
                f" (the {DISAGREEMENTS_LISTED} worth the most points; --json lists all)"
                if len(disagreements) > DISAGREEMENTS_LISTED
                else ""
            ),
        ]
        for d in disagreements[:DISAGREEMENTS_LISTED]:
            lines.append(
                f"  A {said(d.met_a):<7} B {said(d.met_b):<7} [{d.points:g}] "
                f"{one_line(d.criterion, 70)}  ({d.numbers}  {one_line(d.prompt_id, 40)}"
                f"{repeated(d.repeat, result.repeats)})"
            )
    moved = result.moved
    lines += [
        "",
        f"moved most: {min(len(moved), MOVED_LISTED)} of {len(moved):,} conversations whose score changed"
        if moved
        else "no conversation's score changed",
    ]
    for m in moved[:MOVED_LISTED]:
        lines.append(
            f"  {signed(m.change)}  A {m.score_a:6.3f}  B {m.score_b:6.3f}  {m.numbers}  {one_line(m.prompt_id, 40)}"
            f"{repeated(m.repeat, result.repeats)}  {one_line(m.theme or '-', 30)}"
        )
    return "\n".join(lines)
