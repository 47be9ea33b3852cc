"""A stored run's settings when it is resumed: what it was made with, the keys of this session,
what a resume may change (how the run is reached) and may not (what it measures), and the
one-line hint that says how to resume a run that stopped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hbtui.core.completion_groups import replied_by_of
from hbtui.core.settings.config import UNRECORDED_SETTINGS, Settings, SettingsError, attribute_key
from hbtui.store import RunRow, Store


def settings_for_run(run: RunRow, current: Settings, **overrides: Any) -> Settings:
    """The run's stored settings, with the current API keys (never stored) and any overrides.

    A key goes only to the endpoint it was configured for: when the current settings point at
    another URL than the run's, their key would leak to the run's host, so that is refused.
    The database is the one open now, wherever the run was made.
    """
    stored: dict[str, Any] = {k: v for k, v in run.settings.items() if k in Settings.__dataclass_fields__}
    stored.update(api_key=None, grader_api_key=None, db_path=current.db_path)
    merged = Settings(**stored).with_overrides(**overrides)
    pairs = [("BASE_URL", "API_KEY", current.base_url, merged.base_url, current.api_key)]
    if current.grader_api_key or current.grader_base_url:
        pairs.append(
            (
                "GRADER_BASE_URL",
                "GRADER_API_KEY",
                current.effective_grader_base_url,
                merged.effective_grader_base_url,
                current.effective_grader_api_key,
            )
        )
    keys = {}
    for url_key, key_name, current_urls, run_urls, key in pairs:
        if key and current_urls and current_urls != run_urls:
            current_url, run_url = ",".join(current_urls), ",".join(run_urls or ())
            raise SettingsError(
                f"run {run.id} calls {run_url}, but {url_key} is {current_url} now: {key_name} is not sent to"
                f" another host. Set {url_key}={run_url} with its key, or resume with --base-url {current_url}"
            )
        keys[key_name] = key
    grader_key = keys.get("GRADER_API_KEY", current.grader_api_key)
    return replace(merged, api_key=keys.get("API_KEY"), grader_api_key=grader_key)


# What a run measures. A resume may change how the run is reached (endpoint, keys, concurrency,
# timeouts, patience), never these: that would put two models' replies, or two graders'
# verdicts, under one label. (The sample is not a setting: a resume cannot change it at all.)
MEASURED_TEST = (
    "model_test",
    "temperature_test",
    "max_tokens_test",
    "reasoning_test",
    "system_message_test",
    "api_test",
    "completions",  # where the replies come from: planned with the run, never changed after
)
MEASURED_GRADER = (
    "model_grader",
    "grader_template",
    "temperature_grader",
    "max_tokens_grader",
    "reasoning_grader",
    "system_message_grader",
    "grader_json_schema",
    "api_grader",
)

# What a regrade may set: everything about the grader, what it measures and how it is reached;
# the model under test and its settings stay the source's, since its replies are reused as they are.
GRADER_SETTINGS = (
    *MEASURED_GRADER,
    "grader_base_url",
    "grader_concurrency",
    "grader_rpm",
    "grader_tpm",
    "rate_limit_patience",
    "timeout",
    "max_attempts",
    "grader_parse_attempts",
    "unreachable_patience",
    "db_write_patience",
)


async def refuse_measured_changes(store: Store, run: RunRow, settings: Settings) -> None:
    """Raise SettingsError, in one line, when ``settings`` would change what ``run`` measures.

    One correction is allowed: a model name, while none of that model's calls has been answered
    (a run that stopped on "model not found" at once is corrected with --model-test NAME).
    """
    replies, verdicts = await store.answered_calls(run.id)
    stored: Mapping[str, object] = run.settings  # read by each measured setting's name
    for names, answered in ((MEASURED_TEST, replies), (MEASURED_GRADER, verdicts)):
        for name in names:
            if name not in stored:
                continue  # a setting added to hbtui since the run was made
            before, now = stored[name], getattr(settings, name)
            if before == now or (name in ("model_test", "model_grader") and not answered):
                continue
            key = attribute_key(name)
            raise SettingsError(
                f"{key} {now!r}: run {run.id} was made with {before!r}, and a resume may change how a run is"
                f" reached (endpoint, keys, concurrency, timeouts), not what it measures; start a new run"
                f" (hbtui run) for {now!r}"
            )


def resume_hint(run_id: int, error: str | None, prog: str = "hbtui") -> str:
    """What to do about a run that stopped on ``error``, as one line naming the command (``prog``:
    hbtui as the user invoked it, e.g. ``.venv/bin/hbtui``).

    A resume keeps the run's endpoint and model names (they are part of what the run is), so
    fixing BASE_URL in .env does not move it: the hint says which flag does.
    """
    kind = (error or "").split(":", 1)[0]
    if kind in ("quota", "daily_limit"):
        return f"then: {prog} resume {run_id}"
    if kind == "rate_limited":
        return (
            f"once the endpoint takes calls again: {prog} resume {run_id} (with RPM or TPM set lower, or"
            f" RATE_LIMIT_PATIENCE longer: {prog} resume {run_id} --rpm N)"
        )
    if prog != "hbtui":
        return resume_hint(run_id, error).replace("hbtui resume", f"{prog} resume")
    if kind == "connection":
        return (
            f"once the server answers: hbtui resume {run_id} (a run keeps its endpoint; to move it:"
            f" hbtui resume {run_id} --base-url URL, or --grader-base-url URL)"
        )
    if kind in ("redirected", "client_error"):
        return (
            f"point the run at the server meant (a run keeps its endpoint): hbtui resume {run_id}"
            " --base-url URL (or --grader-base-url URL)"
        )
    if kind == "auth":
        return f"set the key (API_KEY, or GRADER_API_KEY, in .env or the environment), then: hbtui resume {run_id}"
    if kind == "not_found":
        return (
            f"a run keeps its endpoint and model names; while none of a model's calls has been answered its"
            f" name may be corrected: hbtui resume {run_id} --model-test NAME"
            " (or --model-grader NAME, or --base-url URL if the address lacks its /v1)"
        )
    return f"fix the cause, then: hbtui resume {run_id}"


async def record_changed_settings(store: Store, run: RunRow, settings: Settings) -> list[tuple[str, object, object]]:
    """A resume given other settings (--base-url, --model-test, BATCH_POLL...) records them on the
    run: its description and summary then name what answered. What changed, (name, was, is)."""
    now = settings.public_dict()
    before: Mapping[str, object] = run.settings
    # Only what the run recorded: a setting added to hbtui since is no change of the user's.
    changed = [
        (name, before[name], value)
        for name, value in now.items()
        if name in before and name not in UNRECORDED_SETTINGS and before[name] != value
    ]
    if changed:
        await store.update_run_settings(run.id, now, replied_by_of(settings), settings.model_grader or "")
    return changed
