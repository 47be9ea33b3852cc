"""`hbtui export RUN --format reference`: the run as simple-evals' ``*_allresults.json`` holds
an evaluation (``score``, ``metrics``, ``convos``, ``metadata.example_level_metadata``), without
its ``htmls``, which the reference renders from templates of its own.

Metrics are the reference's names: ``overall_score``, each tag, and ``NAME:n_samples`` and
``NAME:bootstrap_std`` beside each, from hbtui's scoring (which equals the reference's). A
conversation's ``prompt`` is what the model under test was sent, the run's system message first
when it had one, as the reference's sampler records it. Conversations that are not scored (no
reply, or a verdict missing) have no place in the reference's shape and are left out.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hbtui.core.files import private_file
from hbtui.render.export import rubric_item
from hbtui.store import RunRow, Store

USAGE_KEYS = ("input_tokens", "input_cached_tokens", "output_tokens", "output_reasoning_tokens", "total_tokens")


def reference_metrics(run: RunRow) -> dict[str, float | int]:
    metrics: dict[str, float | int] = {}
    for name, m in (run.report.metrics if run.report else {}).items():
        metrics[name] = m.value
        metrics[f"{name}:n_samples"] = m.n
        metrics[f"{name}:bootstrap_std"] = m.bootstrap_std
    return metrics


async def write_reference(store: Store, run: RunRow, out: Path) -> int:
    system = run.settings.get("system_message_test")
    examples, convos = [], []
    prompts: dict[str, list] = {}
    async for conv, verdicts in store.export_rows(run.id):
        if conv.score is None or conv.reply is None:
            continue
        body = conv.record_body
        prompt = prompts.get(body) or prompts.setdefault(body, json.loads(body)["prompt"])
        sent = ([{"role": "system", "content": system}] if system else []) + prompt
        completion = [{"content": conv.reply, "role": "assistant"}]
        examples.append(
            {
                "score": conv.score,
                "usage": dict.fromkeys(USAGE_KEYS),  # as the reference writes a reply without usage
                "rubric_items": [rubric_item(v) for v in verdicts],
                "prompt": sent,
                "completion": completion,
                "prompt_id": conv.prompt_id,
                "completion_id": hashlib.sha256((conv.prompt_id + conv.reply).encode("utf-8")).hexdigest(),
            }
        )
        convos.append(sent + completion)
    document = {
        "score": run.report.score if run.report else None,
        "metrics": reference_metrics(run),
        "convos": convos,
        "metadata": {"example_level_metadata": examples},
    }
    with private_file(out) as handle:
        handle.write(json.dumps(document, indent=2, ensure_ascii=False))
    return len(examples)
