"""Two meta-evals of the same rows side by side: which grader agrees better with physicians, and
how often the two graders agree with each other.

Each grader's metrics are computed over the rows both judged, so the two F1s stand on the same
ground; the physicians' distribution is the same for both (it depends on the rows alone).
"""

from __future__ import annotations

import asyncio

from hbtui.core.errors import HbtuiError
from hbtui.core.text import one_line
from hbtui.meta_eval.metrics import HEADLINE
from hbtui.meta_eval.report import placement
from hbtui.meta_eval.summary import meta_eval_summary_of
from hbtui.store import MET, NOT_MET, RunRow, Store


class NoRowsInCommon(HbtuiError, ValueError):
    """Two meta-evals of different rows: nothing to set side by side."""


async def compare_meta_evals(store: Store, run_a: RunRow, run_b: RunRow) -> dict:
    if run_a.id == run_b.id:
        raise NoRowsInCommon(f"run {run_a.id} compared with itself: give two different meta-evals")
    rows_a = {key: rest for key, *rest in await store.meta_eval_pairing(run_a.id)}
    rows_b = {key: rest for key, *rest in await store.meta_eval_pairing(run_b.id)}
    graded = (MET, NOT_MET)
    both = [key for key in rows_a if key in rows_b and rows_a[key][3] in graded and rows_b[key][3] in graded]
    if not both:
        raise NoRowsInCommon(
            f"meta-evals {run_a.id} and {run_b.id} have no graded row in common (another file, or another sample)"
        )

    labels_over = run_a.planned.labels_over
    summary_a, summary_b = await asyncio.gather(
        asyncio.to_thread(meta_eval_summary_of, [rows_a[k] for k in both], labels_over),
        asyncio.to_thread(meta_eval_summary_of, [rows_b[k] for k in both], labels_over),
    )
    same = sum(1 for k in both if rows_a[k][3] == rows_b[k][3])
    categories = sorted(set(summary_a["by_category"]) | set(summary_b["by_category"]))
    return {
        "a": {"id": run_a.id, "name": run_a.name, "grader": run_a.model_grader, HEADLINE: summary_a[HEADLINE]},
        "b": {"id": run_b.id, "name": run_b.name, "grader": run_b.model_grader, HEADLINE: summary_b[HEADLINE]},
        "rows": len(both),
        "rows_only_a": len(rows_a) - len(both),
        "rows_only_b": len(rows_b) - len(both),
        "graders_agree": same / len(both),
        "physician_distribution": {
            k: v for k, v in summary_a["physician_distribution"].items() if k not in ("grader", "below_grader")
        },
        "placement": {
            "a": placement(summary_a["physician_distribution"]),
            "b": placement(summary_b["physician_distribution"]),
        },
        "majority_macro_f1": {"a": summary_a["majority_vote"]["macro_f1"], "b": summary_b["majority_vote"]["macro_f1"]},
        "by_category": {
            category: {
                "a": summary_a["by_category"].get(category, {}).get("grader"),
                "b": summary_b["by_category"].get(category, {}).get("grader"),
            }
            for category in categories
        },
    }


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_meta_comparison(result: dict) -> str:
    a, b = result["a"], result["b"]
    dist = result["physician_distribution"]
    lines = [
        f"meta-evals on the {result['rows']:,} rows both graded"
        f" (only in A {result['rows_only_a']:,}, only in B {result['rows_only_b']:,})",
        f"A run {a['id']} {one_line(a['name'], 40)}: grader {one_line(a['grader'], 40)}",
        f"B run {b['id']} {one_line(b['name'], 40)}: grader {one_line(b['grader'], 40)}",
        "",
        f"grader F1 (pairwise, balanced): A {_f(a[HEADLINE])}  B {_f(b[HEADLINE])}"
        f"  B - A {_f(None if a[HEADLINE] is None or b[HEADLINE] is None else b[HEADLINE] - a[HEADLINE])}",
    ]
    if dist["physicians"]:
        lines.append(
            f"physicians ({dist['physicians']}, more than {dist['labels_over']} labels): min {_f(dist['min'])}"
            f"  median {_f(dist['median'])}  max {_f(dist['max'])}"
        )
    lines += [
        f"  A: {result['placement']['a']}",
        f"  B: {result['placement']['b']}",
        f"majority vote macro-F1: A {_f(result['majority_macro_f1']['a'])}  B {_f(result['majority_macro_f1']['b'])}",
        f"the two graders give the same verdict on {result['graders_agree']:.1%} of the rows",
    ]
    if result["by_category"]:
        lines += ["", f"  {'by category':<54} {'A':>6} {'B':>6}"]
        for category, values in result["by_category"].items():
            lines.append(f"  {one_line(category, 54):<54} {_f(values['a']):>6} {_f(values['b']):>6}")
    return "\n".join(lines)
