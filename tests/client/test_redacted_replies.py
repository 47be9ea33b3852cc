"""A key configured for the run that a provider puts into a reply or a grader's explanation
(``Your key is Bearer sk-…``), whole, masked or in base64, is taken out before the reply is
graded or anything is stored: the grader never sees it, no file holds it, and the run's
deviations say that replies were changed so."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import time

import pytest

from hbtui import cli
from hbtui.core.redact import REDACTED, redact, redact_keys
from hbtui.core.settings.config import mask_secret
from hbtui.store import Store

KEY = "sk-proj-REPLYLEAK7c2e1b5d8046Q7vXw9"  # the model under test's
GRADER_KEY = "sk-wrong"  # the grader's: short, as a local server's may be


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def urlsafe(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


# ---- the helper: each form of a key ------------------------------------------------------


@pytest.mark.parametrize("key", [KEY, GRADER_KEY])
def test_the_key_itself_and_after_bearer_is_taken_out_of_a_reply(key):
    reply = f"Your key is Bearer {key}. Again: '{key}', then ({key})."
    assert redact_keys(reply, [key]) == f"Your key is Bearer {REDACTED}. Again: '{REDACTED}', then ({REDACTED})."


@pytest.mark.parametrize("key", [KEY, GRADER_KEY])
@pytest.mark.parametrize("encode", [b64, urlsafe], ids=["standard", "urlsafe"])
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("wrapped", ["{}", "Bearer {}", "user:{}", "ab{}", "abc{}def", "a{}-tail"])
def test_base64_of_the_key_at_any_alignment_is_taken_out_whole(key, encode, padded, wrapped):
    encoded = encode(wrapped.format(key))
    encoded = encoded if padded else encoded.rstrip("=")
    reply = f"Authorization: Basic {encoded}\nthe header, encoded ({encoded})."
    assert redact_keys(reply, [key]) == f"Authorization: Basic {REDACTED}\nthe header, encoded ({REDACTED})."


def test_base64_of_other_text_and_of_a_short_placeholder_key_is_left():
    reply = f"An image: data:image/png;base64,{b64('not the key at all')} and {b64('EMPTY')}"
    assert redact_keys(reply, [KEY, GRADER_KEY, "EMPTY"]) == reply


@pytest.mark.parametrize(
    "masked",
    [
        "sk-wr****ong",
        "sk-w…ng",
        "sk-wr...ong",
        "sk-•••••ong",
        "sk*****g",
    ],
)
def test_a_masked_echo_of_a_short_key_is_taken_out_when_its_head_and_tail_are_the_keys(masked):
    reply = f"Incorrect API key provided: {masked}. As bold: **{masked}**, in code `{masked}`"
    expected = f"Incorrect API key provided: {REDACTED}. As bold: **{REDACTED}**, in code `{REDACTED}`"
    assert redact_keys(reply, [GRADER_KEY]) == expected
    assert redact(reply, [GRADER_KEY]) == expected  # and in a provider's error


def test_a_masked_echo_of_a_long_key_is_taken_out_by_its_head_and_tail_or_its_last_four():
    reply = f"{KEY[:10]}****{KEY[-2:]}, {KEY[:3]}…{KEY[-6:]}, sk-****{KEY[-4:]}"
    assert redact_keys(reply, [KEY]) == f"{REDACTED}, {REDACTED}, {REDACTED}"


def test_ordinary_text_is_left_whatever_the_key():
    reply = (
        "**Take** 2 x 500 mg, *twice* a day (a*b, x*y, E**Y, s*g). An x-ray... then rest.\n"
        "The bottle is EMPTY: EMPTYING it, **EMPTY** or empty. sk-ab****ong is no key of ours;\n"
        "sk-wrongly or sk-wr; the bearer of bad news; Bearer other-token-123."
    )
    assert redact_keys(reply, [GRADER_KEY, "EMPTY", "x", "ab"]) == reply


def test_a_placeholder_key_is_left_as_a_word_in_a_reply_but_not_in_a_providers_error():
    assert redact_keys("key EMPTY, or EM***Y, 2 x 3", ["EMPTY", "x"]) == f"key EMPTY, or {REDACTED}, 2 x 3"
    assert redact("key EMPTY rejected", ["EMPTY"]) == f"key {REDACTED} rejected"


def test_a_hostile_reply_of_one_long_token_is_read_once():
    token = "sk.." * 250_000 + "*x"  # every ".." may start a mask: no pattern may walk back over it
    blob = b64(("x" + KEY) * 20_000)  # the key at every alignment, 20,000 times
    started = time.monotonic()
    assert redact_keys(token, [GRADER_KEY]) == token
    assert redact_keys(f"a {blob} b", [KEY]) == f"a {REDACTED} b"
    # Linear, a fraction of a second; walked back over at each mask, it would take hours.
    assert time.monotonic() - started < 10


# ---- a run --------------------------------------------------------------------------------

REPLY = (
    f"Your key is Bearer {KEY}. In base64 {b64(KEY)}, as basic auth {b64('user:' + KEY)},"
    f" urlsafe {urlsafe('Bearer ' + KEY).rstrip('=')}. Masked: {KEY[:8]}****{KEY[-4:]} and sk-wr****ong."
    " **Take** 2 x 500 mg."
)
EXPLANATION = f"The reply quoted {GRADER_KEY} and sk-wr****ong."
# What must be nowhere: the keys, their forms in the reply, a middle piece, the long key's tail.
LEAKS = (
    KEY,
    GRADER_KEY,
    "REPLYLEAK",
    KEY[-4:],
    "sk-wr****ong",
    b64(KEY).rstrip("="),
    b64("user:" + KEY).rstrip("="),
    urlsafe("Bearer " + KEY).rstrip("="),
)


def leaks(data: str | bytes) -> list[str]:
    """The pieces of the keys in ``data``; the run's recorded settings hold our own mask of the
    long key (``sk-…Qw9``) on purpose, to tell keys apart."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    for mask in (mask_secret(KEY) or "", json.dumps(mask_secret(KEY))[1:-1]):
        text = text.replace(mask, "")
    return [piece for piece in LEAKS if piece in text]


