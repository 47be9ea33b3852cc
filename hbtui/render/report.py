"""Plain-text renderings of runs and reports for the headless commands (`runs`, `show`)."""

from __future__ import annotations

import time
from typing import Any

from hbtui.analysis.run_stats import RunStatistics, WorstAtKScores, penalty_label
from hbtui.core.batch_files import awaiting_hint
from hbtui.core.completion_groups import group_description, skipped_line
from hbtui.core.fidelity import requests_line
from hbtui.core.invocation import invoked_as
from hbtui.core.rate_limits import limits_line
from hbtui.core.run_kinds import IMPORTED, META_EVAL, META_EVAL_SCORE, MODEL_RUN, kind_label
from hbtui.core.run_records import ImportedFrom
from hbtui.core.score_bins import histogram
from hbtui.core.scoring import Metric
from hbtui.core.settings.prices import cost_text, total_cost, usage_line
from hbtui.core.text import middle_cut, one_line
from hbtui.core.verdicts import AWAITING_BATCH, FINISHED, INTERRUPTED
from hbtui.store import RunRow
from hbtui.store.run_report import (
    ADJUSTED_MARK,
    AXIS_PREFIX,
    CATEGORY_PREFIXES,
    HEADLINE_ADJUSTED,
    NO_AXES,
    THEME_PREFIX,
    StoredReport,
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(metric: Metric | None) -> str:
    if not metric:
        return "-"
    low, high = metric.ci95
    return f"{low:.3f}-{high:.3f}"


def _status(run: RunRow) -> str:
    ago = run.stopped_ago()
    return f"{run.shown_status()} {ago}" if ago else run.status_label()


def stated_score_note(score: float | None, stated: float | None) -> str:
    """The score an imported file states, beside hbtui's, when they differ (to 4 decimals)."""
    if stated is None or (score is not None and round(score, 4) == round(stated, 4)):
        return ""
    return f" (the file states {stated:.4f})"


def kind_lines(run: RunRow) -> list[str]:
    """What a run of another kind than a model run is, for `show`: an import says where from."""
    if run.kind != IMPORTED:
        return []
    imported: ImportedFrom | dict[str, Any] = run.imported or {}
    lines = [
        f"imported from {one_line(str(imported.get('path')), 300)} ({one_line(str(imported.get('format')), 60)}):"
        " its replies and verdicts as that file holds them, scored by hbtui; no request of it can be repeated,"
        f" its replies can be graded again (hbtui regrade {run.id})"
    ]
    stated = imported.get("stated_score")
    if stated is not None:
        note = stated_score_note(run.score, stated)
        lines.append(
            f"the file's own score: {stated:.4f}"
            + (", which hbtui's scoring does not give" if note else ", as hbtui's")
        )
    lines += [f"note: {one_line(str(note), 300)}" for note in imported.get("notes") or []]
    return lines


def render_runs(runs: list[RunRow], width: int | None = None) -> str:
    """The runs as a table; given a ``width`` (a terminal's), the table fits it: the name is cut
    in the middle, then the least telling columns go (data, grader, created, model)."""
    if not runs:
        return "no runs yet: start one with `hbtui run` or `hbtui`"
    header = ["id", "name", "status", "score", "95% CI", "n", "model", "created", "grader", "data"]
    # A database of model runs alone lists as it always did; any other kind gets its column.
    kinds = any(run.kind != MODEL_RUN for run in runs)
    if kinds:
        header.insert(3, "kind")
    rows = []
    adjusted = []  # runs whose score is their length-adjusted score
    for run in runs:
        headline_name, headline = run.headline
        meta = run.kind == META_EVAL  # its score is the grader's F1, its n its rows; it tests no model
        if headline_name == HEADLINE_ADJUSTED:
            adjusted.append(run.id)
        rows.append(
            [
                str(run.id),
                one_line(run.name, 64),
                _status(run),
                *([one_line(kind_label(run.kind, run.imported), 40)] if kinds else []),
                (
                    f"F1 {_fmt(run.score)}"
                    if meta
                    else (f"{ADJUSTED_MARK} " if headline_name == HEADLINE_ADJUSTED else "") + _fmt(run.headline_score)
                ),
                _ci(headline),
                str(run.n_conversations) if meta else f"{run.n_scored or 0}/{run.n_conversations}",
                "-" if meta else one_line(run.model_test, 24),
                time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at)),
                one_line(run.model_grader, 24),
                one_line(run.dataset_name, 16),
            ]
        )
    table = [header, *rows]
    columns = list(range(len(header)))
    widths = [max(len(r[i]) for r in table) for i in columns]
    name = header.index("name")

    def total() -> int:
        return sum(widths[i] for i in columns) + 2 * (len(columns) - 1)

    if width is not None:
        while total() > width and widths[name] > 20:  # first the name, down to 20 characters
            widths[name] = max(20, widths[name] - (total() - width))
        while total() > width and len(columns) > 6 + kinds:  # then the columns from the right
            columns.pop()
    lines = []
    for r in table:
        cells = [middle_cut(r[i], widths[i]) if i == name else r[i] for i in columns]
        lines.append("  ".join(cell.ljust(widths[i]) for cell, i in zip(cells, columns)).rstrip())
    left_out = header[len(columns) :]
    if left_out:  # said, or the columns would seem not to exist
        lines.append(f"({', '.join(left_out)} left out at {width} columns; piped, the table keeps them)")
    if adjusted:
        listed = ", ".join(map(str, adjusted))
        lines.append(
            f"{ADJUSTED_MARK}: the {HEADLINE_ADJUSTED}, the headline of run{'s' * (len(adjusted) != 1)} {listed},"
            f" made with a length adjustment (show gives the score before it)"
        )
    if any(run.kind == META_EVAL for run in runs):
        lines.append(f"meta-eval runs: {META_EVAL_SCORE}; n is their rows")
    return "\n".join(lines)


