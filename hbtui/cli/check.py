"""`hbtui check`: each endpoint asked, before a run, whether it answers."""

from __future__ import annotations

from hbtui.cli.common import EXIT_FAILED, EXIT_OK, say
from hbtui.core.settings.config import Settings


async def cmd_check(settings: Settings) -> int:
    """The configuration screen's connection check, one line per check (each endpoint named when
    there are several); exit 0 when every check passed."""
    from hbtui.client.checks import check_connection

    settings.test_endpoints, settings.grader_endpoints  # noqa: B018 - keys that match no endpoint: one line, exit 2
    results = await check_connection(settings)
    for result in results:
        say(f"{'ok  ' if result.ok else 'FAIL'} {result.name}: {result.message}")
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED
