"""HealthBench records: official files (downloaded once, sha256-checked), local JSONL, sampling."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson

from hbtui.core.errors import HbtuiError
from hbtui.core.files import read_user_file

OFFICIAL_BASE = "https://openaipublic.blob.core.windows.net/simple-evals/healthbench/"
HF_BASE = "https://huggingface.co"
MAX_MESSAGE_CHARS = 1_000_000  # far above any real record; stops a corrupt file early
# The official records use -10..10. A custom rubric may weigh more, but beyond a million a value
# is a corrupt file: 1e308 overflows the sum to inf and the score silently to 0.0, and even
# below overflow a huge weight drowns every other criterion in float rounding. A million
# criteria of a million points still sum exactly (1e12, far under 2**53).
MAX_POINTS = 1_000_000
# Roles of the chat API: the real subsets use user and assistant; system and developer are the
# instructions a rubric author may put first.
ROLES = ("system", "developer", "user", "assistant")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A lone surrogate can only come from a \uD800-\uDFFF escape: valid UTF-8 cannot encode one.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass(frozen=True)
class OfficialFile:
    filename: str
    sha256: str
    records: int
    # A file of a Hugging Face dataset (its repository and revision) rather than of OpenAI's
    # bucket: fetched from HF_ENDPOINT's mirror (Hugging Face by default) with HF_TOKEN, if set.
    hf_repo: str | None = None
    hf_revision: str | None = None

    def url(self) -> str:
        """Where it is fetched from: HBTUI_DATA_URL's mirror of OpenAI's bucket, or HF_ENDPOINT's
        of Hugging Face (their files' URLs do not fit one base)."""
        if self.hf_repo is not None:
            base = os.environ.get("HF_ENDPOINT", HF_BASE).rstrip("/")
            return f"{base}/datasets/{self.hf_repo}/resolve/{self.hf_revision}/{self.filename}"
        return os.environ.get("HBTUI_DATA_URL", OFFICIAL_BASE).rstrip("/") + "/" + self.filename

    def headers(self) -> dict[str, str]:
        """HF_TOKEN for a gated Hugging Face dataset, sent to its origin only: the download does
        not carry it across a redirect to another origin (Hugging Face's file host)."""
        token = os.environ.get("HF_TOKEN", "").strip()
        return {"Authorization": f"Bearer {token}"} if self.hf_repo is not None and token else {}


SUBSETS: dict[str, OfficialFile] = {
    "main": OfficialFile(
        "2025-05-07-06-14-12_oss_eval.jsonl",
        "e99dd3c6372c10d6fcc5e385c5fae69d0dd40392dae56836ef9493ae324ecd2f",
        5000,
    ),
    "hard": OfficialFile(
        "hard_2025-05-08-21-00-10.jsonl",
        "b0320430e5cd974e746585594c1dd10b5a3fc2aff9c72b26106c2c4a069d74e9",
        1000,
    ),
    "consensus": OfficialFile(
        "consensus_2025-05-09-20-00-46.jsonl",
        "fabe37553327238928b05357d8b309737b5d426d6dee432a3376da618d0969d6",
        3671,
    ),
    # HealthBench Professional (2026), in a record format of its own (read as HealthBench's).
    "professional": OfficialFile(
        "healthbench_professional_eval.jsonl",
        "d44b08e6e952e04c945e2c406f02533d9e7a989a84e35820ee7efdff20c9e4e2",
        525,
        hf_repo="openai/healthbench-professional",
        hf_revision="349962fd46dd02343a0d8a606491baf59154ea1a",
    ),
}


class DatasetError(HbtuiError, ValueError):
    """A dataset that cannot be used; the message names the file, line and field."""


@dataclass(frozen=True)
class Criterion:
    criterion: str
    points: float
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Record:
    prompt_id: str
    prompt: tuple[dict, ...]
    rubrics: tuple[Criterion, ...]
    example_tags: tuple[str, ...]
    line: int
    raw: str  # the line as read, so the store keeps the record exactly (a Professional one: converted)
    source_format: str = "HealthBench"  # or "HealthBench Professional": the format of its file's line

    @property
    def theme(self) -> str | None:
        for tag in self.example_tags:
            if tag.startswith("theme:"):
                return tag[len("theme:") :]
        return None


@dataclass(frozen=True)
class Dataset:
    name: str
    path: Path
    sha256: str
    records: tuple[Record, ...]


def _fail(path: Path, line: int, message: str) -> DatasetError:
    return DatasetError(f"{path}:{line}: {message}")


_JSON_NUMBERS = (int, float)  # the types JSON's numbers are read as (a bool is neither)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text):,} characters)"


def _lone_surrogate_field(obj: Any) -> str | None:
    """The path of the first key or string holding a lone surrogate (walked without recursion:
    json.loads accepts nesting deep enough to exhaust the stack of a recursive walk)."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if LONE_SURROGATE.search(value):
                return where or "the record"
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                child = f"{where}.{key}" if where else key
                stack += [(child, item), (child, key)]  # the key itself is checked first
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def _read_fast(text: str) -> Any:
    """The line's JSON by orjson (half json.loads' time: the main subset loads in 57 ms, not 70),
    or None where it may differ from what json.loads reads. It refuses what json.loads takes or
    words otherwise (NaN, 1e400, a lone surrogate, deep nesting, a bad line): json.loads reads
    those, or says why not, as before. The one value it reads otherwise, silently, is an integer
    beyond 64 bits, which it makes a float; of a record's numbers only the points are read from
    the parse (the rest of the line is kept as it was read), and such a float is beyond MAX_POINTS."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    rubrics = obj.get("rubrics") if isinstance(obj, dict) else None
    if isinstance(rubrics, list):
        for item in rubrics:
            points = item.get("points") if isinstance(item, dict) else None
            if isinstance(points, float) and not abs(points) <= MAX_POINTS:
                return None  # json.loads reads it, for the error to show the number as written
    return obj


