"""The run screen's summary as text: the score and its interval, the counts, the statistics beside
the score, the groups of a completions run; and the few texts its controls show (a score range
typed, the matches of a search). Apart from the screen (hbtui.tui.screens.run) so that what it
says can be read, and tested, without the widgets.
"""

from __future__ import annotations

import time

from rich.text import Text

from hbtui.analysis.run_stats import RunStatistics, penalty_label
from hbtui.core.batch_files import awaiting_hint
from hbtui.core.fidelity import requests_line
from hbtui.core.scoring import Metric
from hbtui.core.settings.prices import cost_text, total_cost, usage_line
from hbtui.core.text import middle_cut, one_line, visible_controls
from hbtui.core.verdicts import AWAITING_BATCH, FINISHED, INCOMPLETE, INTERRUPTED, RUNNING
from hbtui.render.run_metadata import duration_text, run_duration
from hbtui.store import (
    RunRow,
    SearchMatches,
)
from hbtui.store.run_report import StoredReport
from hbtui.tui.widgets.breakdown import score_style


def parse_range(text: str) -> tuple[float | None, float | None]:
    """``min..max``, ``..max``, ``min..`` or a single number (as the minimum)."""
    text = text.strip()
    if not text:
        return None, None
    low, sep, high = text.partition("..")
    if not sep:
        return float(text), None
    return (float(low) if low.strip() else None), (float(high) if high.strip() else None)


def matches_text(matches: SearchMatches) -> str:
    """Where a search matched, the places with none left out (the filter bar is one line):
    "40 criteria, 7 explanations"."""
    places = (
        (matches.criteria, "criterion", "criteria"),
        (matches.explanations, "explanation", "explanations"),
        (matches.in_text, "reply/prompt", "replies/prompts"),
    )
    return ", ".join(f"{n:,} {plural if n != 1 else one}" for n, one, plural in places if n) or "no match"


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% ({part:,}/{whole:,})" if whole else "-"


def statistics_text(text: Text, stats: RunStatistics) -> None:
    """Tokens of both models, and their cost where the price table has them."""
    for role, usage in stats.called():
        text.append(f"Tokens of the {role} ", style="bold")
        text.append(usage_line(usage))
        text.append("\n")
    total = total_cost([usage for _, usage in stats.called()])
    if total is not None:
        text.append("Cost ", style="bold")
        text.append(f"{cost_text(total)} in all (price table)\n")


def length_adjusted_text(
    text: Text, m: Metric | None, penalty: float | None, centre: float, headline: bool = False
) -> None:
    # As the headline, named in full; beside the score, short enough with a named penalty
    # ("0.0392 (hard)") for 80 columns and the scrollbar.
    text.append("Length-adjusted score " if headline else "Length-adjusted ", style="bold")
    if m is None:
        text.append("–", style="dim")
    else:
        text.append(f"{m.value:.3f}", style=f"bold {score_style(m.value)}")
        text.append(f"  95% CI {m.ci95[0]:.3f}–{m.ci95[1]:.3f}")
    # Short enough for 80 columns with the scrollbar: docs/commands.md says what the numbers are.
    if penalty is not None:
        text.append(f"  penalty {penalty_label(penalty, short=True)} from {centre:g}", style="dim")


def headline_adjustment(
    run: RunRow, report: StoredReport, stats: RunStatistics | None
) -> tuple[Metric | None, float | None, float] | None:
    """The length-adjusted score to lead with, and its penalty and centre: a run made with a
    length adjustment has it as its headline; the stored one until the statistics are computed
    (they may be told another penalty). None: the plain score leads."""
    recorded = run.recorded_length
    if recorded is None:
        return None
    if stats is not None and stats.penalty is not None:
        return stats.length_adjusted, stats.penalty, stats.centre
    if report.length_adjusted is not None:
        return report.length_adjusted, *recorded
    return None


def groups_text(text: Text, report: StoredReport) -> None:
    """A completions run's physicians' groups, each scored on its own (as the reference scores them)."""
    text.append("Groups", style="bold")
    for name, group in (report.groups or {}).items():
        m = group.overall
        text.append(f"  {one_line(name, 20)} ")
        if m is None:
            text.append("-", style="dim")
        else:
            text.append(f"{m.value:.3f}", style=score_style(m.value))
            text.append(f" n {m.n:,}", style="dim")
    text.append("\n")


