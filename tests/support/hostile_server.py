"""A raw asyncio HTTP server that misbehaves below what an HTTP library lets a server do: it
drips headers or a body a byte at a time, streams chunks without end, sends a reply of 50 MB or
a gzip that inflates to 1 GiB, redirects to another origin, or refuses with any status.

It runs in a thread of the test process with its own event loop, on 127.0.0.1, and is reached
over a real socket like any provider. Every request is logged (method, path, headers) so a test
can say what reached it, and which server a redirect took a call to.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def completion(content: str = "A reply.", finish_reason: str = "stop") -> bytes:
    return json.dumps(
        {
            "id": "hostile",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }
    ).encode()


_BOMB: dict[int, bytes] = {}


def gzip_bomb(inflated: int = 1 << 30) -> bytes:
    """A gzip of ``inflated`` bytes of spaces inside a JSON string (about 1 MB for 1 GiB), made
    once per size: it starts as a chat completion would, so only its size is wrong.

    Each MiB is compressed after a full flush, which resets the compressor: its bytes are then
    the same every time, and are repeated rather than compressed 1,024 times (6 s)."""
    if inflated not in _BOMB:
        head = b'{"choices": [{"message": {"role": "assistant", "content": "'
        tail = b'"}, "finish_reason": "stop"}]}'
        block = b" " * (1 << 20)
        count = inflated // len(block)
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        start = packer.compress(head) + packer.flush(zlib.Z_FULL_FLUSH)
        packed = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
        again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
        assert packed == again  # the reset made them alike
        end = packer.compress(tail) + packer.flush()
        crc = zlib.crc32(head)
        for _ in range(count):
            crc = zlib.crc32(block, crc)
        crc = zlib.crc32(tail, crc)
        size = len(head) + count * len(block) + len(tail)
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
        trailer = crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")
        _BOMB[inflated] = header + start + packed * count + end + trailer
    return _BOMB[inflated]


@dataclass
class Behaviour:
    """What the server does with each request (``mode``), and its parameters."""

    # ok, drip_body, drip_headers, drip_chunks, big, gzip, gzip_bomb, redirect, status; and below
    # what HTTP libraries parse for a client: declared (a length past any limit, then silence),
    # until_close (no length: the body ends with the connection, as HTTP/1.0 has it), continue
    # (100 Continue before the answer), garbage (no HTTP at all), cut (the connection closed
    # halfway through its body), out_of_turn (a second answer no request asked for), bare_lf (lines
    # ended by LF alone), reset_body (no length, then a reset halfway), gzip_cut (a gzip stream
    # cut short), upgrade (101 Switching Protocols), drop_reused (a kept-alive connection's next
    # request met by its closing, as a server's idle timeout meets it), close_at_once (each
    # connection closed as it is accepted)
    mode: str = "ok"
    content: str = "A reply."
    finish_reason: str = "stop"
    size: int = 50 * 1024 * 1024  # big: the reply's characters
    interval: float = 1.0  # drip_*: seconds between bytes (or chunks)
    drop_after: float = 0.0  # drop_reused: seconds between reading a reused connection's request and closing it
    location: str = ""  # redirect: where to
    redirect_from: str = ""  # redirect: only this path (the others are answered as ok); empty: every path
    redirect_status: int = 307
    status: int = 400  # status: the status sent
    body: bytes = b'{"error": {"message": "bad request", "type": "invalid_request_error", "code": null}}'


@dataclass
class HostileServer:
    behaviour: Behaviour = field(default_factory=Behaviour)
    requests: list[dict[str, Any]] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.AbstractServer | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    tls: Any = None  # an ssl.SSLContext: served over TLS, as hosted providers are
    dropped: int = 0  # drop_reused: requests met by the connection's closing

    @property
    def origin(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def start(self) -> HostileServer:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, self.host, self.port, ssl=self.tls))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.behaviour.mode == "close_at_once":  # a full queue's server, a proxy with no backend
            self.requests.append({"method": None, "path": None, "headers": {}, "body": b"", "at": time.time()})
            writer.transport.abort()
            return
        try:
            read = 0  # requests read on this connection
            while await self._one(reader, writer, read):
                read += 1
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read: int) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        if self.behaviour.mode == "drop_reused" and read:
            self.dropped += 1
            # At once: an idle timeout meeting the request. Later: a proxy's, while the model works.
            await asyncio.sleep(self.behaviour.drop_after)
            return False  # closed, the request unanswered
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        body = await reader.readexactly(length) if length else b""
        peer = writer.get_extra_info("peername")
        self.requests.append(
            {"method": method, "path": path, "headers": headers, "body": body, "at": time.time(), "peer": peer}
        )
        behaviour = self.behaviour
        mode = behaviour.mode
        if mode == "redirect" and behaviour.redirect_from and path != behaviour.redirect_from:
            mode = "ok"
        send: Callable[..., Any] = getattr(self, "_" + mode)
        await send(writer, behaviour)
        return behaviour.mode in (
            "ok",
            "redirect",
            "status",
            "gzip",
            "continue",
            "out_of_turn",
            "bare_lf",
            "drop_reused",
        )

    @staticmethod
    def _head(status: int, headers: dict[str, str]) -> bytes:
        reason = {200: "OK", 307: "Temporary Redirect", 308: "Permanent Redirect", 302: "Found"}.get(status, "Status")
        lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
        return "\r\n".join(lines).encode()

    async def _ok(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = completion(behaviour.content, behaviour.finish_reason)
        writer.write(self._head(200, {"Content-Type": "application/json", "Content-Length": str(len(body))}) + body)
        await writer.drain()

    async def _declared(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        writer.write(self._head(200, {"Content-Type": "application/json", "Content-Length": str(10**12)}) + b"{")
        await writer.drain()
        await asyncio.sleep(3600)

    async def _until_close(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = completion(behaviour.content)
        head = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n"
        writer.write(head + body[:10])
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(body[10:])
        await writer.drain()

    async def _continue(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await self._ok(writer, behaviour)

    async def _garbage(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01 not HTTP at all\r\n\r\n")
        await writer.drain()

    async def _cut(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = completion(behaviour.content)
        writer.write(self._head(200, {"Content-Type": "application/json", "Content-Length": str(len(body))}))
        writer.write(body[: len(body) // 2])
        await writer.drain()

    async def _out_of_turn(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        await self._ok(writer, behaviour)
        await self._ok(writer, Behaviour(content="An answer nobody asked for."))

    async def _drop_reused(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        await self._ok(writer, behaviour)  # the first request of a connection is answered

    async def _bare_lf(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = completion(behaviour.content)
        writer.write(
            f"HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: {len(body)}\n\n".encode() + body
        )
        await writer.drain()

    async def _reset_body(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = completion(behaviour.content)
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body[: len(body) // 2])
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # closed by a reset
        writer.transport.abort()

    async def _gzip_cut(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        packed = gzip.compress(completion(behaviour.content))
        body = packed[: len(packed) - 12]  # its last deflate bytes and the trailer left out
        head = {"Content-Type": "application/json", "Content-Encoding": "gzip", "Content-Length": str(len(body))}
        writer.write(self._head(200, head) + body)
        await writer.drain()

    async def _upgrade(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(3600)

    async def _status(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = behaviour.body
        head = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        writer.write(self._head(behaviour.status, head) + body)
        await writer.drain()

    async def _redirect(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        head = {"Location": behaviour.location, "Content-Length": "0"}
        writer.write(self._head(behaviour.redirect_status, head))
        await writer.drain()

    async def _drip_headers(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        head = self._head(200, {"Content-Type": "application/json", "X-Padding": "x" * 100_000})
        for byte in head:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(behaviour.interval)

    async def _drip_body(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = completion("x" * 100_000)
        writer.write(self._head(200, {"Content-Type": "application/json", "Content-Length": str(len(body))}))
        for byte in body:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(behaviour.interval)

    async def _drip_chunks(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        writer.write(self._head(200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
        writer.write(b"1\r\n{\r\n")
        while True:  # without end: a space a chunk
            writer.write(b"1\r\n \r\n")
            await writer.drain()
            await asyncio.sleep(behaviour.interval)

    async def _big(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        # Chunked, so that no Content-Length tells the client the size before it reads it.
        writer.write(self._head(200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
        body = completion("x" * behaviour.size)
        step = 1 << 16
        for start in range(0, len(body), step):
            piece = body[start : start + step]
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _gzip(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = gzip.compress(completion(behaviour.content))
        head = {"Content-Type": "application/json", "Content-Encoding": "gzip", "Content-Length": str(len(body))}
        writer.write(self._head(200, head) + body)
        await writer.drain()

    async def _gzip_bomb(self, writer: asyncio.StreamWriter, behaviour: Behaviour) -> None:
        body = gzip_bomb()
        head = {"Content-Type": "application/json", "Content-Encoding": "gzip", "Content-Length": str(len(body))}
        writer.write(self._head(200, head))
        step = 1 << 16
        for start in range(0, len(body), step):
            writer.write(body[start : start + step])
            await writer.drain()
