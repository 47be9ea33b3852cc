"""The HTTP under the chat calls: HTTP/1.1 over kept-alive connections, one request at a time on
each, its answer parsed by httptools and read against MAX_ANSWER_MIB as it arrives.

Why not aiohttp, which served the calls before: a run spends most of its CPU on the requests
themselves, and aiohttp's machinery for one (its request and response objects, their headers,
timers, a task to write the body, a stream to read it) cost 0.24-0.25 ms of CPU a call, measured
at 512 in flight against the test server, where this client costs 0.08-0.09 ms; at that
concurrency hbtui's process is CPU-bound, so that is its rate. What a chat call needs is small: a
POST of bytes made once, to one origin, with a few fixed headers, and its answer whole. The part
one must not write oneself, the parsing of HTTP answers (chunked bodies, lengths, keep-alive,
what a broken server sends), is httptools: llhttp, the parser of Node.js, as uvicorn uses it.
Everything else is here, each with the reason it must be so:

- TIMEOUT bounds the whole answer, from the connection (made or taken from the pool) to the last
  byte: a server that drips a byte a second never resets it. A connection is made within
  min(TIMEOUT, 15 s).
- The body is inflated as it arrives (gzip, deflate; nothing else is asked for), never holding
  more than the limit: a 50 MB reply, or a 1 MB gzip that inflates to 1 GiB, is cut there.
- Redirects are the caller's to follow (hbtui.client.chat follows them within the origin only).
- A connection that was idle, closed by the server, answered out of turn, or whose answer was not
  read whole is never used again. No proxy from the environment, as before.
- ``may_send`` is asked right before the request's bytes are written, once its connection is
  ready: a process stopped while it connected must not send, once continued, a call its lease no
  longer covers (CallWithheld: no byte left).
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httptools
import orjson
from multidict import CIMultiDict

from hbtui import __version__

KEEPALIVE_SECONDS = 30.0  # an idle connection older than this is closed, not used again
CONNECT_SECONDS = 15.0
USER_AGENT = f"hbtui/{__version__}"
_STATIC_HEADERS = f"User-Agent: {USER_AGENT}\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n"


class TransportError(Exception):
    """No whole answer: the connection could not be made, was lost, or carried no HTTP. The
    socket's own error, where there was one, is its cause."""


class CallWithheld(Exception):
    """The last look before a request's bytes left found the gate closed: no byte of it left."""


class AnswerTooLarge(Exception):
    """An answer past MAX_ANSWER_MIB: ``size`` bytes read (after decompression) when it was cut."""

    def __init__(self, size: int, status: int | None = None) -> None:
        super().__init__(size)
        self.size = size
        self.status = status


