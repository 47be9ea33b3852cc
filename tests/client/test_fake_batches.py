"""The test server's batch API (tests/support/fake_batches.py) behaves as a provider's: status
transitions, answers equal to the online route's, output in an order of its own, error lines,
validation failures naming their line, expiry and cancel with the lines answered kept, the
enqueued limit and the quota refusal, and the list of batches with their metadata."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.support.server_process import FakeServer

DONE = ("completed", "failed", "expired", "cancelled")


def line(custom_id: str, content: str, model: str = "test-model", url: str = "/v1/chat/completions") -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": content}]}
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def client(server: FakeServer, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.base_url, trust_env=False, headers=headers, timeout=10)


def upload(http: httpx.Client, lines: list[dict] | str) -> str:
    text = lines if isinstance(lines, str) else "".join(json.dumps(item) + "\n" for item in lines)
    answer = http.post("/files", files={"file": ("in.jsonl", text.encode())}, data={"purpose": "batch"})
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


def submit(http: httpx.Client, file_id: str, **metadata: str) -> httpx.Response:
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    return http.post("/batches", json={**body, "metadata": metadata})


def wait(http: httpx.Client, batch_id: str, timeout: float = 20.0) -> tuple[dict, list[str]]:
    """The batch once it ended, and every status it was seen in on the way."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = http.get(f"/batches/{batch_id}").json()
        if not seen or seen[-1] != batch["status"]:
            seen.append(batch["status"])
        if batch["status"] in DONE:
            return batch, seen
        time.sleep(0.01)
    raise AssertionError(f"batch {batch_id} still {seen[-1]} after {timeout} s")


