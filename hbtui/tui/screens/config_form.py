"""The configuration screen's form, apart from its widgets: each field and the setting it edits,
the sections in their order, and how a field's text is checked, shown and first filled in, with
the same rules as `.env` and the command line. The screen is hbtui.tui.screens.config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hbtui.analysis.estimate import Estimate
from hbtui.core.grading import TemplateError, load_template
from hbtui.core.run_kinds import MODEL_RUN
from hbtui.core.settings.config import TEMPLATE, TEMPLATE_NAMES, Setting, Settings, SettingsError, setting_for
from hbtui.core.settings.setting_kinds import Choice
from hbtui.render.estimate_report import estimate_summary
from hbtui.services import run_name_problem

NOT_SENT = "none"
LOCAL_FILE = "file"
OWN_ENDPOINT = "own"


@dataclass(frozen=True)
class FormField:
    name: str  # a Settings attribute, or a run option (subset, data_path, limit, seed, repeats, run_name)
    label: str
    kind: str  # "setting" (read as its description says), or a run option's: data_file, optional_int, int, choice
    placeholder: str = ""
    required: bool = False
    setting: Setting | None = None


def setting_field(attribute: str) -> FormField:
    """A setting's field: label, placeholder and checks from the setting's one description."""
    setting = setting_for(attribute)
    return FormField(attribute, setting.label, "setting", setting.placeholder, setting.required, setting)


SECTIONS: list[tuple[str, list[FormField]]] = [
    (
        "Model under test",
        [
            FormField("endpoint", "Endpoint", "endpoint"),
            *(
                setting_field(name)
                for name in (
                    "base_url",
                    "api_key",
                    "model_test",
                    "api_test",
                    "reasoning_test",
                    "temperature_test",
                    "max_tokens_test",
                    "system_message_test",
                    "concurrency",
                )
            ),
        ],
    ),
    (
        "Grader",
        [
            setting_field(name)
            for name in (
                "grader_base_url",
                "grader_api_key",
                "model_grader",
                "api_grader",
                "reasoning_grader",
                "temperature_grader",
                "max_tokens_grader",
                "grader_concurrency",
                "grader_template",
                "system_message_grader",
                "grader_json_schema",
            )
        ],
    ),
    (
        "Calls (both models)",
        [setting_field(name) for name in ("timeout", "max_attempts", "grader_parse_attempts", "batch")],
    ),
    (
        "Data and run",
        [
            FormField("run_kind", "Run kind", "run_kind"),
            FormField("subset", "Subset", "choice"),
            FormField("data_path", "Local JSONL file", "data_file", "path (when the subset is a local file)"),
            setting_field("completions"),
            FormField("limit", "Conversations", "optional_int", "all"),
            FormField("seed", "Seed", "int"),
            FormField("repeats", "Repeats", "positive_int"),
            FormField("run_name", "Run name", "str", "automatic"),
        ],
    ),
]


FIELDS = {f.name: f for _, section in SECTIONS for f in section}


# Which of two fields of one label a message means ("temperature (grader)").
SECTION_OF = {f.name: title for title, section in SECTIONS for f in section}


RUN_OPTION_FLAGS = {
    "--data": "data_path",
    "--limit": "limit",
    "--seed": "seed",
    "--repeats": "repeats",
    "--name": "run_name",
}


SETTING_NAMES = [name for name, form_field in FIELDS.items() if form_field.setting is not None]


RUN_OPTIONS = ("endpoint", "run_kind", "subset", "data_path", "limit", "seed", "repeats", "run_name")


def check_setting(setting: Setting, raw: str) -> tuple[Any, str | None]:
    """A setting typed on screen, read as everywhere else; an empty field means what its
    placeholder says (the default), and is required where the setting has no such meaning."""
    if raw == "" or (isinstance(setting.kind, Choice) and raw == NOT_SENT):
        if setting.required or (not setting.placeholder and setting.default is not None):
            return None, "required"
        return setting.default, None
    if setting.kind is TEMPLATE and raw.lower() not in TEMPLATE_NAMES:
        # A file is read as it is typed; a name's prompt is fetched (or found cached) at the start.
        try:
            load_template(Path(raw).expanduser())
        except TemplateError as exc:
            return None, str(exc).split(": ", 1)[-1].removeprefix(f"{raw}: ")
        return str(Path(raw).expanduser()), None
    try:
        return setting.parse(raw, origin="typed"), None
    except SettingsError as exc:
        return None, str(exc).removeprefix(f"{setting.key} (typed): ")


def check_field(form_field: FormField, raw: str, subset: str) -> tuple[Any, str | None]:
    """(value, problem) of one field as typed; the problem is a short phrase or None."""
    raw = raw.strip()
    if form_field.setting is not None:
        return check_setting(form_field.setting, raw)
    kind = form_field.kind
    if raw == "":
        if kind == "data_file" and subset == LOCAL_FILE:
            return None, "required for a local file"
        if kind == "int":
            return 0, None
        if kind == "positive_int":
            return 1, None
        return None, None
    if kind in ("choice", "endpoint", "run_kind"):
        return raw, None
    if kind in ("optional_int", "int", "positive_int"):
        try:
            value = int(raw)
        except ValueError:
            return None, f"{raw!r} is not a whole number"
        if kind == "optional_int" and value < 1:
            return None, "must be at least 1 (or empty for all)"
        if kind == "positive_int" and value < 1:
            return None, f"{value} must be at least 1"
        return value, None
    if kind == "data_file":
        path = Path(raw).expanduser()
        if not path.exists():
            return None, "no such file"
        if path.is_dir():
            return None, "is a directory, not a JSONL file"
        return str(path), None
    if form_field.name == "run_name":
        return (None, problem) if (problem := run_name_problem(raw)) else (raw, None)
    return raw, None


def field_text(name: str, value: Any) -> str:
    """A value as its field shows it (from the settings, or a preset)."""
    form_field = FIELDS.get(name)
    if form_field is not None and form_field.setting is not None:
        if value is None and isinstance(form_field.setting.kind, Choice):
            return NOT_SENT
        return form_field.setting.kind.text(value)
    return "" if value is None else str(value)


def field_title(name: str) -> str:
    """A field as a message names it: its label, and which model's where two fields share it."""
    label = FIELDS[name].label.lower()
    shared = sum(form_field.label == FIELDS[name].label for form_field in FIELDS.values()) > 1
    return f"{label} ({SECTION_OF[name].lower()})" if shared else label


