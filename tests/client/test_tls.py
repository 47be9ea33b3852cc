"""Hosted providers answer over TLS: the chat client's pool (hbtui.client.http1) verifies the
server's certificate against the system's trust store (SSL_CERT_FILE names another, as OpenSSL
reads it), and a certificate it cannot trust is a connection error that says so, the key never
sent. A real TLS server on 127.0.0.1 with a certificate made for "localhost" by openssl."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess

import pytest

from hbtui.client.chat import ChatClient
from hbtui.client.limiter import AdaptiveLimiter
from hbtui.client.wire import ChatError, Endpoint
from tests.support.hostile_server import Behaviour, HostileServer

KEY = "sk-tls-test-7c1e5a"
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_server(certificate):
    cert, key = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with HostileServer(tls=context, behaviour=Behaviour(content="Over TLS.")) as server:
        yield server


def call(url: str) -> str:
    async def go():
        client = ChatClient(Endpoint(url, KEY), limiter=AdaptiveLimiter(1), timeout=10, max_attempts=1)
        try:
            return (await client.complete("test-model", [{"role": "user", "content": "hi"}])).content
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_a_server_whose_certificate_is_trusted_is_asked_over_tls(tls_server, certificate, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    assert call(f"https://localhost:{tls_server.port}/v1") == "Over TLS."
    assert tls_server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert tls_server.requests[0]["headers"]["host"] == f"localhost:{tls_server.port}"


def test_a_certificate_not_trusted_is_a_connection_error_and_the_key_is_never_sent(tls_server):
    with pytest.raises(ChatError) as caught:
        call(f"https://localhost:{tls_server.port}/v1")
    assert caught.value.kind == "connection" and "CERTIFICATE_VERIFY_FAILED" in caught.value.message
    assert KEY not in str(caught.value)
    assert tls_server.requests == []
