"""Official files: downloaded once over HTTP, sha256-verified, cached, and a corrupt copy refused."""

import hashlib
import http.server
import threading
from functools import partial

import pytest

from hbtui.core import dataset
from hbtui.core.dataset import DatasetError, OfficialFile, load_subset
from tests.conftest import make_record, write_jsonl


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A local HTTP server holding a small file under the official name, with its sha256 pinned."""
    served = tmp_path / "served"
    served.mkdir()
    path = write_jsonl(
        served / "hard_2025-05-08-21-00-10.jsonl", [make_record(f"h{i}", [("Is kind", 5, [])]) for i in range(3)]
    )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setitem(dataset.SUBSETS, "hard", OfficialFile(path.name, digest, 3))
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HBTUI_DATA_URL", f"http://127.0.0.1:{server.server_address[1]}/")
    yield path
    server.shutdown()


def test_downloads_once_verifies_and_reuses(mirror, tmp_path):
    cache = tmp_path / "cache"
    seen = []
    first = load_subset("hard", cache, lambda done, total: seen.append((done, total)))
    assert len(first.records) == 3 and first.name == "hard"
    assert seen and seen[-1][0] == seen[-1][1] == mirror.stat().st_size
    mirror.write_text("changed upstream\n")  # a second load must not fetch again
    assert load_subset("hard", cache).sha256 == first.sha256


def test_corrupt_download_is_refused_and_not_cached(mirror, tmp_path):
    mirror.write_text(mirror.read_text() + "\n")  # bytes no longer match the pinned sha256
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match="sha256"):
        load_subset("hard", cache)
    assert not list(cache.iterdir())


def test_unreachable_mirror_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("HBTUI_DATA_URL", "http://127.0.0.1:9/")
    with pytest.raises(DatasetError, match=r"download failed.*--data PATH"):
        load_subset("main", tmp_path / "cache")