class AnswerUnreadable(ValueError):
    """An answer whose body cannot be read: an encoding not asked for, or a corrupt compressed
    stream."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class HttpAnswer:
    """An HTTP answer read whole: what the client needs of it, with the names httpx gives them
    (so the error helpers read httpx's responses too)."""

    __slots__ = ("content", "headers", "reason_phrase", "status_code", "url")

    def __init__(
        self, status_code: int, reason_phrase: str, headers: Mapping[str, str], content: bytes, url: str = ""
    ) -> None:
        self.status_code = status_code
        self.reason_phrase = reason_phrase
        self.headers = headers
        self.content = content
        self.url = url

    def json(self) -> Any:
        """The body's JSON as json.loads reads it. orjson reads it first, in a third of the time
        (json.loads was 6% of a run's CPU): for everything both accept they agree, but for an
        integer beyond 64 bits, which orjson makes a float (a token count that large is read as
        no count either way: hbtui.client.wire.token_count). What orjson refuses (NaN, 1e400, a
        lone surrogate, deep nesting, a byte-order mark, UTF-16, not JSON) json.loads reads, or
        refuses with the error it always raised."""
        try:
            return orjson.loads(self.content)
        except orjson.JSONDecodeError:
            return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"HttpAnswer({self.status_code} {self.reason_phrase!r}, {len(self.content)} bytes)"


class _Body:
    """A body as it arrives, inflated, against the limit (an exception ends the answer)."""

    __slots__ = ("encoding", "first", "inflate", "limit", "parts", "size", "status")

    def __init__(self, limit: int, status: int, headers: CIMultiDict[str]) -> None:
        self.limit = limit
        self.status = status
        self.parts: list[bytes] = []
        self.size = 0
        self.first = True
        encoding = (headers.get("Content-Encoding") or "identity").strip().lower()
        self.encoding = encoding
        if encoding in ("identity", ""):
            self.inflate = None
            declared = headers.get("Content-Length")
            if declared is not None and declared.strip().isdigit() and int(declared) > limit:
                raise AnswerTooLarge(int(declared), status)
        elif encoding in ("gzip", "x-gzip", "deflate"):
            # 47: a gzip or zlib header, told apart by the stream itself ("deflate" is zlib, as the
            # HTTP spec has it; a raw deflate stream, which some servers send, is tried on failure).
            self.inflate = zlib.decompressobj(47)
        else:
            raise AnswerUnreadable(f"an answer in Content-Encoding {encoding!r}, which was not asked for", status)

    def _take(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > self.limit:
            raise AnswerTooLarge(self.size, self.status)
        self.parts.append(piece)

    def feed(self, chunk: bytes) -> None:
        inflate = self.inflate
        if inflate is None:
            self._take(chunk)
            return
        data = chunk
        while data:
            try:
                piece = inflate.decompress(data, self.limit - self.size + 1)
            except zlib.error:
                if not self.first or self.encoding != "deflate":
                    raise AnswerUnreadable("an answer whose compressed body is corrupt", self.status) from None
                inflate = self.inflate = zlib.decompressobj(-15)
                piece = inflate.decompress(data, self.limit - self.size + 1)
            self.first = False
            self._take(piece)
            data = inflate.unconsumed_tail

    def content(self) -> bytes:
        if self.inflate is not None:
            try:
                self._take(self.inflate.flush())
            except zlib.error:
                raise AnswerUnreadable("an answer whose compressed body is corrupt", self.status) from None
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)


class _Connection(asyncio.Protocol):
    """One kept-alive connection; httptools calls its on_* methods as it parses."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        # The request in flight: its future, and what its answer has so far.
        self.waiter: asyncio.Future[HttpAnswer] | None = None
        self.limit = 0
        self.url = ""
        self.reason = ""
        self.headers: CIMultiDict[str] = CIMultiDict()
        self.body: _Body | None = None
        self.headers_done = False
        self.until_close = False  # neither a length nor chunks: the body ends with the connection

    # ---- asyncio ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # bytes no request asked for: this connection is done
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            self._fail(cause if isinstance(cause, (AnswerTooLarge, AnswerUnreadable)) else TransportError(str(exc)))
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"not an HTTP answer ({exc})"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is None or self.waiter.done():
            return
        if self.headers_done and self.until_close and self.body is not None:
            self._complete()  # HTTP/1.0 style: the body ended with the connection
            return
        reason = f" ({type(exc).__name__}: {exc})" if exc else ""
        error = TransportError(f"the server closed the connection before its answer ended{reason}")
        error.__cause__ = exc
        self._fail(error)

    # ---- httptools ----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.waiter is None:  # a second answer behind the one asked for: out of step
            raise TransportError("an answer no request asked for")
        self.headers = CIMultiDict()
        self.headers_done = False
        self.body = None

    def on_status(self, status: bytes) -> None:
        self.reason = status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.add(name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200:
            return  # 100 Continue and the like: the answer is the message after it
        self.headers_done = True
        headers = self.headers
        self.until_close = (
            "Content-Length" not in headers and "chunked" not in (headers.get("Transfer-Encoding") or "").lower()
        )
        self.body = _Body(self.limit, status, headers)

    def on_body(self, chunk: bytes) -> None:
        if self.body is not None:
            self.body.feed(chunk)

    def on_message_complete(self) -> None:
        if not self.headers_done:
            return  # an informational (1xx) answer ended: its successor follows
        self._complete()

    # ---- the request's end ----------------------------------------------------------------
    def _complete(self) -> None:
        waiter, body = self.waiter, self.body
        self.waiter = None
        if waiter is None or waiter.done() or body is None:
            return
        try:
            content = body.content()
        except (AnswerTooLarge, AnswerUnreadable) as exc:
            self.close()
            waiter.set_exception(exc)
            return
        if self.until_close or not self.parser.should_keep_alive():
            self.close()
        waiter.set_result(HttpAnswer(self.parser.get_status_code(), self.reason, self.headers, content, self.url))

    def _fail(self, error: BaseException) -> None:
        waiter = self.waiter
        self.waiter = None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def time_out(self) -> None:
        """The whole answer's deadline passed: the request ends, and its connection with it."""
        self._fail(TimeoutError())

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, data: bytes, waiter: asyncio.Future[HttpAnswer], limit: int, url: str) -> None:
        self.waiter = waiter
        self.limit = limit
        self.url = url
        self.headers_done = False
        self.body = None
        assert self.transport is not None
        self.transport.write(data)