def driver_lines(runs: list[RunRow], now: float | None = None) -> list[str]:
    """Below the runs table: the host and process driving each running run (a silent one said
    so, with what to do about it), and the log of each detached driver that did not finish."""
    lines = []
    for run in runs:
        driver = run.driver_label(now)
        if driver is not None:
            line = f"run {run.id}: driven by {one_line(driver, 120)}"
            if run.shown_status(now) == INTERRUPTED:  # gone, or silent on another host past its patience
                line += f": it drives nothing now, {invoked_as()} resume {run.id} takes the run over"
        elif run.driver_log and run.shown_status(now) != FINISHED:
            line = f"run {run.id}: {run.shown_status(now)}"
        else:
            continue
        if run.driver_log:
            line += f"; log {one_line(run.driver_log, 300)}"
        lines.append(line)
    return lines


def text_histogram(scores: list[float], width: int = 40) -> list[str]:
    bins = histogram(scores)
    if not bins:
        return ["(no scored conversations yet)"]
    peak = max(count for _, _, count in bins) or 1
    return [
        f"{low:5.1f} to {high:4.1f}  {'█' * round(count / peak * width):<{width}}  {count}" for low, high, count in bins
    ]


def _breakdown(report: StoredReport, prefix: str, title: str) -> list[str]:
    # Theme and axis names come from the dataset: one line each, their control characters shown.
    items = [(one_line(name, 60), m) for name, m in report.breakdown(prefix)]
    if not items:
        return []
    width = max(len(name) for name, _ in items)
    lines = [f"{title:<{width}}  score  95% CI        n"]
    for name, m in items:
        lines.append(f"{name:<{width}}  {m.value:.3f}  {_ci(m):<12}  {m.n}")
    return [*lines, ""]


def length_adjusted_line(stats: RunStatistics) -> str | None:
    if stats.penalty is None:
        return None
    how = f"(penalty {penalty_label(stats.penalty)} per 500 characters from {stats.centre:g})"
    m = stats.length_adjusted
    if m is None:
        return f"{HEADLINE_ADJUSTED} -  {how}"
    return f"{HEADLINE_ADJUSTED} {m.value:.4f}  95% CI {m.ci95[0]:.3f}-{m.ci95[1]:.3f}  n {m.n}  {how}"


def score_lines(run: RunRow, report: StoredReport, overall: Metric, stats: RunStatistics | None) -> list[str]:
    """The score, and the length-adjusted score where one is computed; a run made with a length
    adjustment leads with the adjusted one, its headline, and names the other as what it is."""
    figures = (
        f"{overall.value:.4f}  95% CI {_ci(overall)}  bootstrap std {overall.bootstrap_std:.4f}"
        f"  n {overall.n}  median {_fmt(report.median)}"
    )
    adjusted = length_adjusted_line(stats) if stats else None
    if run.recorded_length is not None and adjusted is not None:
        return [
            adjusted,
            f"score before the length adjustment {figures}",
            "(the breakdowns and the histogram are of the scores before it: simple-evals adjusts the overall score alone)",
        ]
    return [f"score {figures}", *([adjusted] if adjusted else [])]


def worst_at_k_lines(worst: WorstAtKScores | None) -> list[str]:
    """A small table: k, then the expected worst score of k repeats of a prompt."""
    if worst is None:
        return []
    lines = [f"worst-at-k over {worst.repeats} repeats ({worst.n_prompts} prompts with every repeat scored)"]
    lines.append("k      " + "  ".join(f"{k:>5}" for k, _ in worst.by_k()))
    lines.append("score  " + "  ".join(f"{_fmt(score):>5}" for _, score in worst.by_k()))
    return [*lines, ""]


