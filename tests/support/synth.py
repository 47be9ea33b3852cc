"""Synthetic finished runs written straight through the store API, for browser tests and benches.

A real engine run of thousands of conversations needs a server and minutes; the browser only
needs what the engine leaves in SQLite. This writes the same rows the engine would (replies,
verdicts, summaries, report), with HealthBench-like tags, a few grader errors, failed replies,
truncated replies and penalties, deterministically from ``seed``.
"""

from __future__ import annotations

import hashlib
import json
import random

from hbtui.services import compute_report
from hbtui.store import ERROR, MET, NOT_MET, PlannedConversation, ReplyResult, ResultBatch, Store, VerdictResult

THEMES = (
    "emergency_referrals",
    "context_seeking",
    "global_health",
    "health_data_tasks",
    "communication",
    "hedging",
    "complex_responses",
)
AXES = ("accuracy", "completeness", "communication_quality", "context_awareness", "instruction_following")
SUBJECTS = (
    "a persistent headache",
    "chest pain after exercise",
    "a child's fever of 39.5 C",
    "an HbA1c of 7.1",
    "missed birth control pills",
    "a swollen ankle",
    "dizziness when standing",
    "a rash after antibiotics",
    "trouble sleeping",
    "blood in the urine",
    "a tick bite",
    "high blood pressure readings",
)
POSITIVE = (
    "Advises seeking emergency care if {s} comes with shortness of breath",
    "Asks how long {s} has lasted before giving advice",
    "Explains the most likely causes of {s} in plain language",
    "Recommends seeing a doctor within a few days for {s}",
    "Mentions red-flag symptoms that would make {s} urgent",
    "States that dosing depends on weight and age",
    "Gives a clear, structured answer without jargon",
    "Acknowledges uncertainty where the information about {s} is incomplete",
)
NEGATIVE = (
    "Recommends a prescription drug dose for {s} without context",
    "Claims a definitive diagnosis of {s} from the description alone",
    "Tells the user that {s} is nothing to worry about",
    "Includes fabricated statistics about {s}",
)

FIXED_TIME = 1_735_689_600.0  # 2025-01-01 00:00 UTC: snapshots show no wall-clock time

HOSTILE_TEXT = "[bold]x[/bold] [link=http://e.com]y[/link] \x1b[31mred\x1b[0m \x1b]52;c;aGVsbG8=\x07 done"


VOCABULARY = (
    "the symptoms usually improve with rest and fluids but if they persist or worsen you should see a"
    " clinician who can examine you order tests and rule out serious causes such as infection or injury"
).split()


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(VOCABULARY, k=words)).capitalize() + "."


def _record(rng: random.Random, position: int, criteria_per: int, hostile: bool):
    subject = rng.choice(SUBJECTS)
    theme = rng.choice(THEMES)
    prompt_id = hashlib.sha256(f"{rng.random()}-{position}".encode()).hexdigest()[:8] + "-synth"
    prompt = []
    for turn in range(rng.choice((1, 1, 1, 3))):
        if turn:
            prompt.append({"role": "assistant", "content": _sentence(rng, rng.randint(8, 30))})
        prompt.append({"role": "user", "content": f"I have {subject}. " + _sentence(rng, rng.randint(5, 40))})
    if hostile:
        prompt[-1]["content"] = "User text " + HOSTILE_TEXT
    criteria = []
    for i in range(criteria_per):
        negative = rng.random() < 0.25
        template = rng.choice(NEGATIVE if negative else POSITIVE)
        points = -rng.randint(1, 9) if negative else rng.randint(1, 10)
        tags = [f"axis:{rng.choice(AXES)}", "level:example" if rng.random() < 0.7 else "level:cluster"]
        text = template.format(s=subject)
        if hostile and i == 0:
            text = "Criterion " + HOSTILE_TEXT
        criteria.append((text, float(points), tags))
    body = {
        "prompt": prompt,
        "prompt_id": prompt_id,
        "rubrics": [{"criterion": c, "points": p, "tags": t} for c, p, t in criteria],
        "example_tags": [f"theme:{theme}", f"physician_agreed_category:{theme}-synthetic"],
        "ideal_completions_data": None,
        "canary": "synthetic-run-for-the-browser-tests",
    }
    raw = json.dumps(body)
    preview = " ".join(prompt[-1]["content"].split())[:200]
    return PlannedConversation(
        position=position,
        repeat=0,
        prompt_id=prompt_id,
        record_body=raw,
        record_sha256=hashlib.sha256(raw.encode()).hexdigest(),
        theme=theme,
        example_tags=body["example_tags"],
        preview=preview,
        criteria=criteria,
    )