# HealthBench Professional (2026) publishes its records in a format of its own; each is read as
# one would write it in HealthBench's: id -> prompt_id, conversation.messages -> prompt,
# rubric_items (criterion_text, points) -> rubrics, and its four categories -> example tags.
PROFESSIONAL = "HealthBench Professional"
HEALTHBENCH = "HealthBench"
PROFESSIONAL_CATEGORIES = ("use_case", "type", "difficulty", "specialty")
# A field named in an error about a converted record, as Professional's file names it.
_PROFESSIONAL_FIELDS = (
    (re.compile(r"'prompt_id'"), "'id'"),
    (re.compile(r"'prompt(?=[\[' ])"), "'conversation.messages"),
    (re.compile(r"'rubrics(?=[\[' ])"), "'rubric_items"),
    (re.compile(r"(?<=\])\.criterion'"), ".criterion_text'"),
)


def record_format(obj: dict) -> str:
    """Which format a record is in: Professional's has ``rubric_items`` or ``conversation`` and
    none of HealthBench's ``prompt`` and ``rubrics``."""
    if ("rubric_items" in obj or "conversation" in obj) and "prompt" not in obj and "rubrics" not in obj:
        return PROFESSIONAL
    return HEALTHBENCH


def _from_professional(path: Path, line_number: int, obj: dict) -> dict:
    """A Professional record as HealthBench's format writes it (checked field by field in
    Professional's names where the shapes differ; the rest is checked as any record is)."""
    record_id = obj.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise _fail(path, line_number, "field 'id': missing or not a string")
    where = f"record {record_id}"
    conversation = obj.get("conversation")
    if not isinstance(conversation, dict) or not isinstance(conversation.get("messages"), list):
        raise _fail(path, line_number, f"{where}: field 'conversation.messages': missing or not a list")
    items = obj.get("rubric_items")
    if not isinstance(items, list) or not items:
        raise _fail(path, line_number, f"{where}: field 'rubric_items': missing or empty")
    rubrics = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _fail(path, line_number, f"{where}: field 'rubric_items[{i}]': not an object")
        converted: dict[str, Any] = {"criterion": item.get("criterion_text"), "tags": []}
        if "points" in item:
            converted["points"] = item["points"]
        rubrics.append(converted)
    tags = []
    for category in PROFESSIONAL_CATEGORIES:
        value = obj.get(category)
        if not isinstance(value, str) or not value.strip():
            raise _fail(path, line_number, f"{where}: field '{category}': missing or not a string")
        tags.append(f"{category}:{value}")
    physician = obj.get("physician_response")
    if physician is not None and not isinstance(physician, str):
        raise _fail(path, line_number, f"{where}: field 'physician_response': not a string")
    return {
        "prompt_id": record_id,
        "prompt": conversation["messages"],
        "rubrics": rubrics,
        "example_tags": tags,
        **({"physician_response": physician} if physician is not None else {}),
    }


