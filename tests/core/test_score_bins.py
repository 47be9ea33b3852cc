"""One binning rule for conversation scores (issue 13, defect 5): 0.1-wide bins aligned on
tenths from the lowest score's tenth to 1.0, and ticks on round values, in the core, the
monitor's and summary's chart, and `show`."""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest
from textual.app import App, ComposeResult

from hbtui.core.score_bins import histogram, round_ticks
from hbtui.render.report import text_histogram
from hbtui.tui.widgets.histogram import ScoreHistogram


def test_bins_start_at_the_lowest_scores_tenth_and_end_at_one():
    bins = histogram([0.35, 0.55, 1.0])
    assert [low for low, _, _ in bins] == pytest.approx([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    assert bins[-1][1] == 1.0 and bins[-1][2] == 1  # 1.0 falls in the last bin
    assert bins[0][2] == 1 and sum(count for *_, count in bins) == 3


def test_an_outlier_widens_the_range_by_whole_tenths():
    bins = histogram([-1.8, 0.25, 0.3])
    assert len(bins) == 28 and bins[0][:2] == pytest.approx((-1.8, -1.7))
    assert all(high - low == pytest.approx(0.1) for low, high, _ in bins)
    assert dict(((round(low, 1), count) for low, _, count in bins))[0.3] == 1  # 0.3 in its own tenth


@pytest.mark.parametrize(
    ("low", "high", "most", "ticks"),
    [
        (0.0, 1.0, 5, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (-1.8, 1.0, 6, [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0]),
        (0.3, 1.0, 8, [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]),
        (0.0, 6.0, 4, [0.0, 2.0, 4.0, 6.0]),
    ],
)
def test_ticks_fall_on_round_values(low, high, most, ticks):
    assert round_ticks(low, high, most) == ticks


def test_show_bins_as_the_rule_does():
    lines = text_histogram([-1.8, 0.25, 0.3])
    assert len(lines) == 28
    assert lines[0].split()[:3] == ["-1.8", "to", "-1.7"] and lines[-1].split()[:3] == ["0.9", "to", "1.0"]


class ChartApp(App[None]):
    CSS = "ScoreHistogram { height: 1fr; }"  # the terminal's height, whatever it is

    def __init__(self, scores: list[float]) -> None:
        super().__init__()
        self.scores = scores

    def compose(self) -> ComposeResult:
        yield ScoreHistogram(self.scores)


@pytest.mark.parametrize(
    ("width", "scores"), [(80, [-1.8, *[0.05 * i for i in range(21)] * 2]), (120, [-0.75, *[0.95] * 7])]
)
def test_the_chart_spans_the_rule_with_round_ticks(width, scores):
    """The monitor and the summary draw this widget: its axis runs from the lowest tenth to
    1.0, labelled on evenly spaced round values, and its counts axis on whole round steps."""

    async def lines() -> list[str]:
        app = ChartApp(scores)
        async with app.run_test(size=(width, 14)) as pilot:
            await pilot.pause()
            chart = app.query_one(ScoreHistogram)
            return ["".join(s.text for s in chart.render_line(y)) for y in range(chart.size.height)]

    chart = asyncio.run(lines())
    labels = [float(word) for word in chart[-1].split()]
    assert labels[-1] == 1.0 and labels[0] - min(scores) < 0.5
    steps = {round(b - a, 6) for a, b in itertools.pairwise(labels)}
    assert len(steps) == 1
    step = steps.pop()
    assert step in (0.1, 0.2, 0.5, 1.0) and all(abs(label / step - round(label / step)) < 1e-6 for label in labels)
    counts = [int(re.split("[┤└]", line)[0]) for line in chart if "┤" in line or "└" in line]
    assert len({a - b for a, b in itertools.pairwise(counts)}) == 1 and counts[-1] == 0


def test_scores_all_in_one_tenth_are_one_bin_among_empty_ones():
    bins = histogram([1.0] * 20)
    assert [low for low, _, _ in bins] == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9])
    assert [count for *_, count in bins] == [0, 0, 0, 0, 20]
    assert [line.split()[-1] for line in text_histogram([1.0] * 20)] == ["0", "0", "0", "0", "20"]


@pytest.mark.parametrize("width", [60, 120])
def test_a_chart_of_every_score_one_is_full_only_in_the_bin_of_one(width):
    """Every score 1.000 made a chart of one bin, which plotext drew edge to edge at full height
    under the labels 0.9 0.9 0.9 1.0 1.0 1.0."""

    async def lines() -> list[str]:
        app = ChartApp([1.0] * 20)
        async with app.run_test(size=(width, 14)) as pilot:
            await pilot.pause()
            chart = app.query_one(ScoreHistogram)
            return ["".join(s.text for s in chart.render_line(y)) for y in range(chart.size.height)]

    chart = asyncio.run(lines())
    labels = chart[-1].split()
    assert labels == ["0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]
    top = next(line for line in chart if line.lstrip().startswith("20┤"))
    plot = top.split("┤", 1)[1].rsplit("│", 1)[0]  # inside the frame
    filled = [i for i, char in enumerate(plot) if char == "█"]
    # Only the last fifth of the plot, the bin 0.9 to 1.0, is drawn at full height.
    assert filled and filled[0] > 0.8 * len(plot) and len(filled) < 0.2 * len(plot), top


@pytest.mark.parametrize(("height", "counts"), [(14, [1, 2, 4, 3, 0]), (12, [5, 0, 15, 10, 20]), (9, [5, 0, 10, 0, 5])])
def test_a_bar_ends_where_the_count_axis_says_its_count_is(height, counts):
    """Each count's tick stands on the row whose top edge is that count, and the frame's bottom
    line is 0: a bar of 2 ends at the top of the row labelled 2. With plotext's rows taken as
    points from 0 up, the row labelled 0 was filled too and a bar of 2 read about 2.3. (The
    counts here fill whole rows; a count between two rows' edges is drawn to the nearer one.)"""
    scores = [score for score, count in zip((0.55, 0.65, 0.75, 0.85, 0.95), counts, strict=True) for _ in range(count)]

    async def lines() -> list[str]:
        app = ChartApp(scores)
        async with app.run_test(size=(60, height)) as pilot:
            await pilot.pause()
            chart = app.query_one(ScoreHistogram)
            return ["".join(s.text for s in chart.render_line(y)) for y in range(chart.size.height)]

    chart = asyncio.run(lines())
    assert chart[-2].lstrip().startswith("0└")  # the frame's bottom line is the count 0
    plot = [line for line in chart if "┤" in line or ("│" in line and "└" not in line and "┌" not in line)]
    ticks = {int(line.split("┤")[0]): len(plot) - i for i, line in enumerate(plot) if "┤" in line}
    assert len(ticks) >= 2
    rows_per_count = {row / count for count, row in ticks.items()}
    assert len(rows_per_count) == 1  # every tick on the edge of a row, evenly from the bottom line
    per_count = rows_per_count.pop()
    left = min(i for line in plot for i in (line.find("┤"), line.find("│")) if i >= 0)  # the frame's left side
    inside = [line[left + 1 : line.rindex("│")] for line in plot]
    heights = {column.count("█") for column in zip(*inside, strict=True)} - {0}
    assert heights == {round(count * per_count) for count in counts if count}
