"""Named sets of run settings, kept for the next run: JSON in the user's config directory.

A preset never holds an API key: it is meant to be shared, copied and kept, and a key in it
would leak the same way. Keys come from .env or the environment each time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hbtui.core.errors import HbtuiError
from hbtui.core.files import private_file
from hbtui.core.settings.config import BY_ATTRIBUTE, SETTINGS, SettingsError

SECRET_FIELDS = frozenset(setting.attribute for setting in SETTINGS if setting.secret)
PROFESSIONAL_LENGTH_PENALTY = 0.0147
PROFESSIONAL_LENGTH_CENTRE = 2000.0


def built_in_presets() -> dict[str, dict[str, Any]]:
    """Presets that come with hbtui, read-only. ``reference``: every request byte-identical to what
    simple-evals sends (its grader prompt, its system message for both models, temperature 0.5
    and 2048 tokens for both, no response_format, no reasoning effort). ``reference-gpt-5.4``: the
    model under test as ``reference`` asks it, and the grader as simple-evals at 652c89d asks its
    GPT-5.4 grader (--healthbench-use-gpt-5-4-low-grader): through the Responses API, the filled
    template as the one user message, reasoning effort low, and nothing else (no system message,
    temperature, token limit or schema). Like ``reference``, it sets the requests' shape, not the
    models: MODEL_GRADER names the grader (the reference's is gpt-5.4-2026-03-05)."""
    from hbtui.core import reference
    from hbtui.core.calls import CHAT_API, RESPONSES_API

    model_under_test = {
        "system_message_test": reference.SYSTEM_MESSAGE,
        "temperature_test": reference.TEMPERATURE,
        "max_tokens_test": reference.MAX_TOKENS,
        "reasoning_test": None,
        "api_test": CHAT_API,
    }
    reference_2026 = {
        **model_under_test,
        "grader_template": "reference",
        "api_grader": RESPONSES_API,
        "system_message_grader": None,
        "temperature_grader": None,  # not sent
        "max_tokens_grader": None,  # not sent
        "reasoning_grader": "low",
        "grader_json_schema": False,
    }
    return {
        "reference-gpt-5.4": reference_2026,
        # HealthBench Professional as OpenAI reports it: the 2026 grader, and the score adjusted
        # for length around 2,000 characters at 0.0147 per 500 (the value third parties cite
        # from the paper, 2.94e-5 a character; simple-evals ships no default).
        "professional": {
            **reference_2026,
            "length_penalty": PROFESSIONAL_LENGTH_PENALTY,
            "length_centre": PROFESSIONAL_LENGTH_CENTRE,
        },
        "reference": {
            "grader_template": "reference",
            "system_message_test": reference.SYSTEM_MESSAGE,
            "system_message_grader": reference.SYSTEM_MESSAGE,
            "temperature_test": reference.TEMPERATURE,
            "temperature_grader": reference.TEMPERATURE,
            "max_tokens_test": reference.MAX_TOKENS,
            "max_tokens_grader": reference.MAX_TOKENS,
            "grader_json_schema": False,
            "reasoning_test": None,
            "reasoning_grader": None,
            "api_test": CHAT_API,
            "api_grader": CHAT_API,
        },
    }


def preset_settings(name: str, path: Path | None = None, warn=None) -> dict[str, Any]:
    """The Settings values of the preset ``name``: a built-in one, or one saved by the app.
    ``warn``: told when a saved preset has a built-in's name (the built-in is used)."""
    built_in = built_in_presets()
    if name in built_in:
        if warn is not None and name in load_presets(path):
            warn(f"preset {name}: the built-in one is used; a preset of yours has its name and is not (rename it)")
        return dict(built_in[name])
    saved = load_presets(path)
    if name not in saved:
        known = ", ".join(sorted([*built_in, *saved]))
        raise PresetError(f"--preset {name}: no such preset (known: {known})")
    values: dict[str, Any] = {}
    for attribute, raw in saved[name].items():
        if attribute not in BY_ATTRIBUTE or attribute in SECRET_FIELDS or raw in ("", None):
            continue  # run options (subset, limit...) and empty fields are the flags' business
        try:
            values[attribute] = BY_ATTRIBUTE[attribute].parse(raw, origin=f"preset {name}")
        except SettingsError as exc:
            raise PresetError(str(exc)) from None
    return values


class PresetError(HbtuiError, ValueError):
    """A presets file that cannot be read or written; the message names it."""


def presets_path(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hbtui" / "presets.json"


def load_presets(path: Path | None = None) -> dict[str, dict[str, Any]]:
    path = path or presets_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise PresetError(f"{path}: cannot read presets ({exc})") from None
    if not isinstance(data, dict):
        raise PresetError(f"{path}: not a JSON object of presets")
    return {
        str(name): {k: v for k, v in values.items() if k not in SECRET_FIELDS}
        for name, values in data.items()
        if isinstance(values, dict)
    }


def save_preset(name: str, values: Mapping[str, Any], path: Path | None = None) -> Path:
    """Add or replace one preset; the file is created owner-only and replaced atomically."""
    name = name.strip()
    if not name:
        raise PresetError("a preset needs a name")
    if name in built_in_presets():
        raise PresetError(f"{name!r} is a built-in preset, which cannot be replaced; choose another name")
    path = path or presets_path()
    presets = load_presets(path)
    presets[name] = {k: v for k, v in values.items() if k not in SECRET_FIELDS}
    _write_private(path, json.dumps(presets, indent=2, sort_keys=True) + "\n")
    return path


def data_source_path() -> Path:
    return presets_path().with_name("last-data.json")


def remembered_data_source() -> dict[str, str]:
    """The subset and file of the last run started from the app; empty when there is none."""
    try:
        data = json.loads(data_source_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {key: str(data[key]) for key in ("subset", "data_path") if isinstance(data.get(key), str)}


def remember_data_source(source: Mapping[str, str]) -> None:
    try:
        _write_private(data_source_path(), json.dumps(dict(source), indent=2, sort_keys=True) + "\n")
    except PresetError:
        pass  # only a convenience: the run starts all the same


def rename_preset(old: str, new: str, path: Path | None = None) -> None:
    """``old`` under the name ``new``, in its place; a name taken (or built in) is refused."""
    new = new.strip()
    if not new:
        raise PresetError("a preset needs a name")
    if new in built_in_presets() or old in built_in_presets():
        raise PresetError("built-in presets cannot be renamed, nor their names taken")
    path = path or presets_path()
    presets = load_presets(path)
    if new in presets and new != old:
        raise PresetError(f"a preset named {new!r} exists already")
    renamed = {new if name == old else name: values for name, values in presets.items()}
    _write_private(path, json.dumps(renamed, indent=2, sort_keys=True) + "\n")


def delete_preset(name: str, path: Path | None = None) -> None:
    path = path or presets_path()
    presets = load_presets(path)
    if presets.pop(name, None) is not None:
        _write_private(path, json.dumps(presets, indent=2, sort_keys=True) + "\n")


def _write_private(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with private_file(path) as out:
            out.write(text)
    except OSError as exc:
        raise PresetError(f"{path}: cannot write presets ({exc.strerror or exc})") from None
