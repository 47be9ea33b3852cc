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
- A connection idle past its keep-alive (4 s, or less where the server's Keep-Alive header says
  so), closed by the server, answered out of turn, or whose answer was not read whole is never
  used again. One the server closed as it was reused, before a byte of its answer, is replaced
  and the request made again once (the race of every keep-alive client). Connections are made
  with happy eyeballs, the host's addresses looked up once for ten seconds. No proxy from the
  environment, as before. Servers' small lapses that aiohttp took (a bare LF ending a line) are
  taken too.
- ``may_send`` is asked right before the request's bytes are written, once its connection is
  ready: a process stopped while it connected must not send, once continued, a call its lease no
  longer covers (CallWithheld: no byte left).

Longer than most modules (about 600 lines) because one request's life is one piece: the pool's
rules for taking and giving back a connection, the parser's callbacks on it, and the answer's
timeout and limit each depend on the others' state.
"""

from __future__ import annotations

import asyncio
import socket
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import aiohappyeyeballs
import httptools
from multidict import CIMultiDict

from hbtui import __version__
from hbtui.core.json_reading import read_json

# An idle connection older than this is closed, not used again: uvicorn (vLLM), llama.cpp's
# server and Node let theirs go after 5 s, and one they close as a request arrives costs a retry.
# Shorter still where the server's Keep-Alive header says so.
KEEPALIVE_SECONDS = 4.0
CONNECT_SECONDS = 15.0
# A reused connection closed with no byte of answer this soon after the request left was let go
# by the server as the request came (its idle timeout met it on the way): made again, once, on a
# new connection. Closed later, the server may have read the request and worked on it (a proxy's
# idle timeout while the model generates): that is the call's failure, counted and retried by the
# client as any other, never a hidden second request.
STALE_SECONDS = 1.0
DNS_SECONDS = 10.0  # a host's addresses are looked up again after this
URL_SAFE = "/%:@!$&'()*+,;=-._~"  # what a path keeps as it is: reserved characters, and escapes made already
USER_AGENT = f"hbtui/{__version__}"
_STATIC_HEADERS = f"User-Agent: {USER_AGENT}\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n"


class TransportError(Exception):
    """No whole answer: the connection could not be made, was lost, or carried no HTTP. The
    socket's own error, where there was one, is its cause."""


class UnsendableRequest(ValueError):
    """A request HTTP cannot carry (a URL that is not http(s), a header with a line break, a key
    with letters beyond Latin-1): every request so made fails the same way, so it is no
    connection's failure and never retried."""


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


