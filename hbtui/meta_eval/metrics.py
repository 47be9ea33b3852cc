"""A grader's agreement with physicians, numerically identical to the reference's meta-evaluation
(openai/simple-evals, ``healthbench_meta_eval.py``).

The reference appends every comparison to a list and divides the list's sum by its length; the
same numbers come from counting agreements and comparisons, which is what makes 30,000 rows
take a tenth of a second rather than seconds. Metric names are built from the same templates and
the F1 and balanced metrics are derived by the same string rules (a precision key's recall twin,
a ``pos`` key's ``neg`` twin), so every key the reference produces is produced here, with the
same value, bit for bit.

Beside the reference's metrics: the physicians' leave-one-out F1 as a distribution over the
physicians with enough labels (its notebook keeps those with more than 50), where the grader
falls in it, and a macro-F1 against the physicians' majority vote.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from hbtui.core.plan import MIN_PHYSICIAN_LABELS  # the reference's notebook: more than 50 labels

MODEL = "model"
PHYSICIAN = "physician"
HEADLINE: Final = "pairwise_model_f1_balanced"  # a key of MetaEvalReport
PHYSICIAN_HEADLINE = "pairwise_physician_f1_balanced"


def index_key(rater: str, metric: str, pred: str) -> str:
    return f"pairwise_{rater}_{metric}_{pred}"


def cluster_key(cluster: str, key: str) -> str:
    return f"{cluster}: {key}"


# The four counts a rating feeds, as (metric, class): a rater's precision compares its label
# against every other label of the row; its recall falls on the class of each other label.
CHANNELS = (("precision", "pos"), ("precision", "neg"), ("recall", "pos"), ("recall", "neg"))


@dataclass(slots=True)
class Ratings:
    """Ratings as parallel columns: who rated (an index into ``raters``), their label, how many
    of the other labels of the row say met and not met, and the row's category (an index)."""

    rater: list[int]
    label: list[bool]
    others_pos: list[int]
    others_neg: list[int]
    category: list[int]


def _counted(ratings: Ratings, raters: int, categories: Sequence[str], rater_kind: str) -> list[dict[str, dict]]:
    """{name: {"n", "value"}} for each rater, the reference's names and values: agreements
    over comparisons per name, both integers, so the division is the reference's exactly."""
    import numpy as np  # loaded when first needed: a meta-eval's calls start without it

    label = np.asarray(ratings.label, dtype=bool)
    pos = np.asarray(ratings.others_pos, dtype=np.int64)
    neg = np.asarray(ratings.others_neg, dtype=np.int64)
    cells = raters * len(categories)
    key = np.asarray(ratings.rater, dtype=np.int64) * len(categories) + np.asarray(ratings.category, dtype=np.int64)
    zero = np.zeros_like(pos)
    both = pos + neg
    columns = (  # (agreements, comparisons) of each channel, per rating
        (np.where(label, pos, zero), np.where(label, both, zero)),
        (np.where(label, zero, neg), np.where(label, zero, both)),
        (np.where(label, pos, zero), pos),
        (np.where(label, zero, neg), neg),
    )
    counts = [
        (
            np.bincount(key, weights=agree, minlength=cells).reshape(raters, -1).astype(np.int64),
            np.bincount(key, weights=total, minlength=cells).reshape(raters, -1).astype(np.int64),
        )
        for agree, total in columns
    ]
    names = [index_key(rater_kind, metric, pred) for metric, pred in CHANNELS]
    cluster_names = [[cluster_key(category, name) for category in categories] for name in names]
    out = []
    for rater in range(raters):
        metrics: dict[str, dict] = {}
        for channel, (agree, total) in enumerate(counts):
            agreed, compared = agree[rater].tolist(), total[rater].tolist()
            overall = sum(compared)
            if not overall:
                continue  # the reference makes a name only when it appends to it
            metrics[names[channel]] = {"n": overall, "value": sum(agreed) / overall}
            for category, n in enumerate(compared):
                if n:
                    metrics[cluster_names[channel][category]] = {"n": n, "value": agreed[category] / n}
        metrics.update(_f1_metrics(metrics))
        metrics.update(_balanced_metrics(metrics))
        out.append(metrics)
    return out


def _index(values: dict[str, int], key: str) -> int:
    found = values.get(key)
    if found is None:
        found = values[key] = len(values)
    return found


def _f1(precision: dict, recall: dict) -> dict:
    p, r = precision["value"], recall["value"]
    if p is None or r is None:
        return {"n": precision["n"] + recall["n"], "value": None}
    # TP recovered from the precision, as the reference does, so that n is TP+FP+FN (a float).
    tp = p * precision["n"]
    value = 0.0 if p == 0 and r == 0 else 2 * (p * r) / (p + r)
    return {"n": precision["n"] + recall["n"] - tp, "value": value}


