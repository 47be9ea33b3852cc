"""Settings: `.env` (python-dotenv) < environment < command line, validated into one object.

Each setting is described once, where its field of :class:`Settings` is declared: its `.env` key,
kind (how its text is read), default, help, flag, section, and whether it is secret. The `.env`
keys, the command-line flags, the configuration screen's fields and their checks, `.env.example`
and the settings table of docs/settings.md (``python -m hbtui.core.settings.settings_docs``) all follow from
:data:`SETTINGS`.

Every problem is reported as a :class:`SettingsError` whose message names the key (and the
`.env` line when the value came from there), so the CLI can print one line and stop.
API keys live only in memory: :meth:`Settings.public_dict` is what gets stored or shown.

Presets (hbtui/core/settings/presets.py) are named sets of these same settings, read through the
same kinds; they sit between the environment and the flags. Prices (hbtui/core/settings/prices.py)
are not settings of a run: a table per model, kept beside the presets, so they are not described
here. Reading `.env` and the environment is hbtui/core/settings/loading.py.

Longer than most modules (about 650 lines), because :class:`Settings` is the settings' one
description: a field and its description for each of about 60 settings, which would only be
split across files by cutting the table in two.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hbtui.core.calls import APIS, CHAT_API
from hbtui.core.settings.setting_kinds import (
    NOT_SENT,
    Bool,
    Choice,
    Kind,
    ListOf,
    NamedNumber,
    NameOrPath,
    Number,
    SettingsError,
    Url,
    WholeNumber,
)

__all__ = ["SETTINGS", "Section", "Setting", "Settings", "SettingsError", "setting_for"]

REASONING_EFFORTS = ("minimal", "low", "medium", "high")
TEMPLATE_NAMES = ("reference", "builtin")

# The length adjustment's values per subset: a penalty per 500 characters of reply, around a
# centre of 2,000 characters. They come from a third party's pull request (MedARC-AI/medmarks
# #132, open); simple-evals ships no default, even at 652c89d, which added the adjustment. Named
# rather than on by default.
LENGTH_PENALTIES = {"main": 0.0299, "hard": 0.0392, "consensus": 0.0020}
LENGTH_CENTRE = 2000.0

TEXT = Kind()
PATH = Kind(shape="a path")
URL = Url(shape="an http(s) URL")
URLS = ListOf(item=Url(), what="endpoint", shape="http(s) URLs, comma-separated")
KEYS = ListOf(item=Kind(), what="key")
EFFORT = Choice(choices=REASONING_EFFORTS, what="a reasoning effort", shape="minimal, low, medium, high")
API = Choice(choices=APIS, what="an API", shape="chat or responses")
# Every number is bounded (hbtui.core.settings.setting_kinds): the shape is what the docs say of its range.
# "not sent": the parameter is left out of the request (the 2026 reference grader sends neither).
TEMPERATURE = Number(at_least=0.0, at_most=2.0, shape="0 to 2, or not sent", may_be_unsent=True)
TOKENS = WholeNumber(at_most=1_000_000, shape="1 to 1,000,000, or not sent", may_be_unsent=True)
ATTEMPTS = WholeNumber(at_most=100, shape="1 to 100")
EXPLANATION_CHARS = WholeNumber(at_least=16, at_most=100_000, shape="16 to 100,000")
SLOT_COUNT = WholeNumber(at_most=256, shape="1 to 256")
# The workers are the sum of the limits over every endpoint: Settings.check_bounds bounds that too.
MAX_IN_FLIGHT = 4096
IN_FLIGHT = WholeNumber(at_most=MAX_IN_FLIGHT, shape="1 to 4,096 (over all endpoints together)")
SECONDS = Number(at_most=86_400.0, shape="seconds, above 0 up to 86,400 (a day)")
PER_MINUTE = ListOf(
    item=Number(at_most=1e10),
    what="limit",
    shape="per minute, above 0 up to 10,000,000,000; one for all endpoints or one per endpoint",
)
MIB = Number(at_most=1024.0, shape="MiB, above 0 up to 1,024")
TEMPLATE = NameOrPath(names=TEMPLATE_NAMES, shape="reference, builtin, or a file")
YES_NO = Bool(shape="true or false")
PENALTY = NamedNumber(
    named=tuple(LENGTH_PENALTIES.items()),
    what="a penalty per 500 characters",
    off_words=("", "off", "none"),
    at_most=100.0,
    shape="0 to 100, main, hard, consensus, or off",
)
COMPLETIONS = Choice(
    choices=("physician", "reference"), what="a completions mode", shape="physician, reference, or none"
)
CENTRE = NamedNumber(
    named=tuple((name, LENGTH_CENTRE) for name in LENGTH_PENALTIES),
    what="a centre in characters",
    at_most=10_000_000.0,
    shape="characters, 0 to 10,000,000",
)


@dataclass(frozen=True)
class Section:
    """A group of settings: a paragraph of `.env.example` with ``prose`` above it."""

    name: str
    prose: str = ""


ENDPOINT = Section("endpoint under test", "The model under test: any OpenAI-compatible endpoint (…/v1).")
GRADER = Section("grader", "The grader: on the same endpoint as the model under test unless GRADER_BASE_URL is set.")
SAMPLING = Section(
    "sampling",
    "What each model is asked for. Reasoning effort is sent only when set.",
)
RUN = Section("run", "How a run reaches its endpoints: requests in flight, waiting, retrying, stopping.")
PROTOCOL = Section("grading protocol", "What each model is sent besides the conversation, and how the grader answers.")
REPORTING = Section(
    "reporting",
    "A length-adjusted score beside the plain one, applied when a run is reported (never at grading\n"
    "time): each conversation loses LENGTH_PENALTY per 500 reply characters beyond LENGTH_CENTRE\n"
    "(and gains below it). Upstream simple-evals' defaults (2026) as reported by third parties.",
)
REVIEW = Section(
    "review",
    "Human review of the grader's verdicts in the app (flip, flag, undo): the name each review carries.",
)
STORAGE = Section("storage", "Where runs are kept, and where the official HealthBench files are cached.")
SECTIONS = (ENDPOINT, GRADER, SAMPLING, RUN, PROTOCOL, REPORTING, REVIEW, STORAGE)

FLAG_FROM_NAME = "derived"  # the flag is the attribute's name: --max-tokens-test


@dataclass(frozen=True)
class Setting:
    """One setting, as every part of hbtui sees it."""

    key: str  # in .env and the environment
    kind: Kind
    section: Section
    help: str  # one line: the command line's --help, docs/settings.md, .env.example
    attribute: str = ""  # the Settings field (filled in from the field that declares it)
    default: Any = None
    default_text: str = ""  # the default as docs/settings.md says it, where the value alone would not
    flag: str | None = FLAG_FROM_NAME  # None: no flag (a key on a command line lands in shell history)
    secret: bool = False
    required: bool = False  # a run needs it; browsing does not
    aliases: tuple[str, ...] = ()  # older spellings still read
    example: str | None = None  # the line .env.example gives uncommented; None: the default, commented out
    note: str = ""  # .env.example's extra prose for this key
    label: str = ""  # the configuration screen's label, for the settings it shows
    placeholder: str = ""  # what an empty field on screen means

    def parse(self, raw: Any, origin: str) -> Any:
        return self.kind.parse(raw, f"{self.key} ({origin})")

    @property
    def shown_default(self) -> str:
        return self.default_text or self.kind.text(self.default)


def _described(key: str, kind: Kind, section: Section, help: str, default: Any = None, **more: Any) -> Any:
    """A field of Settings with its description (typed Any: the field's own annotation is its type)."""
    description = Setting(key, kind, section, help, default=default, **more)
    return field(default=default, repr=not description.secret, metadata={"setting": description})


@dataclass(frozen=True)
class Settings:
    base_url: tuple[str, ...] | None = _described(
        "BASE_URL",
        URLS,
        ENDPOINT,
        "endpoint of the model under test, or several of its replicas, comma-separated",
        required=True,
        example="http://127.0.0.1:8080/v1",
        note="Several: BASE_URL=http://gpu1:8000/v1,http://gpu2:8000/v1 with API_KEY=key1,key2 in the same order"
        " (or one key for all, or one URL twice with two keys); each endpoint gets CONCURRENCY calls in flight",
        label="Base URL",
        placeholder="http://127.0.0.1:8080/v1",
    )
    api_key: tuple[str, ...] | None = _described(
        "API_KEY",
        KEYS,
        ENDPOINT,
        "API key of the model under test, or one per BASE_URL endpoint, comma-separated (never a flag:"
        " it would land in shell history)",
        secret=True,
        flag=None,
        example="",
        default_text="none",
        label="API key",
        placeholder="none",
    )
    model_test: str | None = _described(
        "MODEL_TEST",
        TEXT,
        ENDPOINT,
        "model under test",
        required=True,
        example="my-model",
        label="Model",
        placeholder="model id",
    )
    # Where the replies come from: the model under test (None), or the records' own completions,
    # as the reference's physician-completion modes grade them (hbtui.core.completions).
    completions: str | None = _described(
        "COMPLETIONS",
        COMPLETIONS,
        ENDPOINT,
        "grade the records' own completions instead of the model's replies: physician (each group's ideal"
        " completion) or reference (the four reference completions of Groups 2 and 3), each group scored apart",
        default_text="none (the model under test replies)",
        label="Completions",
        placeholder="none: the model replies",
    )
    model_grader: str | None = _described(
        "MODEL_GRADER",
        TEXT,
        GRADER,
        "grader model",
        required=True,
        example="my-grader",
        note="The reference harness grades with gpt-4.1-2025-04-14 at temperature 0.5.",
        label="Model",
        placeholder="model id",
    )
    grader_base_url: tuple[str, ...] | None = _described(
        "GRADER_BASE_URL",
        URLS,
        GRADER,
        "grader endpoint(s) when they differ, comma-separated; empty: BASE_URL (and API_KEY)",
        example="",
        default_text="BASE_URL",
        label="Base URL",
        placeholder="same as the model under test",
    )
    grader_api_key: tuple[str, ...] | None = _described(
        "GRADER_API_KEY",
        KEYS,
        GRADER,
        "API key of a grader on its own endpoint, or one per GRADER_BASE_URL endpoint",
        secret=True,
        flag=None,
        example="",
        default_text="API_KEY on the same endpoint",
        label="API key",
        placeholder="same as the model under test",
    )
    reasoning_test: str | None = _described(
        "REASONING_TEST",
        EFFORT,
        SAMPLING,
        "reasoning effort of the model under test",
        aliases=("RESONING_TEST",),
        example="",
        default_text="not sent",
        label="Reasoning effort",
    )
    reasoning_grader: str | None = _described(
        "REASONING_GRADER",
        EFFORT,
        SAMPLING,
        "reasoning effort of the grader",
        aliases=("RESONING_GRADER",),
        example="",
        default_text="not sent",
        label="Reasoning effort",
    )
    api_test: str = _described(
        "API_TEST",
        API,
        SAMPLING,
        "how the model under test is asked: chat (POST /chat/completions) or responses (OpenAI's Responses API,"
        " POST /responses)",
        CHAT_API,
        label="API",
    )
    api_grader: str = _described(
        "API_GRADER",
        API,
        SAMPLING,
        "how the grader is asked: chat or responses (the 2026 reference grader, GPT-5.4, is asked through responses)",
        CHAT_API,
        label="API",
    )
    temperature_test: float | None = _described(
        "TEMPERATURE_TEST", TEMPERATURE, SAMPLING, "temperature of the model under test", 0.3, label="Temperature"
    )
    temperature_grader: float | None = _described(
        "TEMPERATURE_GRADER", TEMPERATURE, SAMPLING, "temperature of the grader", 0.3, label="Temperature"
    )
    max_tokens_test: int | None = _described(
        "MAX_TOKENS_TEST", TOKENS, SAMPLING, "max tokens of a reply", 2048, label="Max tokens"
    )
    max_tokens_grader: int | None = _described(
        "MAX_TOKENS_GRADER", TOKENS, SAMPLING, "max tokens of a verdict", 1024, label="Max tokens"
    )
    concurrency: int = _described(
        "CONCURRENCY",
        IN_FLIGHT,
        RUN,
        "requests in flight per endpoint; a concurrency set above an endpoint's rate limit slows down to the"
        " limit instead of failing (see RPM)",
        8,
        label="Concurrency",
    )
    grader_concurrency: int | None = _described(
        "GRADER_CONCURRENCY",
        IN_FLIGHT,
        RUN,
        "requests in flight to a separate grader endpoint",
        default_text="CONCURRENCY",
        label="Concurrency",
        placeholder="same as the model under test",
    )
    # The rate limits hosted providers enforce, per model at each endpoint (hbtui.core.rate_limits):
    # learned from their headers or their 429s unless given here, where they win.
    rpm: tuple[float, ...] | None = _described(
        "RPM",
        PER_MINUTE,
        RUN,
        "requests per minute the model under test may be sent at each endpoint (one for all, or one per"
        " BASE_URL endpoint); calls are spread out to it",
        default_text="learned from the endpoint",
        label="Requests/min",
        placeholder="learned from the endpoint",
    )
    tpm: tuple[float, ...] | None = _described(
        "TPM",
        PER_MINUTE,
        RUN,
        "tokens per minute (prompt plus max tokens, as providers count them) the model under test may be sent"
        " at each endpoint",
        default_text="learned from the endpoint",
        label="Tokens/min",
        placeholder="learned from the endpoint",
    )
    grader_rpm: tuple[float, ...] | None = _described(
        "GRADER_RPM",
        PER_MINUTE,
        RUN,
        "requests per minute of the grader at each endpoint",
        default_text="RPM on the same endpoint, else learned",
        label="Requests/min",
        placeholder="learned from the endpoint",
    )
    grader_tpm: tuple[float, ...] | None = _described(
        "GRADER_TPM",
        PER_MINUTE,
        RUN,
        "tokens per minute of the grader at each endpoint",
        default_text="TPM on the same endpoint, else learned",
        label="Tokens/min",
        placeholder="learned from the endpoint",
    )
    rate_limit_patience: float = _described(
        "RATE_LIMIT_PATIENCE",
        SECONDS,
        RUN,
        "seconds an endpoint may answer nothing but 429 before it is set aside (or the run stops, resumable);"
        " a provider's wait longer than this is a daily limit, and the run stops at once",
        600.0,
    )
    timeout: float = _described(
        "TIMEOUT",
        SECONDS,
        RUN,
        "seconds one answer may take, from sending the request to the answer's last byte (waiting for an"
        " endpoint's rate limit is not counted)",
        120.0,
        label="Timeout (seconds)",
    )
    max_answer_mib: float = _described(
        "MAX_ANSWER_MIB",
        MIB,
        RUN,
        "the most one model or grader answer may hold after decompression, in MiB; a larger one is cut"
        " there and is an error of that call (too_large)",
        8.0,
    )
    max_attempts: int = _described(
        "MAX_ATTEMPTS", ATTEMPTS, RUN, "attempts per call before it counts as failed", 6, label="Max attempts"
    )
    grader_parse_attempts: int = _described(
        "GRADER_PARSE_ATTEMPTS",
        ATTEMPTS,
        RUN,
        "times a grader is asked when its answer holds no verdict",
        3,
        label="Parse attempts",
    )
    # Seconds of nothing but connection failures from an endpoint that answered before, after
    # which the run stops (resumable) rather than burn every remaining conversation's attempts.
    unreachable_patience: float = _described(
        "UNREACHABLE_PATIENCE",
        SECONDS,
        RUN,
        "seconds an endpoint that answered before may fail every call to connect before the run stops"
        " (resumable once it is back)",
        60.0,
    )
    # Seconds the engine keeps answers in memory while the database refuses its writes (another
    # process holds a lock) before it stops the run, saying so.
    db_write_patience: float = _described(
        "DB_WRITE_PATIENCE",
        SECONDS,
        RUN,
        "seconds answers are held in memory while another process locks the database, before the run"
        " stops saying so (no new call is sent meanwhile)",
        300.0,
    )
    # A provider's batch API answers within a window (24 h) at half the online price
    # (hbtui.engine.batch_api); the run records every file and batch it submits.
    batch: bool = _described(
        "BATCH",
        YES_NO,
        RUN,
        "send the run's requests through the endpoint's batch API (/v1/files, /v1/batches): half the price at"
        " OpenAI and others, answered within 24 hours instead of at once; `hbtui resume` picks up its batches",
        False,
        label="Batch API",
    )
    batch_poll: float = _described(
        "BATCH_POLL",
        SECONDS,
        RUN,
        "seconds between looks at a batch run's batches while it waits for them",
        30.0,
    )
    # Each tab of `hbtui serve` is an app process of its own, about 63 MB: 20 tabs took 1.3 GB.
    serve_max_tabs: int = _described(
        "SERVE_MAX_TABS",
        WholeNumber(at_most=256, shape="1 to 256"),
        RUN,
        "browser tabs `hbtui serve` runs at once, each an app process of its own (about 63 MB); a tab"
        " opened past them gets a page saying so, and a tab closed frees its place",
        8,
        flag=None,
    )
    grader_template: str = _described(
        "GRADER_TEMPLATE",
        TEMPLATE,
        PROTOCOL,
        "grader prompt: reference (simple-evals' own, downloaded once), builtin (hbtui's wording), or"
        " a file with <<conversation>> and <<rubric_item>> (or <<criterion>>) once each",
        "reference",
        note="For numbers comparable with published ones: `hbtui run --preset reference`.",
        label="Prompt template",
        placeholder="reference, builtin, or a file",
    )
    system_message_test: str | None = _described(
        "SYSTEM_MESSAGE_TEST",
        TEXT,
        PROTOCOL,
        'a system message sent first to the model under test (the reference sends "You are a helpful assistant.")',
        default_text="none",
        label="System message",
        placeholder="none",
    )
    system_message_grader: str | None = _described(
        "SYSTEM_MESSAGE_GRADER",
        TEXT,
        PROTOCOL,
        "a system message sent first to the grader",
        default_text="none",
        label="System message",
        placeholder="none",
    )
    grader_json_schema: bool = _described(
        "GRADER_JSON_SCHEMA",
        YES_NO,
        PROTOCOL,
        "ask the grader for its verdict with response_format json_schema (the reference does not)",
        True,
        label="JSON schema",
    )
    grader_slots: int | None = _described(
        "GRADER_SLOTS",
        SLOT_COUNT,
        PROTOCOL,
        "llama.cpp's server slots (its --parallel): each conversation's criteria are sent to one slot"
        " (id_slot), which holds their shared prefix, one conversation at a time; not sent unless set",
        default_text="not sent",
        label="Grader slots",
        placeholder="not sent",
    )
    # A small model on a CPU (the demo's) writes on until its token budget runs out: a bound in
    # the schema, which llama.cpp's grammar enforces, keeps each verdict short.
    grader_explanation_chars: int | None = _described(
        "GRADER_EXPLANATION_CHARS",
        EXPLANATION_CHARS,
        PROTOCOL,
        "the most characters of a verdict's explanation, as maxLength in its json_schema (llama.cpp's grammar"
        " holds a grader to it); unbounded unless set (the reference sets no bound)",
        default_text="unbounded",
        label="Explanation chars",
        placeholder="unbounded",
    )
    length_penalty: float | None = _described(
        "LENGTH_PENALTY",
        PENALTY,
        REPORTING,
        "penalty per 500 reply characters beyond the centre: a number, or main (0.0299), hard (0.0392),"
        " consensus (0.002); off unless set",
        default_text="off",
    )
    length_centre: float = _described(
        "LENGTH_CENTRE", CENTRE, REPORTING, "reply characters at which the length adjustment is 0", LENGTH_CENTRE
    )
    reviewer: str | None = _described(
        "REVIEWER",
        TEXT,
        REVIEW,
        "the reviewer's name on each review made in the app; under `hbtui serve` each browser tab asks"
        " (offering this name), since $USER there is the server's account",
        default_text="$USER",
        flag=None,
    )
    db_path: str = _described("HBTUI_DB", PATH, STORAGE, "the database", "runs/hbtui.sqlite", flag="--db")
    cache_dir: str = _described(
        "HBTUI_CACHE",
        PATH,
        STORAGE,
        "where official files (datasets, the reference prompt) are cached",
        str(Path.home() / ".cache" / "hbtui"),
        default_text="~/.cache/hbtui",
        flag=None,
    )

    def __post_init__(self) -> None:
        # "not sent" (hbtui.core.settings.setting_kinds.NOT_SENT) is stored as None: left out.
        for setting in SETTINGS:
            if getattr(self, setting.attribute) is NOT_SENT:
                object.__setattr__(self, setting.attribute, None)
        # A list setting given as text (a stored run's settings, a test, a demo's one URL) is
        # read as its kind reads it, so that nothing downstream iterates over a URL's letters.
        for setting in LIST_SETTINGS:
            value = getattr(self, setting.attribute)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, setting.attribute, setting.parse(value, origin="given"))

    @property
    def effective_grader_base_url(self) -> tuple[str, ...] | None:
        return self.grader_base_url or self.base_url

    @property
    def effective_grader_api_key(self) -> tuple[str, ...] | None:
        # A grader on its own endpoint has its own key; on the same endpoint it shares it.
        if self.grader_base_url and self.grader_base_url != self.base_url:
            return self.grader_api_key
        return self.grader_api_key or self.api_key

    @property
    def effective_grader_concurrency(self) -> int:
        return self.grader_concurrency or self.concurrency

    @property
    def max_answer_bytes(self) -> int:
        """MAX_ANSWER_MIB in bytes: what one answer may hold once inflated (a reply, a model list)."""
        return int(self.max_answer_mib * 1024 * 1024)

    @property
    def grader_shares_endpoints(self) -> bool:
        return not self.grader_base_url or self.grader_base_url == self.base_url

    def rate_limits(self, grader: bool) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
        """(RPM, TPM) of the model under test or of the grader, as given: the grader's own, else
        the test model's where the grader shares its endpoints."""
        if not grader:
            return self.rpm, self.tpm
        shared = self.grader_shares_endpoints
        return self.grader_rpm or (self.rpm if shared else None), self.grader_tpm or (self.tpm if shared else None)

    def with_overrides(self, **values: Any) -> Settings:
        """Command-line values on top; None means "not given" and keeps the current value."""
        given = {
            name: setting_for(name).parse(value, origin="command line")
            for name, value in values.items()
            if value is not None
        }
        return replace(self, **given)

    @property
    def test_endpoints(self) -> list[tuple[str, str | None]]:
        """(URL, key) of each endpoint of the model under test, in BASE_URL's order."""
        return pair_endpoints(self.base_url, self.api_key, "BASE_URL", "API_KEY")

    @property
    def grader_endpoints(self) -> list[tuple[str, str | None]]:
        own = self.grader_base_url and self.grader_base_url != self.base_url
        url_key, key_key = ("GRADER_BASE_URL", "GRADER_API_KEY") if own else ("BASE_URL", "API_KEY")
        if not own and self.grader_api_key:
            key_key = "GRADER_API_KEY"
        return pair_endpoints(self.effective_grader_base_url, self.effective_grader_api_key, url_key, key_key)

    def require_models(self, endpoints: bool = True) -> None:
        """The checks that only a run needs (browsing a database needs no endpoint). A run of the
        records' own completions calls no model under test: the grader's endpoint is enough.
        ``endpoints`` False: a run answered through batch files, which calls none."""
        for setting in SETTINGS:
            if not setting.required or getattr(self, setting.attribute):
                continue
            if self.completions and setting.attribute == "model_test":
                continue
            if setting.attribute == "base_url" and (not endpoints or (self.completions and self.grader_base_url)):
                continue
            raise SettingsError(f"{setting.key} is not set (put it in .env, the environment, or a flag)")
        if not endpoints:
            return
        self.test_endpoints, self.grader_endpoints  # noqa: B018 - raise on keys that match no endpoint
        self.endpoint_rate_limits()
        self.check_in_flight()

    def check_in_flight(self) -> None:
        """Each endpoint has CONCURRENCY workers (a grader of its own, GRADER_CONCURRENCY): their
        sum over every endpoint is bounded as CONCURRENCY alone is."""
        parts = [(self.concurrency, len(self.test_endpoints), "CONCURRENCY", "BASE_URL")]
        if not self.grader_shares_endpoints:
            parts.append(
                (self.effective_grader_concurrency, len(self.grader_endpoints), "GRADER_CONCURRENCY", "GRADER_BASE_URL")
            )
        total = sum(limit * count for limit, count, _, _ in parts)
        if total > MAX_IN_FLIGHT:
            terms = " + ".join(f"{key} {limit:,} x {count} endpoints of {urls}" for limit, count, key, urls in parts)
            raise SettingsError(
                f"{terms} = {total:,} calls in flight, more than {MAX_IN_FLIGHT:,}: lower CONCURRENCY"
                " (the calls in flight are the sum over every endpoint)"
            )

    def endpoint_rate_limits(self) -> dict[bool, list[tuple[float | None, float | None]]]:
        """(RPM, TPM) of each endpoint, for the model under test (False) and the grader (True),
        in their endpoints' order; SettingsError when a list fits neither one nor each endpoint."""
        out: dict[bool, list[tuple[float | None, float | None]]] = {}
        for grader in (False, True):
            count = len(self.grader_endpoints if grader else self.test_endpoints)
            url_key = "GRADER_BASE_URL" if grader and not self.grader_shares_endpoints else "BASE_URL"
            rpm, tpm = self.rate_limits(grader)
            rpm_key = "GRADER_RPM" if grader and self.grader_rpm else "RPM"
            tpm_key = "GRADER_TPM" if grader and self.grader_tpm else "TPM"
            out[grader] = list(
                zip(per_endpoint(rpm, count, rpm_key, url_key), per_endpoint(tpm, count, tpm_key, url_key))
            )
        return out

    @property
    def configured_keys(self) -> tuple[str, ...]:
        """Every key given (the model under test's, the grader's): never data, so taken out of
        replies and grader answers before they are graded or stored (hbtui.core.redact.redact_keys)."""
        keys = (key for setting in SETTINGS if setting.secret for key in getattr(self, setting.attribute) or ())
        return tuple(dict.fromkeys(key for key in keys if key))

    def public_dict(self) -> dict[str, Any]:
        """Settings as stored with a run and shown on screen: keys reduced to a mask."""
        out: dict[str, Any] = {}
        for setting in SETTINGS:
            value = getattr(self, setting.attribute)
            if setting.secret:
                value = ",".join(mask_secret(key) or "" for key in value) if isinstance(value, tuple) else None
            elif isinstance(value, tuple):
                value = setting.kind.text(value)  # stored as typed: a run made before lists reads the same
            out[setting.attribute] = value
        return out


