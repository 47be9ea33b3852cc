"""The batch API client (hbtui.client.batches) against the test server's batch API, over a socket:
a file up, a batch made and watched to its end, its output streamed to disk and read as a call's
answers are, a batch found again by its metadata past a page of the list, a cancel, and each
refusal as the error kind a run acts on."""

from __future__ import annotations

import asyncio
import json

import pytest

from hbtui.client.batches import BatchClient
from hbtui.client.chat import batch_line_result
from hbtui.client.wire import ChatError, Endpoint
from hbtui.core.errors import AUTH, NOT_FOUND, QUOTA, RATE_LIMITED
from tests.support.server_process import FakeServer


def request_file(tmp_path, count: int, name: str = "requests.jsonl"):
    path = tmp_path / name
    lines = [
        {
            "custom_id": f"c{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "test-model", "messages": [{"role": "user", "content": f"question {i}"}]},
        }
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def until_ended(client: BatchClient, batch_id: str):
    for _ in range(2000):
        batch = await client.get(batch_id)
        if batch.ended:
            return batch
        await asyncio.sleep(0.01)
    raise AssertionError(f"batch {batch_id} did not end")


@pytest.fixture
def batch_server():
    with FakeServer(api_key="sk-batches", config={"batch": {"validating_s": 0.02, "finalizing_s": 0.02}}) as server:
        yield server


def test_a_file_up_a_batch_watched_and_its_output_down_and_read(batch_server, tmp_path):
    async def go():
        async with BatchClient(Endpoint(batch_server.base_url, "sk-batches")) as client:
            file_id = await client.upload(request_file(tmp_path, 40))
            made = await client.create(file_id, "/v1/chat/completions", {"run": "uuid-1", "submission": "1"})
            assert made.status == "validating" and made.metadata == {"run": "uuid-1", "submission": "1"}
            batch = await until_ended(client, made.id)
            size = await client.download(batch.output_file_id, tmp_path / "output.jsonl")
            return batch, size

    batch, size = asyncio.run(go())
    assert batch.status == "completed" and (batch.total, batch.completed, batch.failed) == (40, 40, 0)
    lines = [json.loads(line) for line in (tmp_path / "output.jsonl").read_text().splitlines()]
    assert size == (tmp_path / "output.jsonl").stat().st_size and len(lines) == 40
    assert not (tmp_path / "output.jsonl.partial").exists()
    answer = batch_line_result(
        200, json.dumps(lines[0]["response"]["body"]).encode(), api="chat", json_schema=False, attempts=1
    )
    assert answer.content.startswith("Reply ") and answer.prompt_tokens > 0


def test_a_batch_is_found_again_by_its_metadata_past_a_page(batch_server, tmp_path):
    """A process that died between the batch's creation and its record finds it again."""

    async def go():
        async with BatchClient(Endpoint(batch_server.base_url, "sk-batches")) as client:
            file_id = await client.upload(request_file(tmp_path, 1))
            made = [await client.create(file_id, "/v1/chat/completions", {"run": "r", "n": str(i)}) for i in range(130)]
            oldest = await client.find({"run": "r", "n": "0"})  # the 130th newest: on the second page
            newest = await client.find({"run": "r"})
            missing = await client.find({"run": "another"})
            return made, oldest, newest, missing

    made, oldest, newest, missing = asyncio.run(go())
    assert oldest is not None and oldest.id == made[0].id
    assert newest is not None and newest.id == made[-1].id
    assert missing is None


def test_a_cancel_and_every_refusal_as_the_kind_a_run_acts_on(batch_server, tmp_path):
    async def go():
        outcomes = {}
        async with BatchClient(Endpoint(batch_server.base_url, "sk-batches")) as client:
            batch_server.control(latency_ms=100, batch={"concurrency": 1, "validating_s": 0.01, "max_enqueued": 1})
            file_id = await client.upload(request_file(tmp_path, 30))
            made = await client.create(file_id, "/v1/chat/completions", {})
            try:
                await client.create(file_id, "/v1/chat/completions", {})
            except ChatError as exc:
                outcomes["enqueued"] = exc.kind
            cancelling = await client.cancel(made.id)
            outcomes["cancelling"] = cancelling.status
            outcomes["ended"] = (await until_ended(client, made.id)).status
            for name, call in (
                ("unknown batch", client.get("batch-none")),
                ("unknown file", client.download("file-none", tmp_path / "x")),
            ):
                try:
                    await call
                except ChatError as exc:
                    outcomes[name] = exc.kind
            batch_server.control(quota_exhausted=True)
            try:
                await client.create(file_id, "/v1/chat/completions", {})
            except ChatError as exc:
                outcomes["quota"] = exc.kind
        async with BatchClient(Endpoint(batch_server.base_url, "sk-wrong")) as stranger:
            try:
                await stranger.get(made.id)
            except ChatError as exc:
                outcomes["wrong key"] = exc.kind
                outcomes["key shown"] = "sk-wrong" in exc.message
        return outcomes

    outcomes = asyncio.run(go())
    assert outcomes == {
        "enqueued": RATE_LIMITED,  # wait for the earlier batches, then submit again
        "cancelling": "cancelling",
        "ended": "cancelled",
        "unknown batch": NOT_FOUND,
        "unknown file": NOT_FOUND,
        "quota": QUOTA,  # stops a run at once
        "wrong key": AUTH,
        "key shown": False,
    }
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()