class HttpPool:
    """Kept-alive connections to the origins asked, and the requests made over them.

    ``timeout``: the most one answer may take, from its connection to its last byte;
    ``connections``: the most connections kept idle for each origin (the caller's limiter decides
    how many requests are in flight)."""

    def __init__(self, timeout: float, connections: int) -> None:
        self.timeout = timeout
        self.connect_timeout = min(timeout, CONNECT_SECONDS)
        self.connections = connections
        self._idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[tuple[str, str, int], str, bytes]] = {}
        self._ssl: Any = None
        self._closed = False

    async def __aenter__(self) -> HttpPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        await asyncio.sleep(0)  # the transports' close callbacks run

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        limit: int,
        may_send: Callable[[], bool] | None = None,
    ) -> HttpAnswer:
        return await self.request("POST", url, body, headers, limit=limit, may_send=may_send)

    async def get(self, url: str, headers: Mapping[str, str], *, limit: int) -> HttpAnswer:
        return await self.request("GET", url, None, headers, limit=limit)

    async def request(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        limit: int,
        may_send: Callable[[], bool] | None = None,
    ) -> HttpAnswer:
        """One answer, read whole within the timeout and the limit: TimeoutError,
        TransportError, AnswerTooLarge, AnswerUnreadable or CallWithheld otherwise."""
        origin, host, head = self._head(method, url, headers)
        if body is not None:
            data = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        else:
            data = head + b"\r\n"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        # Made within min(TIMEOUT, 15 s), which the whole answer's deadline also bounds.
        connection = self._idle_connection(origin) or await self._connect(origin, host)
        if may_send is not None and not may_send():
            self._give_back(origin, connection)
            raise CallWithheld
        waiter: asyncio.Future[HttpAnswer] = loop.create_future()
        # One timer a request, cancelled with its answer: asyncio.timeout's context manager cost
        # a tenth of the pool's CPU a call.
        timer = loop.call_at(deadline, connection.time_out)
        connection.send(data, waiter, limit, url)
        try:
            answer = await waiter
        except BaseException:
            connection.close()  # its answer not read whole: never used again
            raise
        finally:
            timer.cancel()
        self._give_back(origin, connection)
        return answer

    def _head(self, method: str, url: str, headers: Mapping[str, str]) -> tuple[tuple[str, str, int], str, bytes]:
        """The request's line and headers, made once for each URL and set of headers."""
        key = (method, url, tuple(headers.items()))
        made = self._heads.get(key)
        if made is None:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            if scheme not in ("http", "https") or not parts.hostname:
                raise TransportError(f"not an http(s) URL: {url}")
            port = parts.port or (443 if scheme == "https" else 80)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            host_header = parts.netloc.rpartition("@")[2]
            lines = [f"{method} {target} HTTP/1.1\r\nHost: {host_header}\r\n{_STATIC_HEADERS}"]
            for name, value in headers.items():
                if any(c in name + value for c in "\r\n\0"):
                    raise TransportError(f"the header {name} holds a line break, which HTTP cannot carry")
                lines.append(f"{name}: {value}\r\n")
            try:
                head = "".join(lines).encode("latin-1")
            except UnicodeEncodeError:
                raise TransportError(
                    "a header holds characters HTTP cannot carry (an API key with non-Latin-1 letters?)"
                ) from None
            made = ((scheme, parts.hostname, port), parts.hostname, head)
            if len(self._heads) < 64:
                self._heads[key] = made
        return made

    def _idle_connection(self, origin: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < KEEPALIVE_SECONDS:
                return connection
            connection.close()
        return None

    async def _connect(self, origin: tuple[str, str, int], host: str) -> _Connection:
        if self._closed:
            raise TransportError("the client is closed")
        scheme, _, port = origin
        ssl: Any = None
        if scheme == "https":
            if self._ssl is None:
                import ssl as ssl_module

                self._ssl = ssl_module.create_default_context()
            ssl = self._ssl
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(_Connection, host, port, ssl=ssl)
        except OSError as exc:  # refused, unknown host, TLS (ssl.SSLError is one too)
            raise TransportError(f"cannot connect to {host}:{port} ({type(exc).__name__}: {exc})") from exc
        return connection

    def _give_back(self, origin: tuple[str, str, int], connection: _Connection) -> None:
        if connection.closed or self._closed:
            connection.close()
            return
        idle = self._idle.setdefault(origin, deque())
        if len(idle) >= self.connections:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)