def parse_record(path: Path, line_number: int, text: str, expected_format: str | None = None) -> Record:
    """One line's record. ``expected_format``: the format of the file's first record; a line in
    the other one is refused (a file holds one format)."""
    try:
        obj = _read_fast(text)
        # orjson refuses a lone surrogate, so only a line json.loads reads can hold one.
        surrogates_possible = obj is None
        if obj is None:
            obj = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (truncated line?)" if "Unterminated" in exc.msg or "Expecting" in exc.msg else ""
        raise _fail(path, line_number, f"invalid JSON at column {exc.colno}: {exc.msg}{hint}") from None
    except RecursionError:
        raise _fail(path, line_number, "invalid JSON: nested too deeply") from None
    if not isinstance(obj, dict):
        raise _fail(path, line_number, "a record must be a JSON object")
    if surrogates_possible and SURROGATE_ESCAPE.search(text):
        # The line itself is kept as the record's body (its sha256 is the official line's), so
        # such text cannot be replaced: it would no longer be the line that was read.
        where = _lone_surrogate_field(obj)
        if where is not None:
            where = where.encode("utf-8", "backslashreplace").decode("utf-8")  # a key may hold it too
            raise _fail(
                path, line_number, f"field {where!r}: holds a lone surrogate (an invalid \\uD800-\\uDFFF escape)"
            )
    found = record_format(obj)
    if expected_format is not None and found != expected_format:
        raise _fail(
            path,
            line_number,
            f"a record in {found}'s format in a file of {expected_format}'s (its first record): one format a file",
        )
    if found == PROFESSIONAL:
        converted = _from_professional(path, line_number, obj)
        # Stored as converted (every later reader of a record reads HealthBench's format); the
        # dataset's sha256 stays the file's.
        text = json.dumps(converted, ensure_ascii=False)
        try:
            return replace(_validated(path, line_number, converted, text), source_format=PROFESSIONAL)
        except DatasetError as exc:
            message = str(exc)
            for pattern, name in _PROFESSIONAL_FIELDS:
                message = pattern.sub(name, message)
            raise DatasetError(message) from None
    return _validated(path, line_number, obj, text)


def _validated(path: Path, line_number: int, obj: dict, text: str) -> Record:
    """``obj``, a record in HealthBench's format read from ``text``, checked field by field."""
    prompt_id = obj.get("prompt_id")
    if not isinstance(prompt_id, str) or not prompt_id:
        raise _fail(path, line_number, "field 'prompt_id': missing or not a string")
    where = f"record {prompt_id}"
    prompt = obj.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise _fail(path, line_number, f"{where}: field 'prompt': must be a non-empty list of messages")
    for i, message in enumerate(prompt):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _fail(path, line_number, f"{where}: field 'prompt[{i}].role': missing or not a string")
        if message["role"] not in ROLES:
            raise _fail(
                path,
                line_number,
                f"{where}: field 'prompt[{i}].role': {message['role']!r} is not one of {', '.join(ROLES)}",
            )
        content = message.get("content")
        if not isinstance(content, str):
            raise _fail(path, line_number, f"{where}: field 'prompt[{i}].content': missing or not a string")
        if not content.strip():
            # The model would be asked nothing, and its answer to nothing graded as if it were an answer.
            raise _fail(path, line_number, f"{where}: field 'prompt[{i}].content': is empty")
        if len(content) > MAX_MESSAGE_CHARS:
            raise _fail(
                path,
                line_number,
                f"{where}: field 'prompt[{i}].content': {len(content):,} characters, over the {MAX_MESSAGE_CHARS:,} limit",
            )
    if prompt[-1]["role"] != "user":
        raise _fail(
            path, line_number, f"{where}: field 'prompt': the last message is from {prompt[-1]['role']!r}, not 'user'"
        )
    rubrics = obj.get("rubrics")
    if not isinstance(rubrics, list) or not rubrics:
        raise _fail(path, line_number, f"{where}: field 'rubrics': missing or empty")
    criteria = []
    # The loop that reads 9,545 criteria in the main subset: a criterion's usual case is checked
    # first, in as few steps as it takes, and each problem is then named in the order of the fields.
    for i, item in enumerate(rubrics):
        if not isinstance(item, dict):
            raise _fail(path, line_number, f"{where}: field 'rubrics[{i}]': not an object")
        criterion = item.get("criterion")
        if not isinstance(criterion, str) or not criterion.strip():
            raise _fail(path, line_number, f"{where}: field 'rubrics[{i}].criterion': missing or not a string")
        points: Any = item.get("points")
        # An int or a float (not a bool) within the bounds, which NaN and the infinities are not.
        if type(points) not in _JSON_NUMBERS or not abs(points) <= MAX_POINTS:
            if "points" not in item:
                raise _fail(path, line_number, f"{where}: field 'rubrics[{i}].points': missing")
            if not _is_number(points):
                raise _fail(
                    path, line_number, f"{where}: field 'rubrics[{i}].points': {_shown(points)} is not a number"
                )
            raise _fail(
                path, line_number, f"{where}: field 'rubrics[{i}].points': {points!r} is beyond ±{MAX_POINTS:,}"
            )
        tags = item.get("tags", [])
        if not isinstance(tags, list) or not all(map(isinstance, tags, repeat(str))):
            raise _fail(path, line_number, f"{where}: field 'rubrics[{i}].tags': must be a list of strings")
        criteria.append(Criterion(criterion, points, tuple(tags)))
    if not any(c.points > 0 for c in criteria):
        raise _fail(
            path, line_number, f"{where}: field 'rubrics': no criterion has positive points, so no score exists"
        )
    example_tags = obj.get("example_tags", [])
    if not isinstance(example_tags, list) or not all(isinstance(t, str) for t in example_tags):
        raise _fail(path, line_number, f"{where}: field 'example_tags': must be a list of strings")
    return Record(
        prompt_id=prompt_id,
        prompt=tuple({"role": m["role"], "content": m["content"]} for m in prompt),
        rubrics=tuple(criteria),
        example_tags=tuple(example_tags),
        line=line_number,
        raw=text,
    )