@pytest.fixture
def project(tmp_path, server, monkeypatch):
    """A working folder whose .env holds both keys, as a user's would."""
    for name in ("BASE_URL", "API_KEY", "GRADER_API_KEY", "MODEL_TEST", "MODEL_GRADER", "HBTUI_DB"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text(
        f"BASE_URL={server.base_url}\nAPI_KEY={KEY}\nGRADER_API_KEY={GRADER_KEY}\n"
        "MODEL_TEST=test-model\nMODEL_GRADER=grader-model\nCONCURRENCY=4\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def hbtui_in_process(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


async def create_database(path) -> None:
    async with await Store.open(path):
        pass


def test_a_key_in_replies_and_explanations_reaches_no_file_no_output_and_not_the_grader(
    project, small_dataset, server, capsys
):
    server.control(reply_text=REPLY, explanation_text=EXPLANATION, capture_requests=True)
    db_path = project / "runs" / "hbtui.sqlite"
    asyncio.run(create_database(db_path))
    # Held open, this connection keeps the WAL file from being folded in and removed at the end.
    holder = sqlite3.connect(db_path)
    try:
        holder.execute("SELECT count(*) FROM runs").fetchall()
        outputs = [hbtui_in_process(capsys, "run", "--data", str(small_dataset), "--name", "keys")]
        bodies = server.captured_bodies()
        outputs += [
            hbtui_in_process(capsys, "show", "latest"),
            hbtui_in_process(capsys, "show", "latest", "--json"),
            hbtui_in_process(capsys, "export", "latest", "--out", "out.jsonl"),
        ]
        files = {
            str(path.relative_to(project)): path.read_bytes()
            for path in project.rglob("*")
            if path.is_file() and path.name != ".env"
        }
    finally:
        holder.close()
    assert [code for code, _ in outputs] == [0] * 4, outputs
    printed = "\n".join(text for _, text in outputs)
    assert not leaks(printed), printed
    assert {"runs/hbtui.sqlite", "runs/hbtui.sqlite-wal", "out.jsonl"} <= set(files)
    assert any(name.endswith("results.jsonl") for name in files)
    assert {name: leaks(data) for name, data in files.items() if leaks(data)} == {}

    # The grader was sent the redacted reply, with what else the reply said.
    graded = [body for body in bodies if "criteria_met" in body]
    assert graded and not [leaks(body) for body in graded if leaks(body)]
    assert all("Your key is Bearer <redacted>" in body and "**Take** 2 x 500 mg" in body for body in graded)

    with sqlite3.connect(db_path) as db:
        replies = [row[0] for row in db.execute("SELECT reply FROM conversations")]
        explanations = [row[0] for row in db.execute("SELECT explanation FROM verdicts")]
    assert replies and all(reply == redact_keys(REPLY, [KEY, GRADER_KEY]) for reply in replies), replies
    assert explanations and all(
        text.startswith(f"The reply quoted {REDACTED} and {REDACTED}.") for text in explanations
    )

    # The run says its replies were changed, how many, and what the grader saw.
    deviation = f"{len(replies)} replies had a configured key redacted before grading: the grader saw the redacted text"
    shown = json.loads(outputs[2][1])
    assert deviation in shown["requests"]["deviations"]
    assert not shown["requests"]["reference_identical"]
    assert deviation in outputs[1][1]
    descriptions = [data.decode() for name, data in files.items() if name.endswith("description.md")]
    assert descriptions and deviation in descriptions[0]


def test_a_resume_adds_its_redacted_replies_to_the_count_of_the_runs_first_process(
    project, small_dataset, server, capsys
):
    # The first call answers 500 with no retry left: its conversation is asked again by the resume.
    server.control(reply_text=REPLY, script=["server_error"])
    first = hbtui_in_process(capsys, "run", "--data", str(small_dataset), "--max-attempts", "1")
    _, shown = hbtui_in_process(capsys, "show", "latest", "--json")
    assert json.loads(shown)["requests"]["deviations"] == [
        "2 replies had a configured key redacted before grading: the grader saw the redacted text"
    ], first
    assert hbtui_in_process(capsys, "resume", "latest")[0] == 0
    _, shown = hbtui_in_process(capsys, "show", "latest", "--json")
    assert json.loads(shown)["requests"]["deviations"] == [
        "3 replies had a configured key redacted before grading: the grader saw the redacted text"
    ]


def test_a_key_in_a_meta_eval_graders_answer_is_not_stored(project, server, capsys):
    from tests.support.meta_rows import meta_rows, write_rows

    server.control(explanation_text=EXPLANATION)
    data = write_rows(project / "meta.jsonl", meta_rows(6))
    code, printed = hbtui_in_process(capsys, "meta-eval", "--data", str(data), "--name", "audit")
    assert code == 0, printed
    with sqlite3.connect(project / "runs" / "hbtui.sqlite") as db:
        stored = db.execute("SELECT explanation, raw_output FROM meta_eval_rows").fetchall()
    assert stored and all(REDACTED in explanation for explanation, _ in stored)
    assert not any(leaks(text) for row in stored for text in row if text)
