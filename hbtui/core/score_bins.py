"""The one binning rule for conversation scores, shared by the monitor, the summary and `show`.

Bins are 0.1 wide and aligned on tenths, from the tenth of the lowest score up to 1.0, and at
least MIN_BINS of them: scores that all fall in one tenth (every one 1.000) are one bar among
empty ones, not a chart filled from edge to edge by its only bar. A score below zero (a penalty
outweighing the points) widens the range by whole bins instead of being folded into a wider
first bin, so every chart of the same scores draws the same bars. Ticks fall on round values
(1, 2 or 5 times a power of ten), so an axis never reads -0.7 -0.5 -0.1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TENTHS = 10  # bins per unit score
MIN_BINS = 5  # the fewest bins shown: 0.5 to 1.0


def histogram(scores: Sequence[float]) -> list[tuple[float, float, int]]:
    """(low, high, count) per bin; 1.0 falls in the last bin, 0.9 to 1.0."""
    if not scores:
        return []
    # The small epsilon keeps 0.3 (stored as 0.29999...) in the bin it names.
    first = min(math.floor(min(scores) * TENTHS + 1e-9), TENTHS - MIN_BINS)
    counts = [0] * (TENTHS - first)
    for score in scores:
        counts[min(math.floor(score * TENTHS + 1e-9), TENTHS - 1) - first] += 1
    return [((first + i) / TENTHS, (first + i + 1) / TENTHS, count) for i, count in enumerate(counts)]


def round_step(span: float, most: int) -> float:
    """The smallest of 1, 2 or 5 times a power of ten that cuts ``span`` into at most ``most`` steps."""
    most = max(most, 1)
    if span <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(span / most))
    return next(k * power for k in (1, 2, 5, 10, 20) if span / (k * power) <= most + 1e-9)


def round_ticks(low: float, high: float, most: int) -> list[float]:
    """At most ``most + 1`` ticks on multiples of a round step, covering ``low`` to ``high``."""
    step = round_step(high - low, most)
    first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
    # Rounded to the step's decimals so that labels read 0.2, not 0.20000000000000004.
    digits = max(0, -math.floor(math.log10(step) + 1e-9))
    return [round(i * step, digits) for i in range(first, last + 1)]
