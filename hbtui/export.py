"""Exports of a run: JSONL (one line per conversation and repeat), CSV (one row per verdict), and
the run folder (`results.jsonl` + `description.md`) that users of the single-script harness know.

JSONL holds text exactly as stored (JSON escapes control characters itself). CSV and
`description.md` are read in terminals and spreadsheets, so their control characters are made
visible (ESC as ␛): a prompt_id or a theme name cannot send escape sequences from them. Files are
owner-only since they hold the run's data.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

from hbtui.config import LENGTH_CENTRE, Settings
from hbtui.export_reviews import REVIEW_CSV_COLUMNS, ExportReviews
from hbtui.fidelity import requests_line
from hbtui.files import private_file
from hbtui.prices import PriceError, cost_text, load_prices, total_cost, usage_line
from hbtui.run_stats import RunStatistics, penalty_label, run_statistics
from hbtui.store import ERROR, RunRow, Store, verdict_met
from hbtui.store.reads import parsed_tags
from hbtui.store.rows import ExportVerdict
from hbtui.text import one_line, visible_controls

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
    *REVIEW_CSV_COLUMNS,  # after the grader's: hbtui.export_reviews
]


async def write_jsonl(store: Store, run_id: int, out: Path) -> int:
    count = 0
    prompts: dict[str, list] = {}  # a record's prompt, parsed once for all its repeats
    reviews = await ExportReviews.of(store, run_id)
    with private_file(out) as handle:
        async for conv, verdicts in store.export_rows(run_id):
            body = conv.record_body
            line = {
                "prompt_id": conv.prompt_id,
                "repeat": conv.repeat,
                "example_tags": list(parsed_tags(conv.example_tags)),
                "prompt": prompts.get(body) or prompts.setdefault(body, json.loads(body)["prompt"]),
                "completion": conv.reply,
                "score": conv.score,
                "rubrics": [
                    {
                        **rubric_item(v),
                        **({"error": f"{v.error_kind}: {v.error}"} if v.status == ERROR else {}),
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
            if conv.status == "failed":
                line["generation_error"] = f"{conv.error_kind}: {conv.error}"
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            count += 1
    return count


async def write_csv(store: Store, run_id: int, out: Path) -> int:
    count = 0
    reviews = await ExportReviews.of(store, run_id)
    with private_file(out, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        async for conv, verdicts in store.export_rows(run_id):
            reviewed_score = reviews.reviewed_score(conv, verdicts)
            for v in verdicts:
                met = verdict_met(v.status)
                writer.writerow(
                    [
                        visible_controls(cell) if isinstance(cell, str) else cell
                        for cell in (
                            conv.position,
                            conv.repeat,
                            conv.prompt_id,
                            "" if conv.score is None else conv.score,
                            v.idx,
                            v.criterion,
                            v.points,
                            " ".join(parsed_tags(v.tags)),
                            "" if met is None else str(met).lower(),
                            v.status,
                            v.explanation or "",
                            v.error_kind or "",
                            v.error or "",
                            *reviews.csv_cells(v, reviewed_score),
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
    for role, usage in (("model under test", stats.test), ("grader", stats.grader)):
        lines.append(f"- tokens of the {role}: {usage_line(usage)}")
    total = total_cost([stats.test, stats.grader])
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


def describe(run: RunRow, stats: RunStatistics | None = None, price_problem: str | None = None) -> str:
    """`description.md`: what was run, with what, when, and what it scored."""
    s = run.settings
    report = run.report
    overall = report.overall if report else None
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
        f"- model under test: {run.model_test} at {s.get('base_url')}, temperature {s.get('temperature_test')},"
        f" max tokens {s.get('max_tokens_test')}, reasoning effort {s.get('reasoning_test') or 'not sent'}",
        f"- grader: {run.model_grader} at {s.get('grader_base_url') or s.get('base_url')}, temperature"
        f" {s.get('temperature_grader')}, max tokens {s.get('max_tokens_grader')}, reasoning effort"
        f" {s.get('reasoning_grader') or 'not sent'}",
        f"- grader template: {(run.requests or {}).get('grader_template', {}).get('name') or s.get('grader_template')}"
        f" (sha256 {(run.requests or {}).get('grader_template', {}).get('sha256', 'not recorded')})",
        f"- {requests_line(run.requests)}",
        f"- concurrency: {s.get('concurrency')}",
        f"- started: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(run.created_at))}",
        f"- finished: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(run.finished_at)) if run.finished_at else '-'}",
        "",
    ]
    if report is not None and overall is not None:
        low, high = overall.ci95
        conv = report.conversations
        lines += [
            f"## Score: {overall.value:.4f} (95% CI {low:.4f} to {high:.4f}, bootstrap std {overall.bootstrap_std:.4f},"
            f" n {overall.n})",
            "",
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
    return visible_controls("\n".join(lines) + "\n")


async def write_run_folder(store: Store, run: RunRow, root: Path) -> Path:
    """`<timestamp>-<name>/` under ``root``; a run finished again (resume, regrade) rewrites the
    folder it already has rather than leaving an outdated one beside a new one."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(run.finished_at or time.time()))
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run.name)[:80]
    folder = root / f"{stamp}-{safe_name}"
    if run.folder and Path(run.folder).parent == root and Path(run.folder).is_dir():
        folder = Path(run.folder)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    await write_jsonl(store, run.id, folder / "results.jsonl")
    # The length adjustment the run was made with; the price table as it is now. A broken table
    # must not fail the end of a run whose calls are paid: the file says so instead.
    reporting = Settings(
        length_penalty=run.settings.get("length_penalty"),
        length_centre=run.settings.get("length_centre") or LENGTH_CENTRE,
    )
    try:
        prices, price_problem = load_prices(), None
    except PriceError as exc:
        prices, price_problem = {}, str(exc)
    stats = await run_statistics(store, run, reporting, prices)
    with private_file(folder / "description.md") as handle:
        handle.write(describe(run, stats, price_problem))
    return folder