@dataclass(slots=True, repr=False)
class HttpAnswer:
    """An HTTP answer read whole: what the client needs of it, with the names httpx gives them
    (so the error helpers read httpx's responses too)."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]
    content: bytes

    def json(self) -> Any:
        """The body's JSON as json.loads reads it, by orjson first (json.loads was 6% of a run's
        CPU): hbtui.core.json_reading."""
        return read_json(self.content)

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
            if not self.inflate.eof:  # cut short: flush() gives what it has without a word
                raise AnswerUnreadable("an answer whose compressed body ends before its end", self.status)
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)


class _Connection(asyncio.Protocol):
    """One kept-alive connection; httptools calls its on_* methods as it parses."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        # What servers send that the HTTP spec frowns on and aiohttp took (a bare LF ending a
        # line, a space after a chunk's size, odd bytes in a header): refused, the call could
        # never succeed, asked again to no end.
        self.parser.set_dangerous_leniencies(
            lenient_headers=True, lenient_optional_cr_before_lf=True, lenient_spaces_after_chunk_size=True
        )
        self.closed = False
        self.idle_since = 0.0
        self.keepalive = KEEPALIVE_SECONDS
        self.answered = 0  # requests answered on it: a connection of the pool has answered one
        self.heard = False  # a byte of the answer in flight has arrived
        # The request in flight: its future, and what its answer has so far.
        self.waiter: asyncio.Future[HttpAnswer] | None = None
        self.limit = 0
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
        self.heard = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, (AnswerTooLarge, AnswerUnreadable, TransportError)):
                self._fail(cause)
            else:
                self._fail(TransportError(f"not an HTTP answer ({cause or exc})"))
        except httptools.HttpParserUpgrade:  # 101 Switching Protocols: not an answer to a POST
            self._fail(TransportError("the server switched protocols instead of answering"))
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"not an HTTP answer ({exc})"))

    def eof_received(self) -> None:
        self.closed = True  # the server is done with it: never taken from the pool again

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is None or self.waiter.done():
            self.waiter = self.body = None
            return
        if exc is None and self.headers_done and self.until_close and self.body is not None:
            self._complete()  # HTTP/1.0 style: the body ended with the connection (not reset)
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
        self.reason = ""

    def on_status(self, status: bytes) -> None:
        self.reason += status.decode("latin-1")  # in pieces, as the bytes arrive

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.add(name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200:
            return  # 100 Continue and the like: the answer is the message after it
        self.headers_done = True
        headers = self.headers
        self.until_close = (
            "Content-Length" not in headers
            and "chunked" not in (headers.get("Transfer-Encoding") or "").lower()
            and status not in (204, 304)
        )
        self.body = _Body(self.limit, status, headers)

    def on_body(self, chunk: bytes) -> None:
        if self.body is not None:
            self.body.feed(chunk)

    def on_message_complete(self) -> None:
        if not self.headers_done:
            self.reason = ""
            return  # an informational (1xx) answer ended: its successor follows
        self._complete()

    # ---- the request's end ----------------------------------------------------------------
    def _complete(self) -> None:
        waiter, body = self.waiter, self.body
        self.waiter = self.body = None  # an idle connection holds no answer
        if waiter is None or waiter.done() or body is None:
            return
        try:
            content = body.content()
        except (AnswerTooLarge, AnswerUnreadable) as exc:
            self.close()
            waiter.set_exception(exc)
            return
        headers = self.headers
        if self.until_close or not self.parser.should_keep_alive():
            self.close()
        else:
            self.answered += 1
            self.keepalive = _keepalive(headers.get("Keep-Alive"))
        waiter.set_result(HttpAnswer(self.parser.get_status_code(), self.reason, headers, content))

    def _fail(self, error: BaseException) -> None:
        waiter = self.waiter
        self.waiter = self.body = None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def time_out(self) -> None:
        """The whole answer's deadline passed: the request ends, and its connection with it."""
        self._fail(TimeoutError())

    def usable(self) -> bool:
        transport = self.transport
        return not self.closed and transport is not None and not transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, data: bytes, waiter: asyncio.Future[HttpAnswer], limit: int) -> None:
        self.waiter = waiter
        self.limit = limit
        self.headers_done = False
        self.heard = False
        self.body = None
        assert self.transport is not None
        self.transport.write(data)


def _keepalive(header: str | None) -> float:
    """How long an idle connection is kept: a second less than the server's ``Keep-Alive:
    timeout=N`` says it keeps it, and never longer than KEEPALIVE_SECONDS."""
    if header:
        for part in header.split(","):
            name, _, value = part.strip().partition("=")
            if name.strip().lower() == "timeout" and value.strip().isdigit():
                return max(0.0, min(KEEPALIVE_SECONDS, int(value) - 1.0))
    return KEEPALIVE_SECONDS


