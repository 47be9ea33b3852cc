"""`hbtui serve` keeps everyone else out: a real server process, real HTTP and websocket requests.

The app it serves starts paid runs and writes `.env`; without the printed secret, from another
host name (DNS rebinding) or from another site's page (Origin), every route answers 403 and
nothing else. The browser tier (tests/browser) drives the same server from Chromium.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import aiohttp
import httpx
import pytest

from tests.cli.test_cli import clean_env, hbtui
from tests.support.served import ServedApp

KEY = "fake-proj-served-app-key-1234567890abcdef"
ROUTES = ["/", "/ws", "/static/js/textual.js", "/download/anything"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    (folder / ".env").write_text(f"BASE_URL=http://127.0.0.1:9/v1\nAPI_KEY={KEY}\nMODEL_TEST=m\nMODEL_GRADER=g\n")
    with ServedApp(folder / "runs" / "hbtui.sqlite", cwd=folder, env=clean_env()) as app:
        yield app


def get(served: ServedApp, path: str, *, host: str | None = None, **kwargs) -> httpx.Response:
    headers = {"Host": host or f"127.0.0.1:{served.port}", **kwargs.pop("headers", {})}
    return httpx.get(f"{served.base}{path}", headers=headers, follow_redirects=False, timeout=30, **kwargs)


def cookie(served: ServedApp, secret: str | None = None) -> dict[str, str]:
    return {"Cookie": f"hbtui-serve-{served.port}={secret or served.secret}"}


@pytest.mark.parametrize("path", ROUTES)
def test_every_route_refuses_a_request_without_the_secret_or_with_a_wrong_one(served, path):
    for headers in ({}, cookie(served, "not-the-secret"), {"Cookie": "hbtui-serve-1=" + served.secret}):
        response = get(served, path, headers=headers)
        assert response.status_code == 403
        assert response.text == "forbidden: open the URL that `hbtui serve` printed\n"


def test_the_printed_url_trades_its_secret_for_a_strict_http_only_cookie_and_drops_it_from_the_address(served):
    response = get(served, f"/?key={served.secret}")
    assert response.status_code == 302 and response.headers["Location"] == "/"
    set_cookie = response.headers["Set-Cookie"]
    assert set_cookie.startswith(f"hbtui-serve-{served.port}={served.secret};")
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
    page = get(served, "/", headers=cookie(served))
    assert page.status_code == 200 and 'id="terminal"' in page.text
    assert served.secret not in page.text
    assert get(served, "/static/js/textual.js", headers=cookie(served)).status_code == 200


def test_the_page_gives_the_keyboard_to_the_terminal_once_it_exists(served):
    """Issue 25, item 6: after load the focus was on the page's body and the first keys were lost
    until a click. The browser tier presses keys with no click; this checks the page holds it."""
    page = get(served, "/", headers=cookie(served))
    script = page.text[page.text.index("<script>\n(function () {") :]
    assert ".xterm-helper-textarea" in script and "focus()" in script and "MutationObserver" in script
    assert page.text.index("function focusTerminal") > page.text.index('id="terminal"')


def test_the_page_derives_its_websocket_and_static_urls_from_the_request_so_a_tunnel_on_another_port_works(served):
    page = get(served, "/", host="localhost:9000", headers=cookie(served))
    assert page.status_code == 200
    assert 'data-session-websocket-url="ws://localhost:9000/ws"' in page.text
    assert 'src="http://localhost:9000/static/js/textual.js"' in page.text
    assert f":{served.port}" not in page.text


@pytest.mark.parametrize("path", ROUTES)
def test_another_host_name_is_refused_even_with_the_secret_so_dns_rebinding_gets_nothing(served, path):
    response = get(served, path, host=f"attacker.example:{served.port}", headers=cookie(served))
    assert response.status_code == 403


@pytest.mark.parametrize("path", ["/", "/ws"])
def test_another_sites_page_is_refused_even_with_the_secret(served, path):
    headers = {**cookie(served), "Origin": "http://attacker.example"}
    assert get(served, path, headers=headers).status_code == 403


def test_a_websocket_without_an_origin_is_refused(served):
    # Browsers always send one; a request without it comes from something that is not a page.
    assert get(served, "/ws", headers=cookie(served)).status_code == 403


async def test_the_websocket_runs_the_app_and_the_configured_key_never_reaches_the_page(served):
    received = bytearray()
    origin = f"http://127.0.0.1:{served.port}"
    url = f"ws://127.0.0.1:{served.port}/ws?width=100&height=30"
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url, headers={**cookie(served), "Origin": origin}) as websocket:
            # The empty database's app opens on the configuration screen, whose key field is set.
            async def read_until_the_configuration_screen() -> None:
                while b"API key" not in received or b"Model" not in received:
                    message = await websocket.receive()
                    if message.type == aiohttp.WSMsgType.BINARY:
                        received.extend(message.data)
                    elif message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                        return

            await asyncio.wait_for(read_until_the_configuration_screen(), timeout=60)
    assert b"API key" in received
    assert KEY.encode() not in received and KEY[-8:].encode() not in received


def test_a_host_other_machines_can_reach_needs_an_explicit_flag(tmp_path):
    result = hbtui("serve", "--host", "0.0.0.0", "--port", "0", cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("hbtui: error: --host 0.0.0.0 would let other machines reach the app")
    assert "--expose" in result.stderr


def test_an_exposed_host_is_served_with_a_warning(tmp_path):
    with ServedApp(tmp_path / "hbtui.sqlite", "--host", "0.0.0.0", "--expose", env=clean_env()) as served:
        assert served.process is not None and served.process.stderr is not None
        warning = served.process.stderr.readline()
        assert warning.startswith("hbtui: warning: serving on 0.0.0.0, reachable from other machines")
        # From another machine the page is addressed by this machine's address or its name; a
        # name of somebody else's is still refused (an address cannot be rebound, a name can).
        for host in ("192.0.2.7", socket.gethostname()):
            assert get(served, "/", host=f"{host}:{served.port}", headers=cookie(served)).status_code == 200
        assert get(served, "/", host=f"attacker.example:{served.port}", headers=cookie(served)).status_code == 403


@pytest.mark.parametrize(
    ("port", "problem"), [("70000", "70000 is not a port (0 to 65535)"), ("http", "'http' is not a port number")]
)
def test_a_port_that_is_none_is_one_line(tmp_path, port, problem):
    result = hbtui("serve", "--port", port, cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert result.stderr == f"hbtui: error: argument --port: {problem} (see `hbtui serve --help`)\n"


def test_a_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = hbtui("serve", "--port", str(port), cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert result.stderr == f"hbtui: error: port {port} is in use on 127.0.0.1: choose another with --port\n"


# ---- requests aiohttp cannot read, and the limit on tabs ---------------------------------------


async def raw_request(port: int, request: bytes) -> tuple[int, bytes]:
    """A request as sent, byte for byte (no client adds a Host header): its status and body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=30)  # the server closes after a 400
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_a_request_without_a_host_header_is_400_in_one_line_and_prints_no_traceback(tmp_path):
    with ServedApp(tmp_path / "hbtui.sqlite", env=clean_env()) as served:
        for request in (
            b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
            f"GET /ws?key={served.secret} HTTP/1.1\r\nConnection: close\r\n\r\n".encode(),
            b"GET / HTTP/1.0\r\n\r\n",
        ):
            status, body = asyncio.run(raw_request(served.port, request))
            assert status == 400, (request, body)
            assert b"Host" in body and body.strip().count(b"\n") == 0, body
        assert get(served, "/", headers=cookie(served)).status_code == 200  # and it serves on
    assert served.process is not None and served.process.stderr is not None
    stderr = served.process.stderr.read()
    assert "Traceback" not in stderr and "Error handling request" not in stderr, stderr