def form_wording(message: str) -> str:
    """A message of the core, in the form's words: the fields it shows, not the command line's
    flags or the `.env` keys that the form has no place for."""
    flags = dict(RUN_OPTION_FLAGS)
    for name in SETTING_NAMES:
        setting = setting_for(name)
        flags[setting.key] = name
        if setting.flag:
            flags[setting.flag] = name
    for flag, name in sorted(flags.items(), key=lambda item: -len(item[0])):
        message = re.sub(
            rf"(?<![\w-]){re.escape(flag)}(?: PATH)?(?![\w-])", f'the field "{field_title(name)}"', message
        )
    return message


def initial_text(settings: Settings, name: str, remembered: dict[str, str]) -> str:
    if name in RUN_OPTIONS:
        defaults = {
            "endpoint": OWN_ENDPOINT,
            "run_kind": MODEL_RUN,
            "subset": "main",
            "seed": "0",
            "repeats": "1",
            **remembered,
        }
        return defaults.get(name, "")
    return field_text(name, getattr(settings, name))


# From the form a run is one key away; past this many conversations the calls (and what they
# may cost) are said and confirmed first.
LARGE_RUN_CONVERSATIONS = 100


def large_run_question(estimate: Estimate) -> str | None:
    """The question to confirm a run of more than LARGE_RUN_CONVERSATIONS conversations, with its
    estimate (calls, tokens, cost, time), or None for a smaller one."""
    if estimate.conversations <= LARGE_RUN_CONVERSATIONS:
        return None
    return estimate_question(estimate)


def estimate_question(estimate: Estimate) -> str:
    """Start a run, its estimate said first: what a paid endpoint bills it for."""
    return "\n".join([f"Start a run of {estimate.conversations:,} conversations?", *estimate_summary(estimate)])