def _f1_metrics(metrics: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for name in metrics:
        if "precision" in name:
            twin = name.replace("precision", "recall")
            if twin in metrics:
                out[name.replace("precision", "f1")] = _f1(metrics[name], metrics[twin])
    return out


def _balanced_metrics(metrics: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for name in metrics:
        if "pos" in name:
            twin = name.replace("pos", "neg")
            if twin in metrics:
                pos, neg = metrics[name], metrics[twin]
                both = pos["value"] is not None and neg["value"] is not None
                out[name.replace("pos", "balanced")] = {
                    "n": pos["n"] + neg["n"],
                    "value": (pos["value"] + neg["value"]) / 2 if both else None,
                }
    return out


def rater_metrics(
    self_preds: Sequence[bool], other_preds: Sequence[Sequence[bool]], clusters: Sequence[str], rater: str
) -> dict[str, dict]:
    """The reference's ``compute_metrics_for_rater_by_class``: {name: {"n", "value"}}."""
    if not len(self_preds) == len(other_preds) == len(clusters):
        raise ValueError("self_preds, other_preds and clusters differ in length")
    categories: dict[str, int] = {}
    ratings = Ratings([], [], [], [], [])
    for self_pred, others, cluster in zip(self_preds, other_preds, clusters):
        positives = sum(1 for other in others if other)
        ratings.rater.append(0)
        ratings.label.append(bool(self_pred))
        ratings.others_pos.append(positives)
        ratings.others_neg.append(len(others) - positives)
        ratings.category.append(_index(categories, cluster))
    return _counted(ratings, 1, list(categories), rater)[0]


@dataclass(frozen=True, slots=True)
class LabelledRow:
    """What the metrics need of a meta-eval row: the physicians' labels and who gave them, the
    row's category, and the grader's verdict (None while ungraded or failed)."""

    labels: tuple[bool, ...]
    physician_ids: tuple[str, ...]
    category: str
    grader: bool | None


def model_agreement(rows: Sequence[LabelledRow]) -> dict[str, dict]:
    """The grader against every physician label of the rows it judged."""
    judged = [r for r in rows if r.grader is not None]
    return rater_metrics(
        [bool(r.grader) for r in judged], [r.labels for r in judged], [r.category for r in judged], MODEL
    )


def physician_agreement(rows: Iterable[LabelledRow]) -> dict[str, dict[str, dict]]:
    """Each physician's labels against the other physicians' labels of the same rows, as the
    reference computes them for every physician: {physician id: {name: {"n", "value"}}}."""
    physicians: dict[str, int] = {}
    categories: dict[str, int] = {}
    ratings = Ratings([], [], [], [], [])
    for row in rows:
        positives = sum(row.labels)
        negatives = len(row.labels) - positives
        category = _index(categories, row.category)
        for label, physician in zip(row.labels, row.physician_ids):
            ratings.rater.append(_index(physicians, physician))
            ratings.label.append(label)
            ratings.others_pos.append(positives - label)
            ratings.others_neg.append(negatives - (not label))
            ratings.category.append(category)
    counted = _counted(ratings, len(physicians), list(categories), PHYSICIAN)
    return dict(zip(physicians, counted))


def by_metric(per_physician: dict[str, dict[str, dict]]) -> dict[str, dict[str, dict]]:
    """The reference's ``physician_agreement_metric_lists``: {name: {physician id: metric}}."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for physician, metrics in per_physician.items():
        for name, value in metrics.items():
            out[name][physician] = value
    return dict(out)


def labels_given(rows: Iterable[LabelledRow]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        for physician in row.physician_ids:
            counts[physician] += 1
    return dict(counts)


ROW_METRICS = ("num_physician_labels", "percent_physician_pos", "model_predicted_positive")


def row_values(rows: Sequence[LabelledRow]) -> dict[str, list[float]]:
    """The reference's per-row metrics (``grade_sample``), overall and prefixed by category, of
    the rows the grader judged, in the order the reference aggregates their names."""
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.grader is None:
            continue
        metrics = (len(row.labels), sum(row.labels) / len(row.labels), float(row.grader))
        for name, value in zip(ROW_METRICS, metrics):
            values[name].append(value)
        for name, value in zip(ROW_METRICS, metrics):
            values[cluster_key(row.category, name)].append(value)
    return dict(values)


BOOTSTRAP_SAMPLES = 1000  # the reference's resamples per metric


def row_aggregates(values: dict[str, list[float]], seed: int = 0) -> dict[str, float]:
    """The reference's ``aggregate_results`` with mean, n_samples and bootstrap_std: for each
    name, ``name`` (the mean), ``name:n_samples`` and ``name:bootstrap_std`` (the standard
    deviation of 1,000 resample means).

    A resample of n values with replacement holds each distinct value a multinomial number of
    times (n draws, the values' shares as chances): drawn that way, the resample means have the
    very distribution of the reference's, at a cost that does not grow with n (these values
    take a handful of distinct values: a label count, a share of labels, a verdict). The 105
    resampled lists of the whole meta-eval file took 1.1 s of gathering the other way. The
    reference draws from numpy's unseeded global generator; this one is seeded, so a report
    reads the same every time."""
    import numpy as np  # loaded when first needed: a meta-eval's calls start without it

    rng = np.random.default_rng(seed)
    out: dict[str, float] = {}
    for name, listed in values.items():
        data = np.asarray(listed, dtype=float)
        distinct, counts = np.unique(data, return_counts=True)
        resampled = rng.multinomial(len(data), counts / len(data), size=BOOTSTRAP_SAMPLES)
        out[name] = float(np.mean(data))
        out[f"{name}:n_samples"] = len(data)
        out[f"{name}:bootstrap_std"] = float(np.std(resampled @ distinct / len(data)))
    return out


@dataclass(frozen=True, slots=True)
class MajorityAgreement:
    """The grader against the physicians' majority vote: F1 of each class and their mean."""

    macro_f1: float | None
    f1_pos: float | None
    f1_neg: float | None
    rows: int  # rows with a majority that the grader judged
    ties: int  # rows left out: as many physicians said met as said not met

    def to_json(self) -> dict:
        return {
            "macro_f1": self.macro_f1,
            "f1_pos": self.f1_pos,
            "f1_neg": self.f1_neg,
            "rows": self.rows,
            "ties": self.ties,
        }


def _class_f1(tp: int, fp: int, fn: int) -> float | None:
    if tp + fp + fn == 0:
        return None  # the class never occurs, predicted or true: no F1 to speak of
    return 2 * tp / (2 * tp + fp + fn)


def majority_agreement(rows: Iterable[LabelledRow]) -> MajorityAgreement:
    both = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    ties = 0
    for row in rows:
        if row.grader is None:
            continue
        positives = sum(row.labels)
        negatives = len(row.labels) - positives
        if positives == negatives:
            ties += 1
            continue
        both[(bool(row.grader), positives > negatives)] += 1
    tp, fp, fn, tn = both[(True, True)], both[(True, False)], both[(False, True)], both[(False, False)]
    f1_pos, f1_neg = _class_f1(tp, fp, fn), _class_f1(tn, fn, fp)
    present = [f for f in (f1_pos, f1_neg) if f is not None]
    macro = sum(present) / len(present) if present else None
    return MajorityAgreement(macro, f1_pos, f1_neg, tp + fp + fn + tn, ties)


@dataclass(frozen=True, slots=True)
class Distribution:
    """The physicians' leave-one-out balanced F1, over those with more than ``labels_over``
    labels, and where the grader's F1 falls in it."""

    labels_over: int
    physicians: int  # in the distribution
    left_out: int  # physicians with too few labels (or no F1)
    minimum: float | None
    q1: float | None
    median: float | None
    q3: float | None
    maximum: float | None
    grader: float | None
    below_grader: int  # physicians whose F1 is below the grader's

    @property
    def within_range(self) -> bool | None:
        if self.grader is None or self.minimum is None or self.maximum is None:
            return None
        return self.minimum <= self.grader <= self.maximum

    def to_json(self) -> dict:
        return {
            "labels_over": self.labels_over,
            "physicians": self.physicians,
            "left_out": self.left_out,
            "min": self.minimum,
            "q1": self.q1,
            "median": self.median,
            "q3": self.q3,
            "max": self.maximum,
            "grader": self.grader,
            "below_grader": self.below_grader,
            "within_range": self.within_range,
        }


def physician_distribution(
    per_physician: dict[str, dict[str, dict]],
    labels: dict[str, int],
    grader: float | None,
    labels_over: int = MIN_PHYSICIAN_LABELS,
) -> Distribution:
    import numpy as np  # loaded when first needed: a meta-eval's calls start without it

    values = sorted(
        metrics[PHYSICIAN_HEADLINE]["value"]
        for physician, metrics in per_physician.items()
        if labels.get(physician, 0) > labels_over and metrics.get(PHYSICIAN_HEADLINE, {}).get("value") is not None
    )
    left_out = len(per_physician) - len(values)
    if not values:
        return Distribution(labels_over, 0, left_out, None, None, None, None, None, grader, 0)
    low, q1, median, q3, high = (float(v) for v in np.percentile(values, [0, 25, 50, 75, 100]))
    below = sum(1 for v in values if grader is not None and v < grader)
    return Distribution(labels_over, len(values), left_out, low, q1, median, q3, high, grader, below)


def headline(metrics: dict[str, dict]) -> float | None:
    found = metrics.get(HEADLINE)
    return found["value"] if found else None