async def synthesize_run(
    store: Store,
    *,
    conversations: int = 5000,
    criteria_per: int = 12,
    seed: int = 0,
    name: str = "synthetic",
    hostile: bool = False,
    fixed_time: bool = True,
    answers_seed: int | None = None,
) -> int:
    """A finished run with realistic rows; returns its id.

    ``hostile`` puts Rich markup and ANSI/OSC escapes into the first conversation's prompt,
    reply, reasoning, first criterion and its explanation. ``fixed_time`` pins every timestamp
    so that screenshots do not change from one day to the next. ``answers_seed``, when given,
    draws the replies and verdicts from it: runs of one ``seed`` then share their records (they
    pair in a comparison) and differ in their answers.
    """
    rng = random.Random(seed)
    planned = [_record(rng, position, criteria_per, hostile and position == 0) for position in range(conversations)]
    run_id = await store.create_run(
        name=name,
        dataset_name="synthetic.jsonl",
        dataset_path=None,
        dataset_sha256="0" * 64,
        model_test="synth-test-model",
        model_grader="synth-grader-model",
        settings={"model_test": "synth-test-model", "model_grader": "synth-grader-model", "concurrency": 8},
        plan={"limit": conversations, "seed": seed, "repeats": 1, "records": conversations},
        conversations=planned,
    )
    ids = await store.conversation_ids(run_id)
    if answers_seed is not None:
        rng = random.Random(answers_seed)
    now = FIXED_TIME if fixed_time else None
    replies, verdicts = [], []
    for conv_id, conv in zip(ids, planned):
        at = (now or 0.0) + conv.position
        if rng.random() < 0.002 and not (hostile and conv.position == 0):
            replies.append(
                ReplyResult(
                    conv_id,
                    "failed",
                    at,
                    error="HTTP 400: the prompt was refused by the provider",
                    error_kind="refused",
                    attempts=1,
                    latency_ms=120.0,
                )
            )
            continue
        quality = rng.betavariate(4, 3)
        reply = "\n\n".join(_sentence(rng, rng.randint(10, 45)) for _ in range(rng.randint(1, 4)))
        reasoning = _sentence(rng, 25) if rng.random() < 0.3 else None
        finish = "length" if rng.random() < 0.03 else "stop"
        if hostile and conv.position == 0:
            reply = "Reply " + HOSTILE_TEXT + "\nSecond line [red]not red[/red]"
            reasoning = "Reasoning " + HOSTILE_TEXT
        replies.append(
            ReplyResult(
                conv_id,
                "generated",
                at,
                reply=reply,
                reasoning=reasoning,
                finish_reason=finish,
                attempts=1,
                latency_ms=800.0 + rng.random() * 400,
                prompt_tokens=120,
                completion_tokens=240,
            )
        )
        for idx, (_text, points, _tags) in enumerate(conv.criteria):
            if rng.random() < 0.004:
                verdicts.append(
                    VerdictResult(
                        ERROR,
                        conv_id,
                        idx,
                        raw_output='{"explanation": "The response',
                        error="grader reply is not valid JSON after 3 attempts",
                        error_kind="unparseable",
                        attempts=3,
                        latency_ms=2000.0,
                        prompt_tokens=300,
                        completion_tokens=40,
                        graded_at=at,
                    )
                )
                continue
            met = rng.random() < (quality if points > 0 else (1 - quality) * 0.25)
            word = "met" if met else "not met"
            explanation = (
                f"The response {'does' if met else 'does not'} satisfy this: {_sentence(rng, rng.randint(6, 24))}"
            )
            if hostile and conv.position == 0 and idx == 0:
                explanation = "Explanation " + HOSTILE_TEXT
            raw = json.dumps({"explanation": explanation, "criteria_met": met})
            verdicts.append(
                VerdictResult(
                    MET if met else NOT_MET,
                    conv_id,
                    idx,
                    explanation=explanation,
                    raw_output=raw,
                    attempts=1,
                    latency_ms=300.0 + rng.random() * 200,
                    prompt_tokens=300,
                    completion_tokens=40 if word else 0,
                    graded_at=at,
                )
            )
    await store.write_batch(ResultBatch(replies=replies, verdicts=verdicts))
    await store.refresh_summaries(run_id)
    report = await compute_report(store, run_id)
    await store.finish_run(run_id, "finished", report=report)
    if fixed_time:
        # The store stamps creation and finish with the wall clock; pin them for screenshots.
        await store.db.execute(
            "UPDATE runs SET created_at = ?, finished_at = ? WHERE id = ?",
            (FIXED_TIME, FIXED_TIME + conversations, run_id),
        )
        await store.db.commit()
    return run_id
