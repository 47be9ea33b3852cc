"""A meta-eval run as text, for `hbtui show` and the app: the grader's F1 beside the physicians'
distribution, so that whether a grader is within the physicians' range reads at a glance."""

from __future__ import annotations

from hbtui.core.fidelity import requests_line
from hbtui.core.run_kinds import MEANINGS, META_EVAL
from hbtui.core.run_records import MetaEvalReport
from hbtui.core.text import one_line
from hbtui.meta_eval.metrics import HEADLINE
from hbtui.store import RunRow


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def placement(distribution: dict) -> str:
    """Where the grader falls among the physicians, in words."""
    grader, count = distribution.get("grader"), distribution.get("physicians", 0)
    if grader is None:
        return "the grader has no F1 yet"
    if not count:
        return f"no physician has more than {distribution['labels_over']} labels here: nothing to place the grader in"
    below = distribution["below_grader"]
    if grader < distribution["min"]:
        where = "BELOW every physician"
    elif grader > distribution["max"]:
        where = "ABOVE every physician"
    else:
        where = "within the physicians' range"
    return f"grader {grader:.3f}: {where}; above {below} of {count} physicians ({below / count:.0%})"


def strip(distribution: dict, width: int = 50) -> str | None:
    """The physicians' range as ``[---|===|===|---]`` on a 0-1 scale, with ``G`` at the grader:
    whiskers from min to max, the box from the first to the third quartile, ``|`` at the median."""
    if not distribution.get("physicians"):
        return None
    cells = [" "] * (width + 1)

    def at(value: float) -> int:
        return max(0, min(width, round(value * width)))

    low, q1, median, q3, high = (at(distribution[k]) for k in ("min", "q1", "median", "q3", "max"))
    for i in range(low, high + 1):
        cells[i] = "-"
    for i in range(q1, q3 + 1):
        cells[i] = "="
    cells[low], cells[high], cells[median] = "[", "]", "|"
    if distribution.get("grader") is not None:
        cells[at(distribution["grader"])] = "G"
    return "0 " + "".join(cells) + " 1"


def render_meta_eval(run: RunRow, summary: MetaEvalReport | None) -> str:
    lines = [
        f"run {run.id}  {one_line(run.name, 80)}  [{META_EVAL}: {MEANINGS[META_EVAL]}]  {run.shown_status()}",
        f"grader: {one_line(run.model_grader, 60)}   data: {one_line(run.dataset_name, 60)}",
        requests_line(run.requests),
    ]
    if run.error:
        lines.append(f"error: {one_line(run.error, 300)}")
    if not summary:
        lines.append("no rows graded yet")
        return "\n".join(lines)
    lines.append(
        f"rows: {summary['rows']:,}  graded {summary['judged']:,}"
        + (f"  without a verdict {summary['unjudged']:,} (left out)" if summary["unjudged"] else "")
    )
    lines.append("")
    lines.append(f"grader F1 (balanced, pairwise vs physicians, {HEADLINE}): {_f(summary[HEADLINE], 4)}")
    dist = summary["physician_distribution"]
    lines.append(
        f"physicians' own F1 (each vs the others, leave-one-out), {dist['physicians']} physicians with more"
        f" than {dist['labels_over']} labels ({dist['left_out']} left out):"
    )
    if dist["physicians"]:
        lines.append(
            f"  min {_f(dist['min'])}  q1 {_f(dist['q1'])}  median {_f(dist['median'])}"
            f"  q3 {_f(dist['q3'])}  max {_f(dist['max'])}"
        )
        shown = strip(dist)
        if shown:
            lines.append(f"  {shown}   (G grader, [ ] min-max, = q1-q3, | median)")
    lines.append(f"  {placement(dist)}")
    model = summary["model_agreement"]
    lines.append("")
    for cls, label in (("pos", "met"), ("neg", "not met")):
        values = [model.get(f"pairwise_model_{m}_{cls}", {}).get("value") for m in ("precision", "recall", "f1")]
        lines.append(f"{label:>8}: precision {_f(values[0])}  recall {_f(values[1])}  F1 {_f(values[2])}")
    majority = summary["majority_vote"]
    lines.append(
        f"majority vote: macro-F1 {_f(majority['macro_f1'])} (F1 met {_f(majority['f1_pos'])}, not met"
        f" {_f(majority['f1_neg'])}) over {majority['rows']:,} rows; {majority['ties']:,} ties left out"
    )
    aggregates = summary["row_aggregates"]
    if "num_physician_labels" in aggregates:
        lines.append(
            f"per row: {aggregates['num_physician_labels']:.2f} physicians' labels, physicians say met"
            f" {aggregates['percent_physician_pos']:.1%} (± {aggregates['percent_physician_pos:bootstrap_std']:.1%}),"
            f" grader says met {aggregates['model_predicted_positive']:.1%}"
            f" (± {aggregates['model_predicted_positive:bootstrap_std']:.1%})"
        )
    if summary["by_category"]:
        lines.append("")
        lines.append(f"  {'by category':<54} {'grader F1':>9} {'physicians (median)':>22}")
        for category, value in summary["by_category"].items():
            median = value.get("physicians_median")
            physicians = f"{_f(median)} of {value.get('physicians', 0)}" if median is not None else "-"
            lines.append(f"  {one_line(category, 54):<54} {_f(value['grader']):>9} {physicians:>22}")
    return "\n".join(lines)