def app_processes(served: ServedApp) -> int:
    """The tabs' apps the server runs: its child processes."""
    assert served.process is not None
    pid = served.process.pid
    return len(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


async def open_tab(served: ServedApp, session: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse:
    origin = f"http://127.0.0.1:{served.port}"
    return await session.ws_connect(
        f"ws://127.0.0.1:{served.port}/ws?width=100&height=30", headers={**cookie(served), "Origin": origin}
    )


async def terminal_text(websocket: aiohttp.ClientWebSocketResponse, until: bytes) -> bytes:
    """What the tab's terminal is sent, until ``until`` shows or the socket closes."""
    received = bytearray()
    while until not in received:
        message = await asyncio.wait_for(websocket.receive(), timeout=60)
        if message.type == aiohttp.WSMsgType.BINARY:
            received.extend(message.data)
        elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            break
    return bytes(received)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts the server's child processes in /proc")
async def test_a_tab_past_serve_max_tabs_gets_a_page_saying_why_and_a_closed_tab_frees_its_place(tmp_path):
    (tmp_path / ".env").write_text(f"BASE_URL=http://127.0.0.1:9/v1\nAPI_KEY={KEY}\nMODEL_TEST=m\nMODEL_GRADER=g\n")
    full = "2 tabs of hbtui are open, as many as SERVE_MAX_TABS=2 allows"
    with ServedApp(tmp_path / "hbtui.sqlite", env=clean_env({"SERVE_MAX_TABS": "2"})) as served:
        async with aiohttp.ClientSession() as session:
            first, second = await open_tab(served, session), await open_tab(served, session)
            for tab in (first, second):
                assert b"API key" in await terminal_text(tab, until=b"API key")  # its app runs
            assert app_processes(served) == 2

            page = await asyncio.to_thread(get, served, "/", headers=cookie(served))
            assert page.status_code == 503 and page.headers["Content-Type"].startswith("text/html")
            assert "<title>hbtui: no tab free</title>" in page.text
            assert full in page.text and "raise SERVE_MAX_TABS (1 to 256) in .env or the environment" in page.text
            # A page loaded while a place was free, whose websocket comes once none is: told on its terminal.
            third = await open_tab(served, session)
            refusal = await terminal_text(third, until=b"\x00never")
            assert full.encode() in refusal and b"close one and reload this page" in refusal
            assert third.closed and third.close_code == 1013  # try again later
            assert app_processes(served) == 2  # no app started for it

            await first.close()
            deadline = asyncio.get_running_loop().time() + 30
            while (await asyncio.to_thread(get, served, "/", headers=cookie(served))).status_code != 200:
                assert asyncio.get_running_loop().time() < deadline, "the closed tab's place was never freed"
                await asyncio.sleep(0.2)
            fourth = await open_tab(served, session)
            assert b"API key" in await terminal_text(fourth, until=b"API key")
            assert app_processes(served) == 2
            await asyncio.gather(second.close(), fourth.close())


def test_a_tab_limit_out_of_its_range_is_one_line(tmp_path):
    result = hbtui("serve", "--port", "0", cwd=tmp_path, env_extra={"SERVE_MAX_TABS": "0"}, timeout=30)
    assert result.returncode == 2
    assert result.stderr == "hbtui: error: SERVE_MAX_TABS (environment): 0 is outside 1 to 256\n"
