"""`hbtui serve`: the same app, every screen, in a browser, through textual-serve.

textual-serve runs one app process per browser tab and relays its terminal over a websocket. It
has no authentication of its own, and the app it serves starts paid runs and writes `.env`, so
this module puts three guards in front of every route (page, websocket, static files, downloads):

- a random secret, given once in the printed URL and then kept in an `HttpOnly`,
  `SameSite=Strict` cookie, so that nobody else on the machine (or the network) gets in;
- the `Host` header must name a loopback address (or the address the user chose to expose), so
  that a web page on another origin cannot reach the server through DNS rebinding;
- an `Origin` header, when the browser sends one (always on the websocket), must be this server's
  own, so that no other web page can drive the app from the user's browser.

Each tab's app is a process of about 63 MB, so at most SERVE_MAX_TABS of them run at once; a
tab opened past them gets a page saying why, and a tab closed frees its place once its app has
ended. A request aiohttp cannot read (no `Host` header in HTTP/1.1, a malformed line) is answered
400 by aiohttp itself, which would also print a traceback: a client's bad request prints nothing.

The websocket's and static files' URLs are derived from each request, so the page works behind
`ssh -L 9000:127.0.0.1:8000 box` (textual-serve writes absolute URLs from its own host and port).

textual-serve's aiohttp application is not a published API (we override `_make_app` and the
index handler), which is why pyproject.toml pins it exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import html
import ipaddress
import logging
import secrets
import shlex
import socket
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from textual_serve.app_service import AppService
from textual_serve.server import Server

from hbtui.core.errors import HbtuiError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
COOKIE_PREFIX = "hbtui-serve-"
SECRET_PARAMETER = "key"
FORBIDDEN = "forbidden: open the URL that `hbtui serve` printed\n"
NO_HOST = "bad request: no Host header\n"
# The websocket's close code for a tab refused for want of a place: "try again later".
TRY_AGAIN_LATER = 1013


class ServeError(HbtuiError):
    """A server that cannot start as asked: the message is one line for the user."""


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_name(host_header: str) -> str:
    """The name in a `Host` header or an origin's netloc, without its port (IPv6 unbracketed)."""
    try:
        return (urlsplit(f"//{host_header}").hostname or "").lower()
    except ValueError:
        return ""


def app_command(db_path: str, env_file: str) -> str:
    """The command each browser tab's app runs: this interpreter, this database, this `.env`."""
    # exec: the tab's process is the app itself, not a shell above it, so ending it ends the app.
    return "exec " + shlex.join(
        [
            sys.executable,
            "-m",
            "hbtui",
            "--db",
            str(Path(db_path).resolve()),
            "--env-file",
            str(Path(env_file).resolve()),
        ]
    )


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a port in use is one line, not a traceback from
    inside aiohttp, and so that `--port 0` can print the port the system chose."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"port {port} is in use on {host}: choose another with --port") from None
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def close_quietly(websocket: web.WebSocketResponse) -> None:
    await websocket.close()


def tabs_full(open_tabs: int, limit: int) -> str:
    """Why a tab is refused, in one line: how many are open, the limit, and how to raise it."""
    tabs = f"{open_tabs} tab{'s' if open_tabs != 1 else ''} of hbtui {'are' if open_tabs != 1 else 'is'} open"
    return (
        f"{tabs}, as many as SERVE_MAX_TABS={limit} allows (each tab is an app process of its own):"
        " close one and reload this page, or raise SERVE_MAX_TABS (1 to 256) in .env or the environment"
        " and start hbtui serve again"
    )


def tabs_full_page(open_tabs: int, limit: int) -> str:
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>hbtui: no tab free</title></head>\n'
        '<body style="background:#0c181f;color:#e8eef2;font:16px/1.5 monospace;margin:3em">\n'
        f"<h1>hbtui: no tab free</h1>\n<p>{html.escape(tabs_full(open_tabs, limit))}</p>\n</body></html>\n"
    )


