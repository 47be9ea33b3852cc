"""The engine's public face: what the app and the command line borrow from it, and nothing else.

The app reaches the engine only through here (an import-linter contract in pyproject.toml holds
it to that), so the engine's insides can change without the screens noticing.
"""

from __future__ import annotations

from hbtui.core.verdicts import INCOMPLETE, TAKEN_OVER
from hbtui.engine.batch_runs import cancel_batches
from hbtui.engine.detached import DRIVE_COMMAND, DetachedRun, launch_detached, read_snapshot
from hbtui.engine.driver import Engine
from hbtui.engine.run_admin import RunActionError, delete_run, export_format, export_run, rename_run
from hbtui.engine.run_finish import compute_report
from hbtui.engine.run_plan import HeadStart, check_run_name, plan_regrade, plan_run, run_name_problem, start_run
from hbtui.engine.run_settings import GRADER_SETTINGS, refuse_measured_changes, resume_hint, settings_for_run

__all__ = [
    "DRIVE_COMMAND",
    "GRADER_SETTINGS",
    "INCOMPLETE",
    "TAKEN_OVER",
    "DetachedRun",
    "Engine",
    "HeadStart",
    "RunActionError",
    "cancel_batches",
    "check_run_name",
    "compute_report",
    "delete_run",
    "export_format",
    "export_run",
    "launch_detached",
    "plan_regrade",
    "plan_run",
    "read_snapshot",
    "refuse_measured_changes",
    "rename_run",
    "resume_hint",
    "run_name_problem",
    "settings_for_run",
    "start_run",
]