def load_jsonl(path: str | Path, name: str | None = None) -> Dataset:
    """Read and validate every line; the first bad one stops the load with file:line: field."""
    path = Path(path)
    data = read_user_file(path, DatasetError, kind="JSONL file")
    # hashlib lets go of the GIL while it hashes, so the file's digest is made beside its parse
    # (5 ms of the main subset's load, otherwise after it).
    digest = hashlib.sha256()
    hashing = threading.Thread(target=digest.update, args=(data,), name="hbtui-dataset-sha256")
    hashing.start()
    records: list[Record] = []
    seen: dict[str, int] = {}
    first_format: str | None = None
    for number, raw_line in enumerate(data.split(b"\n"), start=1):
        if not raw_line.strip():
            continue
        try:
            text = raw_line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(
                path, number, f"not UTF-8 (byte 0x{raw_line[exc.start]:02x} at column {exc.start + 1})"
            ) from None
        record = parse_record(path, number, text.rstrip("\r"), first_format)
        first_format = first_format or record.source_format
        if record.prompt_id in seen:
            raise _fail(path, number, f"prompt_id {record.prompt_id} repeats line {seen[record.prompt_id]}")
        seen[record.prompt_id] = number
        records.append(record)
    if not records:
        raise DatasetError(f"{path}: no records (the file is empty)")
    hashing.join()
    return Dataset(
        name=name or path.name,
        path=path,
        sha256=digest.hexdigest(),
        records=tuple(records),
    )


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


ProgressCallback = Callable[[int, int | None], None]


class DownloadFailed(DatasetError):
    """The official file could not be fetched; ``cause`` says why, the message what to do instead."""

    def __init__(self, cause: str) -> None:
        self.cause = cause
        super().__init__(f"{cause}; use a local copy: --data PATH, or the local file on the configuration screen")


def download_official(subset: str, cache_dir: str | Path, progress: ProgressCallback | None = None) -> Path:
    """The official file for ``subset``, downloaded once into ``cache_dir`` and sha256-checked."""
    if subset not in SUBSETS:
        raise DatasetError(f"unknown subset {subset!r} ({', '.join(SUBSETS)})")
    return download_file(SUBSETS[subset], cache_dir, progress)


def download_file(official: OfficialFile, cache_dir: str | Path, progress: ProgressCallback | None = None) -> Path:
    """An official file (a subset, the meta-eval's), downloaded once into ``cache_dir`` and
    sha256-checked.

    The download goes to a temporary name and is renamed only once verified, so an interrupted
    or corrupted download is never mistaken for the real file.
    """
    cache = Path(cache_dir)
    target = cache / official.filename
    if target.exists():
        if sha256_file(target) == official.sha256:
            return target
        target.unlink()  # a corrupted cache entry: fetch it again
    cache.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    # A mirror (or a proxy cache on an air-gapped box) can stand in for OpenAI's bucket or
    # Hugging Face (HBTUI_DATA_URL, HF_ENDPOINT).
    url = official.url()
    digest = hashlib.sha256()
    from hbtui.core.downloads import DownloadError, download_to  # only a download needs httpx

    try:
        download_to(url, partial, on_chunk=digest.update, progress=progress, headers=official.headers())
    except (DownloadError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise DownloadFailed(f"{url}: {exc}") from None
    if digest.hexdigest() != official.sha256:
        partial.unlink(missing_ok=True)
        raise DatasetError(f"{url}: sha256 {digest.hexdigest()} differs from the published {official.sha256}")
    os.replace(partial, target)
    return target


def load_subset(subset: str, cache_dir: str | Path, progress: ProgressCallback | None = None) -> Dataset:
    return load_jsonl(download_official(subset, cache_dir, progress), name=subset)


def sample(records: Sequence[Record], limit: int | None, seed: int = 0) -> list[Record]:
    """Exactly the reference harness's choice: ``random.Random(seed).sample(records, limit)``."""
    if limit is None:
        return list(records)
    if limit < 1:
        raise DatasetError(f"--limit {limit}: must be at least 1")
    if limit > len(records):
        raise DatasetError(f"--limit {limit}: the dataset has only {len(records)} records")
    return random.Random(seed).sample(list(records), limit)
