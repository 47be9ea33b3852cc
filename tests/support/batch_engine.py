"""A stand-in for an offline engine (vLLM's ``run-batch``, Ray Data's LLM batch processing): it
reads a request file in OpenAI's batch input format, answers each line by sending its body to a
test server's route, and writes the output file as vLLM's run-batch writes it (one line a request,
``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``), in an order
of its own. Failed lines go into the same file, as run-batch puts them, or into an error file of
their own, as OpenAI's batch API does."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import httpx


def answer_file(
    requests: Path, output: Path, root_url: str, *, shuffle: int | None = 1, errors: Path | None = None
) -> tuple[int, int]:
    """Answer every line of ``requests`` into ``output`` (and failed ones into ``errors`` when
    given); ``root_url``: the server's origin (its routes are the lines' urls). Returns (lines
    answered 200, lines failed)."""
    lines = [json.loads(text) for text in requests.read_text(encoding="utf-8").splitlines() if text.strip()]
    answered, failed = [], []
    with httpx.Client(base_url=root_url, trust_env=False, timeout=60) as http:
        for line in lines:
            response = http.post(line["url"], json=line["body"])
            try:
                body = response.json()
            except ValueError:
                body = {"error": {"message": response.text[:200]}}
            ok = response.status_code == 200
            entry = {
                "id": f"vllm-{uuid.uuid4().hex}",
                "custom_id": line["custom_id"],
                # run-batch writes a failure's error beside its status, with no body; OpenAI's
                # error file keeps the error as the response's body.
                "response": {
                    "status_code": response.status_code,
                    "request_id": f"vllm-batch-{uuid.uuid4().hex}",
                    "body": body if ok or errors is not None else None,
                },
                "error": None if ok or errors is not None else body,
            }
            (answered if response.status_code == 200 else failed).append(entry)
    if errors is None:
        answered, failed = answered + failed, []
    if shuffle is not None:
        random.Random(shuffle).shuffle(answered)
    output.write_text("".join(json.dumps(entry) + "\n" for entry in answered), encoding="utf-8")
    if errors is not None:
        errors.write_text("".join(json.dumps(entry) + "\n" for entry in failed), encoding="utf-8")
    return sum(1 for e in answered if e["response"]["status_code"] == 200), len(failed) + sum(
        1 for e in answered if e["response"]["status_code"] != 200
    )