def pair_endpoints(
    urls: tuple[str, ...] | None, keys: tuple[str, ...] | None, url_key: str, key_key: str
) -> list[tuple[str, str | None]]:
    """Each URL with its key: none, one key for every URL, or one key per URL in the same order.

    The message names counts and keys, never a key itself."""
    urls, keys = urls or (), keys or ()
    if urls and len(keys) > 1 and len(keys) != len(urls):
        plural = "s" if len(urls) != 1 else ""
        problem = "more keys than endpoints" if len(keys) > len(urls) else "neither one key nor one per endpoint"
        raise SettingsError(
            f"{key_key} lists {len(keys)} keys for {len(urls)} endpoint{plural} in {url_key} ({problem}):"
            f" give one key for every endpoint, or one per endpoint in the same order"
        )
    if urls and len(keys) == len(urls):
        return list(zip(urls, keys, strict=True))
    return [(url, keys[0] if keys else None) for url in urls]


def per_endpoint(values: tuple[float, ...] | None, count: int, key: str, url_key: str) -> list[float | None]:
    """A per-endpoint setting (RPM, TPM...) for ``count`` endpoints: none, one for all, or one
    each in the endpoints' order."""
    if not values:
        return [None] * count
    if len(values) == 1:
        return [values[0]] * count
    if len(values) != count:
        raise SettingsError(
            f"{key} lists {len(values)} limits for {count} endpoint{'s' if count != 1 else ''} in {url_key}:"
            " give one for every endpoint, or one per endpoint in the same order"
        )
    return list(values)


