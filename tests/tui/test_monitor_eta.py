"""The monitor's ETA (issue 25, item 8): none from a run's first seconds, whose answers come back
a latency after their calls went out (a first frame said 1h 28m for a run of 21 s)."""

from __future__ import annotations

import time

from hbtui.tui.monitor_data import ETA_SETTLE_SECONDS, RunCounters, eta


def test_no_eta_until_the_run_has_run_a_few_seconds():
    assert eta(5_000, 1.0, running_seconds=1.0) is None  # 1.0 calls/s: 1h 23m, far from the truth
    assert eta(5_000, 250.0, running_seconds=ETA_SETTLE_SECONDS) == 20.0
    assert eta(0, 0.0, running_seconds=0.0) == 0.0  # nothing left: done, whenever


def test_the_seconds_run_leave_the_pauses_out():
    counters = RunCounters()
    now = time.time()
    counters._started = now - 8.0
    assert round(counters.running_seconds(now=now)) == 8
    assert round(counters.running_seconds([(now - 6.0, now - 2.0)], now=now)) == 4
    assert round(counters.running_seconds([(now - 6.0, None)], now=now)) == 2  # paused still


def stats_text(view) -> str:
    from rich.console import Console

    from hbtui.tui.screens.monitor import MonitorScreen

    console = Console(width=120, record=True)
    console.print(MonitorScreen(view.run_id)._stats(view))
    return console.export_text()


def test_the_monitor_says_estimating_then_an_eta_and_that_a_cpu_model_is_slow():
    from hbtui.local import DEMO_MODEL_ALIAS
    from hbtui.tui.monitor_data import MonitorView

    first = MonitorView(run_id=1, name="demo", status="running", model_test=DEMO_MODEL_ALIAS, calls_per_second=0.0)
    shown = " ".join(stats_text(first).split())
    assert "ETA estimating…" in shown
    assert "the local demo model answers on this machine's CPU" in shown
    later = MonitorView(run_id=2, name="mine", status="running", model_test="gpt-x", eta_seconds=95.0)
    shown = " ".join(stats_text(later).split())
    assert "ETA 1m 35s" in shown and "CPU" not in shown