class _Stale(Exception):
    """A connection of the pool the server closed as it was reused: no byte came back."""


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
        self._addresses: dict[tuple[str, int], tuple[float, asyncio.Future[Any]]] = {}
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
        if method not in ("GET", "POST"):  # HEAD's answer has no body httptools would know of
            raise ValueError(f"{method}: only GET and POST are asked")
        origin, host, head = self._head(method, url, headers)
        if body is not None:
            data = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        else:
            data = head + b"\r\n"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        connection = self._idle_connection(origin)
        if connection is not None:
            try:
                return await self._exchange(origin, connection, data, limit, deadline, may_send)
            except _Stale:
                pass  # the server let it go as it was taken: once more, on a connection of its own
        # Made within 15 s and the time left before the answer's deadline. A new connection has
        # answered nothing, so it is never _Stale.
        connection = await self._connect(origin, host, deadline)
        return await self._exchange(origin, connection, data, limit, deadline, may_send)

    async def _exchange(
        self,
        origin: tuple[str, str, int],
        connection: _Connection,
        data: bytes,
        limit: int,
        deadline: float,
        may_send: Callable[[], bool] | None,
    ) -> HttpAnswer:
        try:
            allowed = may_send is None or may_send()
        except BaseException:
            connection.close()
            raise
        reused = connection.answered > 0
        if not allowed:
            if reused:  # back to the idle ones as it was, its idle time still counting
                self._give_back(origin, connection, connection.idle_since)
            else:
                connection.close()
            raise CallWithheld
        # A pooled connection was found usable just before this (nothing awaited since): only a new
        # one can have been lost, closed by the server as it was accepted.
        if not connection.usable():
            connection.close()
            raise TransportError("the server closed the connection before the request was sent")
        loop = asyncio.get_running_loop()
        sent_at = loop.time()
        if sent_at >= deadline:  # its connection came too late: a request sent now would be cut off unread
            self._give_back(origin, connection)
            raise TimeoutError
        waiter: asyncio.Future[HttpAnswer] = loop.create_future()
        # One timer a request, cancelled with its answer: asyncio.timeout's context manager cost
        # a tenth of the pool's CPU a call.
        timer = loop.call_at(deadline, connection.time_out)
        connection.send(data, waiter, limit)
        try:
            answer = await waiter
        except TransportError:
            connection.close()
            if reused and not connection.heard and loop.time() - sent_at < STALE_SECONDS:
                raise _Stale from None  # see STALE_SECONDS
            raise
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
            made = _request_head(method, url, headers)
            if len(self._heads) < 64:
                self._heads[key] = made
        return made

    def _idle_connection(self, origin: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        now = time.monotonic()
        # The oldest first: past their time they are closed, not left open at the deque's far end.
        while idle and now - idle[0].idle_since >= idle[0].keepalive:
            idle.popleft().close()
        while idle:
            connection = idle.pop()
            if connection.usable():
                return connection
            connection.close()
        return None

    async def _connect(self, origin: tuple[str, str, int], host: str, deadline: float) -> _Connection:
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
        left = deadline - loop.time()
        try:
            async with asyncio.timeout(max(0.0, min(self.connect_timeout, left))):
                addresses = await self._resolve(host, port)
                family, _, _, _, address = addresses[0]
                if len(addresses) == 1 and (family == socket.AF_INET or address[3] == 0):
                    # One address (and no IPv6 scope to keep), so nothing to race: the loop
                    # connects to it itself, in half the CPU of a socket of our own (40 against
                    # 85 us; a run at 512 in flight opens 512 connections as it starts).
                    _, connection = await loop.create_connection(
                        _Connection,
                        address[0],
                        address[1],
                        family=family,
                        ssl=ssl,
                        server_hostname=host if ssl else None,
                    )
                else:
                    # Happy eyeballs, as aiohttp connected: a host whose IPv6 path is broken is
                    # reached over IPv4 a quarter second later, not after the whole connect timeout.
                    sock = await aiohappyeyeballs.start_connection(addresses, happy_eyeballs_delay=0.25, interleave=1)
                    _, connection = await loop.create_connection(
                        _Connection, sock=sock, ssl=ssl, server_hostname=host if ssl else None
                    )
        except TimeoutError as exc:
            if left <= self.connect_timeout:
                raise  # the answer's own deadline came first: the call's timeout
            raise TransportError(f"cannot connect to {host}:{port} within {self.connect_timeout:g} s") from exc
        except (OSError, ValueError) as exc:  # refused, unknown host, TLS (ssl.SSLError), a bad name
            raise TransportError(f"cannot connect to {host}:{port} ({type(exc).__name__}: {exc})") from exc
        return connection

    async def _resolve(self, host: str, port: int) -> list[Any]:
        """The host's addresses, looked up once for the connections made together and kept ten
        seconds: 512 connections opened at a run's start ask the resolver once, not 512 times.
        A lookup that failed is not kept."""
        key = (host, port)
        loop = asyncio.get_running_loop()
        cached = self._addresses.get(key)
        if cached is None or loop.time() > cached[0]:
            lookup = asyncio.ensure_future(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))
            lookup.add_done_callback(lambda done: done.cancelled() or done.exception())  # said to its waiters
            cached = self._addresses[key] = (loop.time() + DNS_SECONDS, lookup)
        try:
            return await asyncio.shield(cached[1])  # one caller cancelled: the lookup goes on for the rest
        except Exception:
            if self._addresses.get(key) is cached:
                del self._addresses[key]
            raise

    def _give_back(
        self, origin: tuple[str, str, int], connection: _Connection, idle_since: float | None = None
    ) -> None:
        """``connection`` kept for the next request to ``origin`` where it may be; ``idle_since``:
        when it became idle, if not now."""
        transport = connection.transport
        if (
            not connection.usable()
            or self._closed
            # Answered before the server read the whole request (a 401, a 413): the rest is
            # still on its way, and the next request's bytes would follow it.
            or (transport is not None and transport.get_write_buffer_size() > 0)
        ):
            connection.close()
            return
        idle = self._idle.setdefault(origin, deque())
        if len(idle) >= self.connections:
            connection.close()
            return
        connection.idle_since = time.monotonic() if idle_since is None else idle_since
        idle.append(connection)