class ClientErrorsQuiet(logging.Handler):
    """aiohttp's log of the requests it handles. A request it could not read (no Host header, a
    malformed line) it has answered 400 itself; that is the client's fault, and a traceback of it
    on the server's terminal says nothing to the user (and anyone could fill it): nothing is
    printed. Anything else is one line."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            return
        detail = f"{type(error).__name__}: {error}" if error else record.getMessage()
        print(f"hbtui: a request failed: {detail}", file=sys.stderr)


def request_logger() -> logging.Logger:
    logger = logging.getLogger("hbtui.web.serve.requests")
    if not logger.handlers:
        logger.addHandler(ClientErrorsQuiet())
        logger.propagate = False
    return logger


# xterm.js takes its keys through a hidden textarea that textual.js creates once the page has
# loaded: focused as soon as it appears, and again when the window comes back to the front.
FOCUS_TERMINAL = """<script>
(function () {
  function focusTerminal() {
    var keys = document.querySelector("#terminal .xterm-helper-textarea");
    if (keys) { keys.focus(); }
    return Boolean(keys);
  }
  if (!focusTerminal()) {
    var watcher = new MutationObserver(function () { if (focusTerminal()) { watcher.disconnect(); } });
    watcher.observe(document.body, { childList: true, subtree: true });
  }
  window.addEventListener("focus", focusTerminal);
})();
</script>
"""


class GuardedServer(Server):
    """textual-serve's server with a secret, and `Host` and `Origin` checks, on every route."""

    def __init__(self, command: str, sock: socket.socket, *, exposed: bool, secret: str, max_tabs: int) -> None:
        host, port = sock.getsockname()[:2]
        super().__init__(command, host=host, port=port, title="hbtui")
        self.sock = sock
        self.secret = secret
        self.max_tabs = max_tabs
        # Reached from other machines, the page is addressed by one of this machine's addresses
        # or names. An address cannot be rebound, only a DNS name can: of names, only this
        # machine's own are taken.
        self.exposed = exposed
        self.own_names = {host.lower(), socket.gethostname().lower(), socket.getfqdn().lower()}
        self.tabs: set[AppService] = set()
        # Cookies are shared by every port of a host: a name per server keeps two servers on one
        # machine from overwriting each other's secret.
        self.cookie_name = f"{COOKIE_PREFIX}{port}"

    def url(self, host: str | None = None) -> str:
        shown = host or ("127.0.0.1" if is_loopback(self.host) or self.host in ("0.0.0.0", "::") else self.host)
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{self.port}/?{SECRET_PARAMETER}={self.secret}"

    def host_allowed(self, host_header: str) -> bool:
        name = host_name(host_header)
        if not name:
            return False
        if is_loopback(name):
            return True
        return self.exposed and (is_address(name) or name in self.own_names)

    def secret_given(self, request: web.Request) -> bool:
        offered = request.cookies.get(self.cookie_name) or request.query.get(SECRET_PARAMETER) or ""
        return hmac.compare_digest(offered.encode(), self.secret.encode())

    @web.middleware
    async def guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        host_header = request.headers.get("Host")
        origin = request.headers.get("Origin")
        if host_header is None:  # HTTP/1.0 (aiohttp answers HTTP/1.1 without one itself)
            return web.Response(status=400, text=NO_HOST)
        if not self.host_allowed(host_header):
            return web.Response(status=403, text=FORBIDDEN)
        # A page of this server sends its own origin; any other origin is another site's page.
        if origin is not None and urlsplit(origin).netloc.lower() != host_header.lower():
            return web.Response(status=403, text=FORBIDDEN)
        if request.path == "/ws" and origin is None:
            return web.Response(status=403, text=FORBIDDEN)
        if not self.secret_given(request):
            return web.Response(status=403, text=FORBIDDEN)
        if SECRET_PARAMETER in request.query and request.path == "/":
            # Trade the secret in the URL for a cookie, and take it out of the address bar and
            # the history.
            redirect = web.HTTPFound("/")
            redirect.set_cookie(self.cookie_name, self.secret, httponly=True, samesite="Strict", path="/")
            return redirect
        response = await handler(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard], handler_args={"logger": request_logger()})
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes(
            [
                web.get("/", self.index_with_focus, name="index"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, show_index=False, name="static"),
            ]
        )
        app.on_shutdown.append(self.end_every_tab)
        return app

    async def index_with_focus(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, with the keyboard given to the terminal as soon as it exists:
        after load the focus was on the page's body, and the first keys were lost until a click."""
        response = await self.handle_index(request)
        if isinstance(response, web.Response) and response.text and "</body>" in response.text:
            response.text = response.text.replace("</body>", f"{FOCUS_TERMINAL}</body>", 1)
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's handler, keeping each tab's app so that Ctrl-C can end them all (its own
        leaves them to finish on their own), and saying a failure in one line, not a traceback."""
        websocket = web.WebSocketResponse(heartbeat=15)
        try:
            width = int(request.query.get("width", "80"))
            height = int(request.query.get("height", "24"))
        except ValueError:
            width, height = 80, 24
        tab: AppService | None = None
        try:
            await websocket.prepare(request)
            if len(self.tabs) >= self.max_tabs:  # counted and taken with no await between
                # Two pages loaded at once may both have found a place: the terminal says why.
                await websocket.send_bytes(f"\r\nhbtui: {tabs_full(len(self.tabs), self.max_tabs)}\r\n".encode())
                await websocket.close(code=TRY_AGAIN_LATER, message=b"no tab free: SERVE_MAX_TABS")
                return websocket
            tab = AppService(
                self.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=partial(close_quietly, websocket),
                download_manager=self.download_manager,
                debug=self.debug,
            )
            self.tabs.add(tab)
            await tab.start(width, height)
            await self._process_messages(websocket, tab)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # noqa: BLE001 - one tab's failure must not end the server or the other tabs
            print(f"hbtui: a browser tab's app ended: {type(error).__name__}: {error}", file=sys.stderr)
        finally:
            if tab is not None:
                try:
                    await tab.stop()
                finally:
                    # Its place is free once its app has ended, not before: the limit is on
                    # processes. Until then Ctrl-C's end_every_tab still sees it.
                    self.tabs.discard(tab)
        return websocket

    async def end_every_tab(self, app: web.Application) -> None:
        """Ask every tab's app to quit, as closing its tab does; kill what is still there after a
        few seconds, so that the server never leaves an app behind it."""
        tabs = list(self.tabs)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(tab.stop() for tab in tabs), return_exceptions=True), 5)
        for tab in tabs:
            # textual-serve keeps no other handle on it (pinned: see above): its AppService.stop
            # waits without a limit and its on_shutdown does nothing (no upstream issue found;
            # tests/tui/test_textual_overrides.py fails when that changes).
            process = tab._process
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()

    async def handle_index(self, request: web.Request) -> web.Response:
        if len(self.tabs) >= self.max_tabs:
            return web.Response(
                status=503, text=tabs_full_page(len(self.tabs), self.max_tabs), content_type="text/html"
            )
        # Every URL from the request's own scheme and host, so the page works behind a tunnel
        # whose local port differs from ours.
        base = f"{request.scheme}://{request.host}"
        websocket_scheme = "wss" if request.scheme == "https" else "ws"
        try:
            font_size = int(request.query.get("fontsize", "16"))
        except ValueError:
            font_size = 16
        context: dict[str, Any] = {
            "font_size": font_size,
            "app_websocket_url": f"{websocket_scheme}://{request.host}/ws",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": "hbtui"},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    def initialize_logging(self) -> None:
        """textual-serve logs every connection with Rich; hbtui prints its own lines instead."""

    def serve(self, debug: bool = False) -> None:
        # Ctrl-C: tabs still open get a moment to end their apps, not aiohttp's default minute.
        web.run_app(self._make_app(), sock=self.sock, print=lambda *args: None, handle_signals=True, shutdown_timeout=3)


def serve(
    *, host: str, port: int, expose: bool, db_path: str, env_file: str, max_tabs: int, say: Callable[..., None]
) -> int:
    if not is_loopback(host) and not expose:
        raise ServeError(
            f"--host {host} would let other machines reach the app, which starts paid runs and writes "
            "your .env: add --expose to mean it, or keep the default 127.0.0.1 and use ssh -L"
        )
    sock = bind(host, port)
    server = GuardedServer(
        app_command(db_path, env_file),
        sock,
        exposed=not is_loopback(host),
        secret=secrets.token_urlsafe(24),
        max_tabs=max_tabs,
    )
    if not is_loopback(host):
        say(
            f"hbtui: warning: serving on {host}, reachable from other machines; only the secret in "
            "the URL keeps them out, and the traffic is not encrypted",
            error=True,
        )
    say(f"hbtui: open {server.url()}")
    say(
        f"hbtui: over SSH, forward the port first (ssh -L {server.port}:127.0.0.1:{server.port} HOST) and open "
        "the same URL in your own browser; each tab is its own app over the same database. Ctrl-C stops."
    )
    server.serve()
    return 0