def _flag(attribute: str, described: Setting) -> str | None:
    if described.flag == FLAG_FROM_NAME:
        return "--" + attribute.replace("_", "-")
    return described.flag


SETTINGS: tuple[Setting, ...] = tuple(
    replace(f.metadata["setting"], attribute=f.name, flag=_flag(f.name, f.metadata["setting"]))
    for f in fields(Settings)
)
BY_KEY = {setting.key: setting for setting in SETTINGS}
LIST_SETTINGS = tuple(setting for setting in SETTINGS if isinstance(setting.kind, ListOf))
BY_ATTRIBUTE = {setting.attribute: setting for setting in SETTINGS}
# Older .env files of the single-script harness spell some keys otherwise.
ALIASES = {alias: setting.key for setting in SETTINGS for alias in setting.aliases}


def setting_for(attribute: str) -> Setting:
    return BY_ATTRIBUTE[attribute]


def attribute_key(attribute: str) -> str:
    return BY_ATTRIBUTE[attribute].key


def mask_secret(secret: str | None) -> str | None:
    """``sk-…a1b2``: enough to tell two long keys apart, never enough to use one.

    A short key (a local server's ``--api-key token1234``) shows nothing: four characters of
    ten would give most of it away.
    """
    if not secret:
        return None
    if len(secret) < 20:
        return "…"
    return f"{secret[:3]}…{secret[-4:]}"


# Settings that may differ on a resume without changing what the run is: where its database
# and cache are found, and the keys (stored masked; a new session brings them again).
# The reviewer is who reads the run, not how it was made: a run's settings never name them; nor
# does how many browser tabs `hbtui serve` runs.
UNRECORDED_SETTINGS = {"db_path", "cache_dir", "api_key", "grader_api_key", "reviewer", "serve_max_tabs"}
