"""What a run keeps as JSON beside its columns, typed by key: its settings, its requests, where
an imported run came from, and a meta-eval's report.

These are ``TypedDict``s rather than dataclasses because they are stored and read back as JSON,
written by every version of hbtui since the column was added: a run made by an older hbtui lacks
the keys added since (``total=False``), and ``show --json`` prints them as they are stored.
"""

from __future__ import annotations

from typing import Any, TypedDict


class StoredSettings(TypedDict, total=False):
    """The settings a run was made with (``Settings.public_dict``: keys reduced to a mask, lists
    as their text); tests/core/test_run_records.py keeps the keys equal to the settings'."""

    base_url: str | None
    api_key: str | None
    model_test: str | None
    completions: str | None
    model_grader: str | None
    grader_base_url: str | None
    grader_api_key: str | None
    reasoning_test: str | None
    reasoning_grader: str | None
    api_test: str
    api_grader: str
    temperature_test: float | None  # None: not sent
    temperature_grader: float | None
    max_tokens_test: int | None
    max_tokens_grader: int | None
    concurrency: int
    grader_concurrency: int | None
    rpm: str | None
    tpm: str | None
    grader_rpm: str | None
    grader_tpm: str | None
    rate_limit_patience: float
    timeout: float
    max_answer_mib: float
    max_attempts: int
    grader_parse_attempts: int
    unreachable_patience: float
    db_write_patience: float
    batch: bool  # through the endpoint's batch API
    batch_poll: float
    serve_max_tabs: int
    grader_template: str
    system_message_test: str | None
    system_message_grader: str | None
    grader_json_schema: bool
    grader_slots: int | None
    grader_explanation_chars: int | None
    length_penalty: float | None
    length_centre: float
    reviewer: str | None
    db_path: str
    cache_dir: str


class TemplateRecord(TypedDict):
    name: str  # "builtin", "reference" or the file's path
    sha256: str


class RequestsRecord(TypedDict, total=False):
    """What a run's requests were (hbtui.core.fidelity.describe_requests), and the limits its
    providers set (hbtui.core.rate_limits, added by the driver)."""

    completions: str  # only when the records' own completions were graded
    grader_template: TemplateRecord
    system_message_test: str | None
    system_message_grader: str | None
    temperature_test: float | None  # None: not sent
    temperature_grader: float | None
    max_tokens_test: int | None
    max_tokens_grader: int | None
    reasoning_test: str | None
    reasoning_grader: str | None
    api_test: str  # chat or responses (hbtui.core.calls.APIS)
    api_grader: str
    grader_response_format: str | None
    model_grader: str | None
    deviations: list[str]  # what negotiating with the providers changed
    differences: list[str]  # everything that differs from the reference's requests
    reference_identical: bool
    reference_commit: str | None  # the simple-evals commit they are identical to ("ee3b031"); None if not
    limits: dict[str, Any]  # hbtui.core.rate_limits' summary, merged over the run's processes


class ImportedFrom(TypedDict):
    """Where an imported run came from (hbtui.imports)."""

    format: str  # hbtui.imports' format names
    path: str  # the file, resolved
    stated_score: float | None  # the score the file itself states
    stated: dict[str, str]  # the file's own description, as written (its model, grader, score...)
    notes: list[str]  # what the import found worth saying (a run likely cut short...)


class MetaEvalReport(TypedDict):
    """A meta-eval's report (hbtui.meta_eval.summary): the grader against the physicians, with
    the reference's names for its metrics."""

    rows: int
    judged: int  # rows with a verdict
    unjudged: int
    pairwise_model_f1_balanced: float | None  # the headline (hbtui.meta_eval.metrics.HEADLINE)
    model_agreement: dict[str, dict[str, Any]]
    by_category: dict[str, dict[str, Any]]
    row_aggregates: dict[str, float]
    physicians: dict[str, dict[str, Any]]
    physician_distribution: dict[str, Any]
    majority_vote: dict[str, Any]
