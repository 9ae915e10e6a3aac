"""Browser pages on other origins (CORS): off unless configured; when configured, a
preflight is answered before any key check, an allowed origin gets the CORS headers on
every answer (errors and streams included) with the headers a page needs to read, and
any other origin gets none. Proved in headless chromium with a page on another origin
that calls the gateway with fetch, streaming included."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from server.base.config import ConfigError, parse
from tests.integration.ops.test_admin_page import chromium_or_skip
from tests.support.gateways import API_KEY, default_config_dict, running_gateway

PAGE_ORIGIN_HOST = "127.0.0.1"
CHAT = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


@asynccontextmanager
async def gateway_allowing(*origins: str) -> AsyncIterator[httpx.AsyncClient]:
    data = default_config_dict()
    if origins:
        data["server"]["cors"] = {"allow_origins": list(origins)}
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        yield http


def preflight(origin: str, method: str = "POST") -> dict[str, str]:
    return {
        "origin": origin,
        "access-control-request-method": method,
        "access-control-request-headers": "authorization, content-type, x-stainless-os",
    }


async def test_off_unless_configured() -> None:
    async with gateway_allowing() as http:
        answer = await http.options("/v1/chat/completions", headers=preflight("http://a.test"))
        assert answer.status_code == 405
        ok = await http.post("/v1/chat/completions", json=CHAT,
                             headers={"origin": "http://a.test", "x-api-key": API_KEY})  # fmt: skip
        assert ok.status_code == 200 and "access-control-allow-origin" not in ok.headers


async def test_an_allowed_origin_gets_a_preflight_and_headers_on_every_answer() -> None:
    origin = "http://app.test:3000"
    async with gateway_allowing(origin) as http:
        answer = await http.options("/v1/chat/completions", headers=preflight(origin))
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == origin
        assert "POST" in answer.headers["access-control-allow-methods"]
        allowed = answer.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed and "x-stainless-os" in allowed
        assert answer.headers["access-control-max-age"] == "600"
        assert "access-control-allow-credentials" not in answer.headers
        headers = {"origin": origin, "authorization": f"Bearer {API_KEY}"}
        for response in (
            await http.post("/v1/chat/completions", json=CHAT, headers=headers),
            await http.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers),
            await http.post("/v1/chat/completions", json=CHAT, headers={"origin": origin}),
            await http.get("/v1/models", headers=headers),
        ):
            assert response.headers["access-control-allow-origin"] == origin
            exposed = response.headers["access-control-expose-headers"].lower()
            assert "x-request-id" in exposed and "retry-after" in exposed
            assert "x-should-retry" in exposed
            assert "x-ratelimit-remaining-requests" in exposed
        assert response.status_code == 200
        other = preflight("http://evil.test")
        refused = await http.options("/v1/chat/completions", headers=other)
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers
        plain = await http.post("/v1/chat/completions", json=CHAT,
                                headers={**headers, "origin": "http://evil.test"})  # fmt: skip
        assert "access-control-allow-origin" not in plain.headers


def test_an_origin_with_a_path_is_a_config_error() -> None:
    data = default_config_dict()
    data["server"]["cors"] = {"allow_origins": ["https://app.test/chat"]}
    with pytest.raises(ConfigError, match=r"server\.cors\.allow_origins.*is not an origin"):
        parse(data, "test config")


PAGE = """<!doctype html><title>app</title><script>
async function run(base, key) {
  const headers = {"authorization": "Bearer " + key, "content-type": "application/json"};
  const body = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4};
  const whole = await fetch(base + "/v1/chat/completions",
                            {method: "POST", headers, body: JSON.stringify(body)});
  const reply = await whole.json();
  const stream = await fetch(base + "/v1/chat/completions", {method: "POST", headers,
      body: JSON.stringify({...body, stream: true})});
  const reader = stream.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    text += decoder.decode(value, {stream: true});
  }
  return {status: whole.status, content: reply.choices[0].message.content,
          requestId: whole.headers.get("x-request-id"),
          remaining: whole.headers.get("x-ratelimit-remaining-requests"),
          streamed: text};
}
</script>"""


async def serve_page(port_holder: list[int]) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = PAGE.encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: "
                     + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)  # fmt: skip
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, PAGE_ORIGIN_HOST, 0)
    port_holder.append(server.sockets[0].getsockname()[1])
    return server


@pytest.mark.browser
async def test_a_page_on_another_origin_calls_the_gateway_with_fetch() -> None:
    executable = chromium_or_skip()
    from playwright.async_api import async_playwright

    port: list[int] = []
    page_server = await serve_page(port)
    origin = f"http://{PAGE_ORIGIN_HOST}:{port[0]}"
    data = default_config_dict()
    data["server"]["cors"] = {"allow_origins": [origin]}
    data["keys"][0]["requests_per_minute"] = 600
    try:
        async with running_gateway(data) as gw, async_playwright() as pw:
            # The gateway on "localhost", the page on 127.0.0.1: two origins.
            base = f"http://localhost:{gw.http_port}"
            browser = await pw.chromium.launch(
                executable_path=executable,
                args=["--headless", "--no-sandbox", "--disable-gpu",
                      "--disable-background-networking"],
            )  # fmt: skip
            try:
                page = await browser.new_page()
                await page.goto(origin)
                result = await page.evaluate("([b, k]) => run(b, k)", [base, API_KEY])
                # The same page from an origin not allowed: the browser refuses the answer.
                await page.goto(f"http://localhost:{port[0]}")
                denied = await page.evaluate(
                    "([b, k]) => run(b, k).then(() => 'ok', e => String(e))",
                    [f"http://127.0.0.1:{gw.http_port}", API_KEY],
                )
            finally:
                await browser.close()
    finally:
        page_server.close()
    assert result["status"] == 200 and result["content"].startswith("(simulated)")
    assert result["requestId"] and result["remaining"] is not None
    events = [e for e in result["streamed"].split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[0].removeprefix("data: "))["choices"][0]["delta"]["role"]
    assert "TypeError" in denied or "Failed to fetch" in denied
