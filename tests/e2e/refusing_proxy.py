"""A pass-through proxy in front of a real server that refuses what some providers refuse.

llama.cpp's server accepts everything (json_schema, unknown parameters), so to prove that the
client negotiates with providers that do not, this proxy answers as OpenAI and Groq do: 400 to
``response_format`` of type json_schema and to the parameters it is told to refuse, naming them,
and forwards everything else untouched. It counts what it refused and what it forwarded.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from aiohttp import ClientSession, web


class RefusingProxy:
    def __init__(self, upstream: str, *, refuse_json_schema: bool = True, refuse_params: tuple[str, ...] = ()) -> None:
        self.upstream = upstream.rstrip("/")
        self.refuse_json_schema = refuse_json_schema
        self.refuse_params = refuse_params
        self.counts: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.base_url = ""

    def _refusal(self, message: str, param: str) -> web.Response:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
        return web.json_response(body, status=400)

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        format_type = (body.get("response_format") or {}).get("type")
        if self.refuse_json_schema and format_type == "json_schema":
            self.counts["refused response_format"] += 1
            return self._refusal(
                "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
                "response_format",
            )
        for param in self.refuse_params:
            if param in body:
                self.counts[f"refused {param}"] += 1
                return self._refusal(f"Unsupported parameter: '{param}' is not supported with this model.", param)
        self.counts["forwarded"] += 1
        async with self._session.post(self.upstream + "/chat/completions", json=body) as upstream:
            return web.Response(body=await upstream.read(), status=upstream.status, content_type="application/json")

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._session = ClientSession()
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._chat)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]
            self.base_url = f"http://127.0.0.1:{port}/v1"
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def __enter__(self) -> RefusingProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            await self._session.close()
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
