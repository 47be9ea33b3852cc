"""Exports of a run: JSONL (one line per conversation and repeat), CSV (one row per verdict), and
the run folder (`results.jsonl` + `description.md`) that users of the single-script harness know.

JSONL holds text exactly as stored (JSON escapes control characters itself). CSV and
`description.md` are read in terminals and spreadsheets, so their control characters are made
visible (ESC as ␛, a bidi override as ⟨U+202E⟩; in ids and tags every zero-width character too):
a prompt_id or a theme name cannot send escape sequences from them, nor read backwards. A CSV
text cell that a spreadsheet would take for a formula starts with ``'``. Files are owner-only
since they hold the run's data.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from hbtui.analysis.run_stats import RunStatistics, penalty_label, run_statistics
from hbtui.core.batch_files import BatchFiles
from hbtui.core.completion_groups import group_description, skipped_line
from hbtui.core.fidelity import requests_line
from hbtui.core.files import private_file
from hbtui.core.numbering import conversation_number, criterion_number
from hbtui.core.rate_limits import limits_line
from hbtui.core.settings.config import LENGTH_CENTRE, Settings
from hbtui.core.settings.prices import PriceError, cost_text, load_prices, total_cost, usage_line
from hbtui.core.text import one_line, spreadsheet_cell, visible_controls, visible_line
from hbtui.core.verdicts import FAILED
from hbtui.render.export_reviews import REVIEW_CSV_COLUMNS, ExportReviews
from hbtui.render.run_metadata import duration_text, run_duration
from hbtui.store import ERROR, RunRow, Store, verdict_met
from hbtui.store.reads import parsed_tags
from hbtui.store.rows import ExportConversation, ExportVerdict
from hbtui.store.run_report import StoredReport

CSV_COLUMNS = [
    "position",
    "repeat",
    "prompt_id",
    "conversation_score",
    "criterion_index",
    "criterion",
    "points",
    "tags",
    "criteria_met",
    "status",
    "explanation",
    "error_kind",
    "error",
    # The numbers the browser and every message show (1-based), after the columns scripts read:
    # position, repeat and criterion_index above stay 0-based as they always were.
    "conversation_number",
    "repeat_number",
    "criterion_number",
    *REVIEW_CSV_COLUMNS,  # after the grader's: hbtui.render.export_reviews
    # The conversation's theme (emergency_referrals...), its example tag theme:... without the prefix.
    "theme",
    # A completions run's: which of the record's own completions was graded (empty for a model's reply).
    "completion_group",
    "completion_label",
]


def _sent(value: object) -> object:
    """A sampling setting as description.md says it: its value, or ``not sent`` (None)."""
    return "not sent" if value is None else value


def run_models(run: RunRow) -> dict[str, str]:
    """The names every line of a run's JSONL carries: an export read on another machine (`hbtui
    import`) says which model was graded by which, as the run did."""
    return {"model_test": run.model_test, "model_grader": run.model_grader}


def jsonl_line(
    conv: ExportConversation,
    verdicts: Sequence[ExportVerdict],
    prompt: list,
    reviews: ExportReviews,
    models: dict[str, str],
) -> str:
    """A conversation's line of the JSONL export and of results.jsonl, its newline included;
    ``prompt``: its record's prompt, parsed; ``models``: its run's (run_models)."""
    line = {
        "prompt_id": conv.prompt_id,
        "repeat": conv.repeat,
        "example_tags": list(parsed_tags(conv.example_tags)),
        "prompt": prompt,
        "completion": conv.reply,
        "score": conv.score,
        "rubrics": [
            {
                **rubric_item(v),
                **({"error": f"{v.error_kind}: {v.error}"} if v.status == ERROR else {}),
                "criterion_number": criterion_number(v.idx),
                **reviews.rubric_fields(v),
            }
            for v in verdicts
        ],
        **reviews.conversation_fields(conv, verdicts),
    }
    if conv.reasoning:
        line["reasoning"] = conv.reasoning
    if conv.finish_reason == "length":
        line["truncated"] = True
    if conv.status == FAILED:
        line["generation_error"] = f"{conv.error_kind}: {conv.error}"
    # The browser's numbers (1-based), added after the keys scripts read: "repeat" stays 0-based.
    line["conversation_number"] = conversation_number(conv.position)
    line["repeat_number"] = conv.repeat + 1
    line.update(models)
    # Which of the record's own completions a completions run graded; null for a model's reply.
    line["completion_group"] = conv.completion_group
    line["completion_label"] = conv.completion
    return json.dumps(line, ensure_ascii=False) + "\n"


async def write_jsonl(store: Store, run_id: int, out: Path) -> int:
    count = 0
    prompts: dict[str, list] = {}  # a record's prompt, parsed once for all its repeats
    reviews = await ExportReviews.of(store, run_id)
    models = run_models(await store.get_run(run_id))
    with private_file(out) as handle:
        async for conv, verdicts in store.export_rows(run_id):
            body = conv.record_body
            prompt = prompts.get(body) or prompts.setdefault(body, json.loads(body)["prompt"])
            handle.write(jsonl_line(conv, verdicts, prompt, reviews, models))
            count += 1
    return count


def review_cells(cells: list) -> list:
    """A review's cells with their text made visible: its note is running text, the rest names."""
    return [
        (visible_controls if column == "review_note" else visible_line)(cell) if isinstance(cell, str) else cell
        for column, cell in zip(REVIEW_CSV_COLUMNS, cells, strict=True)
    ]


async def write_csv(store: Store, run_id: int, out: Path) -> int:
    count = 0
    reviews = await ExportReviews.of(store, run_id)
    with private_file(out, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        async for conv, verdicts in store.export_rows(run_id):
            reviewed_score = reviews.reviewed_score(conv, verdicts)
            theme = next(
                (tag[len("theme:") :] for tag in parsed_tags(conv.example_tags) if tag.startswith("theme:")), ""
            )
            for v in verdicts:
                met = verdict_met(v.status)
                writer.writerow(
                    [
                        spreadsheet_cell(cell)
                        for cell in (
                            conv.position,
                            conv.repeat,
                            visible_line(conv.prompt_id),
                            "" if conv.score is None else conv.score,
                            v.idx,
                            visible_controls(v.criterion),
                            v.points,
                            visible_line(" ".join(parsed_tags(v.tags))),
                            "" if met is None else str(met).lower(),
                            v.status,
                            visible_controls(v.explanation or ""),
                            visible_line(v.error_kind or ""),
                            visible_controls(v.error or ""),
                            conversation_number(conv.position),
                            conv.repeat + 1,
                            criterion_number(v.idx),
                            *review_cells(reviews.csv_cells(v, reviewed_score)),
                            visible_line(theme),
                            visible_line(conv.completion_group or ""),
                            visible_line(conv.completion or ""),
                        )
                    ]
                )
                count += 1
    return count


def rubric_item(verdict: ExportVerdict) -> dict:
    """A criterion and its verdict as results.jsonl and the reference's allresults both write it."""
    return {
        "criterion": verdict.criterion,
        "points": verdict.points,
        "tags": list(parsed_tags(verdict.tags)),
        "criteria_met": verdict_met(verdict.status),
        "explanation": verdict.explanation,
    }


def statistics_lines(stats: RunStatistics, price_problem: str | None = None) -> list[str]:
    lines = []
    if stats.penalty is not None:
        m = stats.length_adjusted
        how = f"penalty {penalty_label(stats.penalty)} per 500 reply characters from {stats.centre:g}"
        lines.append(
            f"- length-adjusted score: {m.value:.4f} (95% CI {m.ci95[0]:.4f} to {m.ci95[1]:.4f}, n {m.n}; {how})"
            if m
            else f"- length-adjusted score: - ({how})"
        )
    for role, usage in stats.called():
        lines.append(f"- tokens of the {role}: {usage_line(usage)}")
    total = total_cost([usage for _, usage in stats.called()])
    if total is not None:
        lines.append(f"- cost: {cost_text(total)} (prices per million tokens from the price table)")
    if price_problem:
        lines.append(f"- cost: not computed, {price_problem}")
    worst = stats.worst_at_k
    if worst is not None:
        lines += [
            "",
            f"### Worst-at-k over {worst.repeats} repeats ({worst.n_prompts} prompts with every repeat scored)",
            "",
            "| k | " + " | ".join(str(k) for k, _ in worst.by_k()) + " |",
            "| --- |" + " --- |" * worst.repeats,
            "| score | " + " | ".join("-" if score is None else f"{score:.4f}" for _, score in worst.by_k()) + " |",
        ]
    return [*lines, ""]


def group_table(report: StoredReport) -> list[str]:
    """A completions run's groups, each scored on its own, as a table of description.md."""
    if not report.groups:
        return []
    lines = ["", "## Groups (each scored on its own, as the reference scores them)", ""]
    lines += ["| group | score | n | 95% CI | physicians |", "| --- | --- | --- | --- | --- |"]
    for name, group in report.groups.items():
        m = group.overall
        figures = f"{m.value:.4f} | {m.n} | {m.ci95[0]:.4f} to {m.ci95[1]:.4f}" if m else "- | 0 | -"
        lines.append(f"| {one_line(name, 40)} | {figures} | {group_description(name)} |")
    return lines


def describe(run: RunRow, stats: RunStatistics | None = None, price_problem: str | None = None) -> str:
    """`description.md`: what was run, with what, when, and what it scored."""
    s = run.settings
    report = run.report
    overall = report.overall if report else None
    batch = BatchFiles.of(run.plan)
    # Where each model was asked: its endpoint, or the batch files of an engine of the user's own.
    test_at = f"batch files ({batch.label})" if batch else s.get("base_url")
    grader_at = f"batch files ({batch.label})" if batch else s.get("grader_base_url") or s.get("base_url")
    lines = [
        f"# {one_line(run.name, 200)}",
        "",
        f"- run id: {run.id}"
        + (f" (a regrade: the replies of run {run.source_run_id}, graded again)" if run.source_run_id else ""),
        f"- status: {run.status}",
        f"- dataset: {one_line(run.dataset_name, 200)} ({one_line(str(run.dataset_path), 1000)}),"
        f" sha256 {run.dataset_sha256}",
        f"- plan: {run.plan.get('records')} records, limit {run.plan.get('limit')}, seed {run.plan.get('seed')},"
        f" repeats {run.plan.get('repeats')}",
        (
            f"- replies: {one_line(run.model_test, 200)}, the records' own (no model under test was called)"
            if run.planned.completions
            else f"- model under test: {one_line(run.model_test, 200)} at {test_at}, temperature"
            f" {_sent(s.get('temperature_test'))}, max tokens {_sent(s.get('max_tokens_test'))}, reasoning effort"
            f" {s.get('reasoning_test') or 'not sent'}"
        ),
        f"- grader: {one_line(run.model_grader, 200)} at {grader_at}, temperature"
        f" {_sent(s.get('temperature_grader'))}, max tokens {_sent(s.get('max_tokens_grader'))}, reasoning effort"
        f" {s.get('reasoning_grader') or 'not sent'}",
        f"- grader template: {(run.requests or {}).get('grader_template', {}).get('name') or s.get('grader_template')}"
        f" (sha256 {(run.requests or {}).get('grader_template', {}).get('sha256', 'not recorded')})",
        f"- {requests_line(run.requests)}",
        *([f"- {skipped}"] if (skipped := skipped_line(run.planned)) else []),
        *([] if batch else [f"- concurrency: {s.get('concurrency')}"]),  # a batch's engine sets its own
        *([f"- {limits}"] if (limits := limits_line((run.requests or {}).get("limits"))) else []),
        f"- started: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(run.created_at))}",
        f"- finished: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(run.finished_at)) if run.finished_at else '-'}",
        f"- duration: {duration_text(run_duration(run))} (from start to end, pauses and interruptions included)",
        "",
    ]
    if report is not None and overall is not None:
        low, high = overall.ci95
        conv = report.conversations
        figures = (
            f"{overall.value:.4f} (95% CI {low:.4f} to {high:.4f}, bootstrap std {overall.bootstrap_std:.4f},"
            f" n {overall.n})"
        )
        headline = stats.length_adjusted if stats is not None and run.recorded_length is not None else None
        if headline is not None and stats is not None and stats.penalty is not None:
            # Made with a length adjustment (--preset professional): that score is the run's headline.
            lines += [
                f"## Length-adjusted score: {headline.value:.4f} (95% CI {headline.ci95[0]:.4f} to"
                f" {headline.ci95[1]:.4f}, bootstrap std {headline.bootstrap_std:.4f}, n {headline.n};"
                f" penalty {penalty_label(stats.penalty)} per 500 reply characters from {stats.centre:g})",
                "",
                f"- score before the length adjustment: {figures}",
            ]
            stats = replace(stats, penalty=None, length_adjusted=None)  # said above: not again below
        else:
            lines += [f"## Score: {figures}", ""]
        lines += [
            f"- median conversation score: {report.median:.4f}" if report.median is not None else "",
            f"- conversations: {conv.total} planned, {conv.scored} scored, {conv.incomplete}"
            f" incomplete, {conv.excluded} without a reply",
            *(statistics_lines(stats, price_problem) if stats else [""]),
            "| metric | value | n | 95% CI |",
            "| --- | --- | --- | --- |",
        ]
        for name, m in report.metrics.items():
            cell = one_line(name, 200).replace("|", r"\|")  # a tag's own "|" would split its row
            lines.append(f"| {cell} | {m.value:.4f} | {m.n} | {m.ci95[0]:.4f} to {m.ci95[1]:.4f} |")
        lines += group_table(report)
    return visible_controls("\n".join(lines) + "\n")


async def write_run_folder(store: Store, run: RunRow, root: Path, results: TextIO | None = None) -> Path:
    """`<timestamp>-<name>/` under ``root``; a run finished again (resume, regrade) rewrites the
    folder it already has rather than leaving an outdated one beside a new one. ``results``:
    results.jsonl as the engine wrote it while the calls went on (hbtui.engine.finish_ahead),
    copied instead of read from the database again."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(run.finished_at or time.time()))
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run.name)[:80]
    folder = root / f"{stamp}-{safe_name}"
    if run.folder and Path(run.folder).parent == root and Path(run.folder).is_dir():
        folder = Path(run.folder)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    if results is None:
        await write_jsonl(store, run.id, folder / "results.jsonl")
    else:
        results.flush()
        results.buffer.seek(0)
        with private_file(folder / "results.jsonl") as handle:
            shutil.copyfileobj(results.buffer, handle.buffer)  # bytes: encoded once, as they were written
    # The length adjustment the run was made with; the price table as it is now. A broken table
    # must not fail the end of a run whose calls are paid: the file says so instead.
    penalty, centre = run.recorded_length or (None, LENGTH_CENTRE)
    reporting = Settings(length_penalty=penalty, length_centre=centre)
    try:
        prices, price_problem = load_prices(), None
    except PriceError as exc:
        prices, price_problem = {}, str(exc)
    stats = await run_statistics(store, run, reporting, prices)
    with private_file(folder / "description.md") as handle:
        handle.write(describe(run, stats, price_problem))
    return folder