def summary_text(
    run: RunRow,
    report: StoredReport | None,
    status: str,
    stats: RunStatistics | None = None,
    width: int = 76,
    batches: list[str] | None = None,
) -> Text:
    """``width``: the summary's columns, which the driver's log line is fitted to; ``batches``: a run
    through the batch API's batches (hbtui.render.batch_state.batch_lines)."""
    text = Text()
    overall = report.overall if report else None
    if overall and report is not None:
        headline = headline_adjustment(run, report, stats)
        adjusted_first = headline is not None
        if headline is not None:
            # Made with a length adjustment (--preset professional): that score is its headline.
            length_adjusted_text(text, *headline, headline=True)
            text.append("\n")
        low, high = overall.ci95
        text.append("Before the length adjustment " if adjusted_first else "Score ", style="bold")
        text.append(f"{overall.value:.3f}", style=f"bold {score_style(overall.value)}")
        text.append(f"   95% CI {low:.3f}–{high:.3f}")
        if not adjusted_first:
            text.append(f"   ± {overall.bootstrap_std:.3f} (bootstrap sd)")
        if report.median is not None:
            text.append(f"   median {report.median:.3f}")
        if stats is not None and stats.penalty is not None and not adjusted_first:
            text.append("\n")
            length_adjusted_text(text, stats.length_adjusted, stats.penalty, stats.centre)
    else:
        text.append("Score ", style="bold")
        text.append("not available yet" if report is None else "no scored conversation", style="dim")
    text.append("\n")
    if report and report.groups:
        groups_text(text, report)
    if report:
        conv, crit = report.conversations, report.criteria
        text.append(f"Conversations {conv.total:,}: {conv.scored:,} scored, ")
        text.append(f"{conv.incomplete:,} incomplete", style="yellow" if conv.incomplete else "")
        text.append(", ")
        text.append(f"{conv.excluded:,} excluded (no reply)", style="red" if conv.excluded else "")
        text.append("\n")
        text.append("Positive criteria met ")
        text.append(percent(crit.positive_met, crit.positive), style="green")
        text.append("\nPenalties triggered ")  # its own line: at 80 columns it wrapped
        text.append(percent(crit.negative_triggered, crit.negative), style="red")
        text.append("\n")
        text.append(f"Grader errors {crit.errors:,}", style="magenta" if crit.errors else "")
        if crit.errors or conv.excluded:
            text.append("   R retries what failed", style="dim")
        if crit.pending:
            text.append(f"   criteria pending {crit.pending:,}", style="yellow")
        if crit.from_cache:
            text.append(f"   {crit.from_cache:,} from the cache", style="dim")
        text.append("\n")
        if stats is not None:
            statistics_text(text, stats)
    else:
        text.append("Computing the report…\n", style="dim")
    if run.planned.completions:  # no model replied: the records' own completions are graded
        text.append("Replies ", style="bold")
        text.append(one_line(run.model_test, 60))
        text.append(f" ({run.plan.get('without_completions', 0):,} records without any skipped)", style="dim")
        text.append("\n")
        text.append("Grader ", style="bold")
    else:
        text.append("Model ", style="bold")
        text.append(one_line(run.model_test, 60))
        text.append("   grader ", style="bold")
    text.append(one_line(run.model_grader, 60))
    text.append("\nDataset ", style="bold")
    text.append(one_line(run.dataset_name, 60))
    if run.source_run_id:
        text.append(f"   the replies of run {run.source_run_id}, graded again", style="dim")
    requests = requests_line(run.requests).removeprefix("requests: ")
    text.append("\nRequests ", style="bold")
    text.append(one_line(requests, 300), style="green" if requests == "reference-identical" else "")
    text.append("\nStatus ", style="bold")  # a line of its own: at 80 columns the date wrapped in two
    text.append(
        status,
        style={
            FINISHED: "green",
            RUNNING: "cyan",
            INTERRUPTED: "yellow",
            INCOMPLETE: "yellow",
            AWAITING_BATCH: "cyan",
        }.get(status, "red"),
    )
    text.append("   started ", style="bold")
    text.append(time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at)))
    if batches:  # a run through the batch API: each batch, and whether a process looks at them
        for line in batches:
            text.append("\nBatch ", style="bold")
            text.append(one_line(line, 300))
    elif status == AWAITING_BATCH:  # not ended: its answers come from the user's own engine
        text.append("\nBatch ", style="bold")
        text.append(one_line(awaiting_hint(run.id, run.plan), 300))
    elif run.finished_at and status != RUNNING:
        text.append("   ended ", style="bold")
        # The date once when the run ended the day it started: the line then fits 80 columns.
        same_day = time.localtime(run.finished_at)[:3] == time.localtime(run.created_at)[:3]
        text.append(time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", time.localtime(run.finished_at)))
        text.append("   took ", style="bold")
        text.append(duration_text(run_duration(run)))
    if run.driver_log:  # one line, cut in its middle: the file's name stays whole
        text.append("\nLog ", style="bold")
        text.append(middle_cut(visible_controls(run.driver_log), max(20, width - len("Log "))))
    if run.error:
        text.append("\nError ", style="bold red")
        text.append(one_line(run.error, 300))
    return text
