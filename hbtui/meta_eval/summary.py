"""Everything a meta-eval run reports, in one JSON-ready document: the reference's metrics, the
physicians' distribution with the grader placed in it, and the majority-vote view."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from hbtui.core.run_records import MetaEvalReport
from hbtui.core.verdicts import RUNNING
from hbtui.meta_eval.metrics import (
    HEADLINE,
    MIN_PHYSICIAN_LABELS,
    PHYSICIAN_HEADLINE,
    LabelledRow,
    headline,
    labels_given,
    majority_agreement,
    model_agreement,
    physician_agreement,
    physician_distribution,
    row_aggregates,
    row_values,
)
from hbtui.store import RunRow, Store
from hbtui.store.rows import verdict_met


def categories_of(metrics: dict[str, dict], name: str = HEADLINE) -> dict[str, dict]:
    """{category: metric} of the per-category twins of ``name`` (``"<category>: <name>"``)."""
    suffix = f": {name}"
    return {key[: -len(suffix)]: value for key, value in sorted(metrics.items()) if key.endswith(suffix)}


def category_physicians(
    per_physician: dict[str, dict[str, dict]], labels: dict[str, int], labels_over: int, category: str
) -> dict:
    """The median of the physicians' own F1 in ``category``, over the physicians of the shown
    distribution (more than ``labels_over`` labels in all) who rated in it: the grader's
    per-category F1 beside its like."""
    import statistics

    name = f"{category}: {PHYSICIAN_HEADLINE}"
    values = [
        metrics[name]["value"]
        for physician, metrics in per_physician.items()
        if labels.get(physician, 0) > labels_over and metrics.get(name, {}).get("value") is not None
    ]
    return {"physicians": len(values), "physicians_median": statistics.median(values) if values else None}


def meta_eval_summary(
    rows: Sequence[LabelledRow], labels_over: int = MIN_PHYSICIAN_LABELS, seed: int = 0
) -> MetaEvalReport:
    """The report of a meta-eval's rows, graded or not (rows without a verdict are counted and
    left out of the grader's metrics; the physicians' agreement uses every row)."""
    model = model_agreement(rows)
    per_physician = physician_agreement(rows)
    labels = labels_given(rows)
    grader_f1 = headline(model)
    distribution = physician_distribution(per_physician, labels, grader_f1, labels_over)
    judged = sum(1 for r in rows if r.grader is not None)
    return {
        "rows": len(rows),
        "judged": judged,
        "unjudged": len(rows) - judged,
        HEADLINE: grader_f1,
        "model_agreement": model,
        "by_category": {
            category: {
                "grader": value["value"],
                "n": value["n"],
                **category_physicians(per_physician, labels, labels_over, category),
            }
            for category, value in categories_of(model).items()
        },
        "row_aggregates": row_aggregates(row_values(rows), seed),
        "physicians": {
            physician: {
                "labels": labels[physician],
                PHYSICIAN_HEADLINE: metrics.get(PHYSICIAN_HEADLINE, {}).get("value"),
            }
            for physician, metrics in sorted(per_physician.items())
        },
        "physician_distribution": distribution.to_json(),
        "majority_vote": majority_agreement(rows).to_json(),
    }


def labelled_rows(stored: Sequence[Sequence[str]]) -> list[LabelledRow]:
    """Stored rows (labels and physician ids as JSON, category, status) as the metrics read them."""
    return [
        LabelledRow(tuple(json.loads(labels)), tuple(json.loads(ids)), category, verdict_met(status))
        for labels, ids, category, status in stored
    ]


def meta_eval_summary_of(stored: Sequence[Sequence[str]], labels_over: int = MIN_PHYSICIAN_LABELS) -> MetaEvalReport:
    return meta_eval_summary(labelled_rows(stored), labels_over)


async def current_summary(store: Store, run: RunRow, labels_over: int | None = None) -> MetaEvalReport | None:
    """The run's report: as stored when it ended, else (running, stopped, another threshold)
    computed now from its rows."""
    if run.meta_eval and labels_over is None and run.status != RUNNING:
        return run.meta_eval
    stored = await store.meta_eval_labels(run.id)
    if not stored:
        return None
    threshold = run.planned.labels_over if labels_over is None else labels_over
    return await asyncio.to_thread(meta_eval_summary_of, stored, threshold)
