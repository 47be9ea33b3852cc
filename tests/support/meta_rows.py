"""Meta-eval rows shaped as the official file's, written for the tests and benchmarks (the real
file is not on the build machines)."""

from __future__ import annotations

import json
import random
from pathlib import Path

CATEGORIES = ("cluster_emergency_referrals", "cluster_hedging", "cluster_communication")


def meta_rows(
    count: int,
    seed: int = 0,
    physicians: int = 8,
    labels: tuple[int, int] = (1, 4),
    categories: tuple[str, ...] = CATEGORIES,
) -> list[dict]:
    """Rows shaped as the official file's, written for the tests; a conversation is rated under
    several rubrics, as in the real file."""
    rng = random.Random(seed)
    rows = []
    for number in range(count):
        raters = rng.sample([f"phys-{i}" for i in range(physicians)], rng.randint(*labels))
        rows.append(
            {
                "prompt": [
                    {"role": "user", "content": f"Question {number // 3}: my knee hurts <<rubric_item>>"},
                    {"role": "assistant", "content": "Since when?"},
                    {"role": "user", "content": "Two days."},
                ],
                "completion": f"Completion {number // 3}: rest it; see a doctor if it swells.",
                "rubric": f"Rubric {number}: advises seeing a doctor if it swells",
                "category": rng.choice(categories),
                "binary_labels": [rng.random() < 0.6 for _ in raters],
                "anonymized_physician_ids": raters,
                "prompt_id": f"pid-{number // 3}",
                "completion_id": f"cid-{number // 3}",
            }
        )
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
