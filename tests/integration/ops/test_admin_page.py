"""The admin page: its data (AdminService.GetDashboard) and the page itself in headless
chromium, with screenshots in build/screenshots/."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import grpc
import httpx
import pytest
from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import admin_service_pb2_grpc

from tests.support.gateways import API_KEY, ROUTER_KEY, running_gateway
from tests.support.shared_state import ADMIN, ADMIN_KEY, AdminClient, config_with

ROOT = Path(__file__).resolve().parents[3]
SHOTS = ROOT / "build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"


def busy_config(tmp_path) -> dict:  # type: ignore[no-untyped-def]
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    # sim-pro's primary always fails: its circuit opens and its error rate shows.
    data["models"][2]["providers"][0]["params"]["error_rate"] = 1
    data["models"][2]["providers"][0]["breaker"] = {"failure_threshold": 1, "cooldown_s": 600}
    # Each profile's first model serves, whatever the prompt.
    data["routing"]["policy"] = "ordered"
    return data


async def traffic(base: str, budget_key: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=10) as rest:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        for model in ("sim-mini", "sim-mini", "sim-standard", "sim-pro"):
            reply = await rest.post(
                "/v1/chat/completions", json={**body, "model": model},
                headers={"x-api-key": budget_key},
            )  # fmt: skip
            assert reply.status_code == 200, reply.text
        for profile in ("economy", "quality"):
            reply = await rest.post(
                "/v1/infer", json={"prompt": "hi", "profile": profile},
                headers={"x-router-key": ROUTER_KEY},
            )  # fmt: skip
            assert reply.status_code == 200


async def test_dashboard_data(tmp_path):
    async with (
        running_gateway(busy_config(tmp_path)) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        key_id, secret = await AdminClient(channel).create("team-a", budget_usd=1.0)
        await traffic(f"http://127.0.0.1:{gw.http_port}", secret)
        board = await admin_service_pb2_grpc.AdminServiceStub(channel).GetDashboard(
            admin_pb.GetDashboardRequest(), metadata=ADMIN
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin_service_pb2_grpc.AdminServiceStub(channel).GetDashboard(
                admin_pb.GetDashboardRequest(), metadata=(("x-admin-key", API_KEY),)
            )
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    providers = {p.id: p for p in board.providers}
    assert len(providers) == 16  # the eight models' primaries and backups
    broken = providers["sim-pro-primary"]
    assert (broken.requests, broken.errors, broken.error_rate) == (2, 2, 1.0)
    assert not broken.HasField("mean_latency_ms") and broken.health == "open"
    assert providers["sim-mini-primary"].requests == 3  # two chats and the economy route
    assert providers["sim-mini-primary"].mean_latency_ms > 0
    assert {m.id: (m.input, m.output) for m in board.models}["sim-pro"] == (5.0, 20.0)
    keys = {k.name: k for k in board.keys}
    team = keys["team-a"]
    assert team.id == key_id and team.requests == 4 and team.cost_usd > 0
    assert team.remaining_usd == pytest.approx(1.0 - team.cost_usd)
    assert not keys["dev-api"].HasField("budget_usd")
    assert [(r.profile, r.model) for r in board.routes] == [
        ("quality", "sim-pro"),  # served by sim-pro's backup
        ("economy", "sim-mini"),
    ]
    assert len(board.minutes) == 60
    assert sum(m.requests for m in board.minutes) >= 7
    assert sum(m.cost_usd for m in board.minutes) > 0


def chromium_or_skip() -> str:
    if shutil.which(CHROMIUM) or os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")


@pytest.mark.browser
async def test_admin_page_in_headless_chromium(tmp_path):
    executable = chromium_or_skip()
    from playwright.async_api import async_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    async with running_gateway(busy_config(tmp_path)) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            _, secret = await AdminClient(channel).create("team-a", budget_usd=0.5)
        await traffic(base, secret)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=executable,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                ],
            )
            try:
                page = await browser.new_page(viewport={"width": 1280, "height": 1000})
                await page.goto(f"{base}/admin")
                await page.wait_for_selector("#login:not([hidden])")
                await page.fill("#key", API_KEY)  # not an admin key
                await page.click("#login button")
                await page.wait_for_selector("#login-error:has-text('refused')")
                assert await page.is_hidden("#board")  # no data shown without a key
                await page.screenshot(path=str(SHOTS / "admin-refused.png"))

                await page.fill("#key", ADMIN_KEY)
                await page.click("#login button")
                await page.wait_for_selector("#providers tbody tr:nth-child(8)")
                assert await page.is_hidden("#login")
                providers = await page.inner_text("#providers")
                assert "sim-pro-primary" in providers and "100.0%" in providers
                assert await page.locator("#providers .badge.open").count() == 1
                models = await page.inner_text("#models")
                assert "sim-pro" in models and "0.075" in models
                keys = await page.inner_text("#keys")
                assert "team-a" in keys
                routes = await page.inner_text("#routes")
                assert "economy" in routes and "quality" in routes
                bars = page.locator("#requests-chart rect")
                assert await bars.count() == 60
                heights = [float(await bars.nth(i).get_attribute("height") or 0) for i in range(60)]
                assert max(heights) > 0
                assert ADMIN_KEY not in await page.content()
                await page.screenshot(path=str(SHOTS / "admin.png"), full_page=True)

                # Disabling a provider from the page takes effect in the gateway at once.
                await page.click("button[data-provider='sim-mini-backup']")
                await page.wait_for_selector(
                    "#providers tr:has-text('sim-mini-backup') .badge.disabled"
                )
                upstream = gw.gateway.live.current.catalog.upstreams["sim-mini"][1]
                assert upstream.id == "sim-mini-backup" and not upstream.config.enabled
                await page.screenshot(path=str(SHOTS / "admin-disabled.png"), full_page=True)
            finally:
                await browser.close()