def lines_of(http: httpx.Client, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    return [json.loads(text) for text in http.get(f"/files/{file_id}/content").text.splitlines()]


@pytest.fixture
def batch_server():
    with FakeServer(config={"batch": {"validating_s": 0.05, "finalizing_s": 0.05}}) as server:
        yield server


def test_a_batch_goes_through_its_states_and_answers_as_the_online_route(batch_server):
    http = client(batch_server)
    requests = [line(f"conv-{i}", f"question {i}") for i in range(30)]
    created = submit(http, upload(http, requests), run="run-uuid", submission="1")
    assert created.status_code == 200 and created.json()["status"] == "validating"
    batch, seen = wait(http, created.json()["id"])
    assert seen[0] == "validating" and seen[-1] == "completed" and "finalizing" in seen
    assert batch["request_counts"] == {"total": 30, "completed": 30, "failed": 0}
    assert batch["metadata"] == {"run": "run-uuid", "submission": "1"} and batch["error_file_id"] is None
    output = lines_of(http, batch["output_file_id"])
    ids = [item["custom_id"] for item in output]
    assert sorted(ids) == sorted(r["custom_id"] for r in requests) and ids != [r["custom_id"] for r in requests]
    online = {r["custom_id"]: http.post("/chat/completions", json=r["body"]).json() for r in requests[:3]}
    for item in output:
        if item["custom_id"] in online:
            answer = item["response"]["body"]["choices"][0]["message"]["content"]
            assert answer == online[item["custom_id"]]["choices"][0]["message"]["content"]
            assert item["response"]["status_code"] == 200 and item["error"] is None


@pytest.mark.parametrize(
    ("text", "code", "line_number"),
    [
        ("".join(json.dumps(x) + "\n" for x in [line("a", "1"), line("a", "2")]), "duplicate_custom_id", 2),
        ("".join(json.dumps(x) + "\n" for x in [line("a", "1"), line("b", "2", model="other")]), "mismatched_model", 2),
        ("".join(json.dumps(x) + "\n" for x in [line("a", "1", url="/v1/embeddings")]), "mismatched_endpoint", 1),
        (json.dumps(line("a", "1")) + "\n{not json\n", "invalid_json_line", 2),
    ],
)
def test_a_file_that_fails_validation_fails_the_batch_naming_its_line(batch_server, text, code, line_number):
    http = client(batch_server)
    batch, seen = wait(http, submit(http, upload(http, text)).json()["id"])
    assert seen[-1] == "failed" and "in_progress" not in seen
    error = batch["errors"]["data"][0]
    assert error["code"] == code and error["line"] == line_number
    assert batch_server.stats()["requests"] == 0  # nothing of it was answered


def test_lines_the_route_refuses_go_to_the_error_file(batch_server):
    batch_server.control(faults={"server_error": 1.0})
    http = client(batch_server)
    batch, _ = wait(http, submit(http, upload(http, [line(f"c{i}", str(i)) for i in range(6)])).json()["id"])
    assert batch["status"] == "completed" and batch["output_file_id"] is None
    assert batch["request_counts"] == {"total": 6, "completed": 0, "failed": 6}
    errors = lines_of(http, batch["error_file_id"])
    assert len(errors) == 6 and {e["response"]["status_code"] for e in errors} == {500, 503}
    assert all("error" in e["response"]["body"] for e in errors)


def test_an_expired_batch_keeps_what_it_answered_and_lists_the_rest_as_batch_expired(batch_server):
    batch_server.control(latency_ms=100, batch={"concurrency": 1, "expire_after_s": 0.35, "validating_s": 0.01})
    http = client(batch_server)
    batch, _ = wait(http, submit(http, upload(http, [line(f"c{i}", str(i)) for i in range(20)])).json()["id"])
    assert batch["status"] == "expired" and batch["expired_at"] is not None
    answered, expired = lines_of(http, batch["output_file_id"]), lines_of(http, batch["error_file_id"])
    assert 1 <= len(answered) < 20 and len(answered) + len(expired) == 20
    assert all(e["error"]["code"] == "batch_expired" and e["response"] is None for e in expired)
    assert batch["request_counts"] == {"total": 20, "completed": len(answered), "failed": len(expired)}


def test_a_cancelled_batch_keeps_what_it_answered(batch_server):
    batch_server.control(latency_ms=100, batch={"concurrency": 1, "validating_s": 0.01})
    http = client(batch_server)
    batch_id = submit(http, upload(http, [line(f"c{i}", str(i)) for i in range(30)])).json()["id"]
    while http.get(f"/batches/{batch_id}").json()["status"] != "in_progress":
        time.sleep(0.01)
    time.sleep(0.25)
    cancelling = http.post(f"/batches/{batch_id}/cancel").json()
    assert cancelling["status"] == "cancelling"
    batch, _ = wait(http, batch_id)
    assert batch["status"] == "cancelled"
    answered = lines_of(http, batch["output_file_id"])
    assert 1 <= len(answered) < 30 and batch["error_file_id"] is None
    again = http.post(f"/batches/{batch_id}/cancel")
    assert again.status_code == 400 and "cancelled" in again.json()["error"]["message"]


def test_too_many_batches_enqueued_is_a_429_until_one_ends_and_no_credit_is_refused(batch_server):
    batch_server.control(latency_ms=50, batch={"max_enqueued": 1, "concurrency": 1})
    http = client(batch_server)
    first = submit(http, upload(http, [line("a", "1"), line("b", "2")])).json()
    refused = submit(http, upload(http, [line("c", "3")]))
    assert refused.status_code == 429 and "Enqueued token limit reached" in refused.json()["error"]["message"]
    wait(http, first["id"])
    assert submit(http, upload(http, [line("c", "3")])).status_code == 200
    batch_server.control(quota_exhausted=True)
    broke = submit(http, upload(http, [line("d", "4")]))
    assert broke.status_code == 429 and broke.json()["error"]["code"] == "insufficient_quota"


def test_the_list_of_batches_is_newest_first_with_their_metadata_a_page_at_a_time(batch_server):
    http = client(batch_server)
    made = [submit(http, upload(http, [line("a", str(i))]), submission=str(i)).json()["id"] for i in range(5)]
    page = http.get("/batches", params={"limit": 3}).json()
    assert [b["id"] for b in page["data"]] == made[::-1][:3] and page["has_more"] is True
    rest = http.get("/batches", params={"limit": 3, "after": page["last_id"]}).json()
    assert [b["id"] for b in rest["data"]] == made[::-1][3:] and rest["has_more"] is False
    assert [b["metadata"]["submission"] for b in page["data"]] == ["4", "3", "2"]


def test_unknown_files_and_batches_and_a_missing_key_are_refused():
    with FakeServer(api_key="sk-batch") as server:
        anonymous, keyed = client(server), client(server, "sk-batch")
        assert (
            anonymous.post("/files", files={"file": ("x.jsonl", b"{}")}, data={"purpose": "batch"}).status_code == 401
        )
        assert keyed.get("/files/file-none/content").status_code == 404
        assert keyed.get("/batches/batch-none").status_code == 404
        unknown = keyed.post("/batches", json={"input_file_id": "file-none", "endpoint": "/v1/chat/completions"})
        assert unknown.status_code == 404
        no_purpose = keyed.post("/files", files={"file": ("x.jsonl", b"{}")})
        assert no_purpose.status_code == 400 and "purpose" in no_purpose.json()["error"]["message"]