def _request_head(method: str, url: str, headers: Mapping[str, str]) -> tuple[tuple[str, str, int], str, bytes]:
    """(origin, host to connect to, the request's line and headers) of a URL: the path
    percent-encoded where it is not already, the host in ASCII (IDNA), its port left out of
    Host where it is the scheme's own, as browsers and aiohttp write it."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
        hostname = parts.hostname
        if scheme not in ("http", "https") or not hostname:
            raise ValueError("not an http(s) URL")
        ascii_host = hostname.encode("idna").decode("ascii") if not hostname.isascii() else hostname
    except (ValueError, UnicodeError) as exc:
        raise UnsendableRequest(f"{url}: {exc}") from None
    default = 443 if scheme == "https" else 80
    shown = f"[{ascii_host}]" if ":" in ascii_host else ascii_host
    host_header = shown if port in (None, default) else f"{shown}:{port}"
    target = quote(parts.path or "/", safe=URL_SAFE) + (
        f"?{quote(parts.query, safe=URL_SAFE + '?')}" if parts.query else ""
    )
    lines = [f"{method} {target} HTTP/1.1\r\nHost: {host_header}\r\n{_STATIC_HEADERS}"]
    for name, value in headers.items():
        if not name or any(c in name for c in ": \t\r\n\0") or any(c in value for c in "\r\n\0"):
            raise UnsendableRequest(f"the header {name!r} holds what HTTP cannot carry (a line break, a colon)")
        if name.lower() in ("host", "content-length"):
            continue  # written by the pool itself
        lines.append(f"{name}: {value}\r\n")
    try:
        head = "".join(lines).encode("latin-1")
    except UnicodeEncodeError:
        raise UnsendableRequest(
            "a header holds characters HTTP cannot carry (an API key with non-Latin-1 letters?)"
        ) from None
    return (scheme, ascii_host, port or default), ascii_host, head