def usage_lines(stats: RunStatistics) -> list[str]:
    """Tokens of both models, with their cost where the price table has the model."""
    lines = [
        f"{'tokens' if i == 0 else '':<8}{role} {one_line(usage.model, 40)}: {usage_line(usage)}"
        for i, (role, usage) in enumerate(stats.called())
    ]
    total = total_cost([usage for _, usage in stats.called()])
    if total is not None:
        lines.append(f"cost    {cost_text(total)} in all (prices per million tokens from the price table)")
    return lines


def group_lines(report: StoredReport) -> list[str]:
    """A run of the records' own completions: each physicians' group's score, scored apart."""
    if not report.groups:
        return []
    lines = ["by physicians' group, each scored on its own (as the reference scores them)"]
    for name, group in report.groups.items():
        m = group.overall
        figures = f"{m.value:.4f}  95% CI {_ci(m)}  n {m.n}" if m else "-"
        lines.append(f"  {one_line(name, 20)}  {figures}  {group_description(name)}")
    return lines


def render_report(
    run: RunRow,
    brief: bool = False,
    scores: list[float] | None = None,
    stats: RunStatistics | None = None,
    batches: list[str] | None = None,
) -> str:
    """``batches``: a run through the batch API's batches (hbtui.render.batch_state.batch_lines)."""
    report = run.report
    overall = report.overall if report else None
    head = (
        f"run {run.id} {one_line(run.name, 200)} ({_status(run)}): {one_line(run.model_test, 40)} graded by"
        f" {one_line(run.model_grader, 40)} on {one_line(run.dataset_name, 80)}"
        + (f" (the replies of run {run.source_run_id}, graded again)" if run.source_run_id else "")
    )
    if run.error and not brief:  # brief: after a run, whose command says its error on a line of its own
        head += f"\nerror: {one_line(run.error, 400)}"
    if run.status == AWAITING_BATCH:  # its answers come from the user's own engine: what to do
        head += f"\n{one_line(awaiting_hint(run.id, run.plan), 600)}"
    head += "".join(f"\n{one_line(line, 300)}" for line in batches or ())
    if run.kind == IMPORTED:
        head += "".join(f"\n{line}" for line in kind_lines(run))
    else:  # an import sent no requests of hbtui's
        head += f"\n{one_line(requests_line(run.requests), 600)}"
        limits = limits_line((run.requests or {}).get("limits"))
        if limits:
            head += f"\n{one_line(limits, 600)}"
    skipped = skipped_line(run.planned)
    if skipped:
        head += f"\n{one_line(skipped, 600)}"
    if report is None or overall is None:
        return "\n".join([head, "no conversation is fully graded yet", *(usage_lines(stats) if stats else [])])
    score_text = score_lines(run, report, overall, stats)
    if brief:
        return "\n".join(
            [head, score_text[0], *group_lines(report), *score_text[1:], *(usage_lines(stats) if stats else [])]
        )
    lines = [head, score_text[0], *group_lines(report), *score_text[1:]]
    conv, crit = report.conversations, report.criteria
    pos_share, neg_share = crit.positive_met_share, crit.negative_triggered_share
    lines.append(
        f"positive criteria met {_fmt(pos_share and pos_share * 100, 1)}% ({crit.positive_met}/{crit.positive})"
        f"  penalties triggered {_fmt(neg_share and neg_share * 100, 1)}%"
        f" ({crit.negative_triggered}/{crit.negative})"
    )
    lines.append(
        f"conversations {conv.total}: scored {conv.scored}, incomplete {conv.incomplete}"
        f" (grading errors {crit.errors}), without a reply {conv.excluded}"
        + (f" (their {crit.skipped} criteria skipped)" if crit.skipped else "")
        + (f"; criteria pending {crit.pending}" if crit.pending else "")
        + (f"; {crit.from_cache} verdicts from the cache" if crit.from_cache else "")
    )
    if stats:
        lines += usage_lines(stats)
    lines.append("")
    if stats:
        lines += worst_at_k_lines(stats.worst_at_k)
    lines += _breakdown(report, THEME_PREFIX, "theme")
    for prefix in CATEGORY_PREFIXES:  # HealthBench Professional's, as themes are
        lines += _breakdown(report, prefix, prefix[:-1].replace("_", " "))
    axes = _breakdown(report, AXIS_PREFIX, "axis")
    lines += axes if axes or not report.has_categories else [f"axis: {NO_AXES}", ""]
    lines.append("conversation scores")
    lines += text_histogram(scores or [])
    return "\n".join(lines)
