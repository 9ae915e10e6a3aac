"""The admin page with 500 stored keys in headless chromium, in a 400 px window: one page
of keys at a time (served by ListKeys), search, a selection that survives the 2-second
refresh, a key created, revoked and rotated from the page (each secret shown once),
organisations and teams with their budgets, a budget alert, the audit log, and nothing
wider than the window. Screenshots in build/screenshots/."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.integration.ops.test_admin_page import SHOTS, chromium_or_skip
from tests.support.gateways import eventually, running_gateway
from tests.support.shared_state import ADMIN_KEY, MAX_TOKENS, config_with, reservation

KEYS = 500
SECRET = re.compile(r"gw-api-\S+")


@pytest.mark.browser
async def test_five_hundred_keys_in_a_narrow_window(tmp_path) -> None:  # type: ignore[no-untyped-def]
    executable = chromium_or_skip()
    from playwright.async_api import async_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    async with running_gateway(config_with(sqlite_path=str(tmp_path / "gw.db"))) as gw:
        for i in range(KEYS):
            await gw.gateway.store.keys.create(kind="api", name=f"svc-{i:03d}", owner="ops")
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base, headers={"x-admin-key": ADMIN_KEY}) as admin:
            org = await admin.post("/v1/admin/orgs", json={"name": "acme",
                                   "limits": {"budget_usd": 250}})  # fmt: skip
            assert org.status_code == 200, org.text
            team = await admin.post("/v1/admin/teams", json={
                "org_id": org.json()["org"]["id"], "name": "search"})  # fmt: skip
            assert team.status_code == 200, team.text
            # A key (the 501st) that spends half its budget or more: a budget alert.
            made = await admin.post("/v1/admin/keys", json={
                "name": "alerted", "kind": "api", "budget_usd": round(reservation() * 2, 9)})  # fmt: skip
            secret = made.json()["secret"]
            for _ in range(4):
                answer = await admin.post(
                    "/v1/chat/completions", headers={"authorization": f"Bearer {secret}"},
                    json={"model": "sim-pro", "max_tokens": MAX_TOKENS,
                          "messages": [{"role": "user", "content": "hello"}]},
                )  # fmt: skip
                if answer.status_code != 200:
                    break

            async def alerted() -> None:
                traffic = (await admin.get("/v1/admin/traffic")).json()
                assert any(a["name"] == "alerted" for a in traffic.get("budget_alerts", []))

            await eventually(alerted, timeout_s=10)
        async with async_playwright() as pw, httpx.AsyncClient(base_url=base) as http:
            browser = await pw.chromium.launch(
                executable_path=executable, args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            try:
                page = await browser.new_page(viewport={"width": 400, "height": 900})
                await page.goto(f"{base}/admin")
                await page.fill("#key", ADMIN_KEY)
                await page.click("#login button")
                await page.wait_for_selector(f"#keys-count:has-text('1–50 of {KEYS + 1}')")
                assert await page.locator("#keys tbody tr").count() == 50
                # Organisations and teams with their budgets; the audit log's changes.
                await page.wait_for_selector("#teams tr:has-text('acme') >> text=$250.00")
                assert "search" in await page.inner_text("#teams")
                await page.wait_for_selector("#audit tr:has-text('team.create')")
                assert "org.create" in await page.inner_text("#audit")
                await page.wait_for_selector("#alerts tr:has-text('alerted') >> text=50%")
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= 400, width
                await page.screenshot(path=str(SHOTS / "admin-keys-400px.png"), full_page=True)

                await page.click("#keys-next")
                await page.wait_for_selector(f"#keys-count:has-text('51–100 of {KEYS + 1}')")
                await page.fill("#key-query", "svc-04")
                await page.wait_for_selector("#keys-count:has-text('1–10 of 10')")

                # A key id selected for copying stays selected across refreshes.
                key_id = await page.inner_text("#keys tbody tr:first-child .id")
                await page.evaluate(
                    """() => { const range = document.createRange();
                    range.selectNodeContents(document.querySelector("#keys tbody tr .id"));
                    getSelection().removeAllRanges(); getSelection().addRange(range); }"""
                )
                before = await page.inner_text("#status")
                await page.wait_for_function(
                    "(before) => document.querySelector('#status').textContent !== before "
                    "&& document.querySelector('#status').textContent.startsWith('updated')",
                    arg=before,
                )
                assert await page.evaluate("getSelection().toString()") == key_id

                # Created from the page: the secret is shown once and works.
                await page.fill("#new-name", "fresh-key")
                await page.click("#key-create button")
                await page.wait_for_selector("#secret:has-text('fresh-key')")
                match = SECRET.search(await page.inner_text("#secret"))
                assert match is not None
                secret = match.group(0)
                headers = {"x-api-key": secret}
                assert (await http.get("/v1/models", headers=headers)).status_code == 200
                await page.fill("#key-query", "fresh-key")
                await page.wait_for_selector("#keys-count:has-text('1–1 of 1')")
                await page.screenshot(path=str(SHOTS / "admin-keys-created.png"), full_page=True)

                # Revoked from the page: gone from the list, refused by the gateway.
                await page.click("#keys tbody tr:has-text('fresh-key') button:has-text('Revoke')")
                await page.wait_for_selector("#keys-count:has-text('no keys')")
                assert (await http.get("/v1/models", headers=headers)).status_code == 401
                await page.check("#key-revoked")
                await page.wait_for_selector("#keys tbody tr:has-text('revoked')")

                # Rotated: a new secret, shown once; the old one stops.
                await page.fill("#key-query", "svc-006")
                await page.wait_for_selector("#keys-count:has-text('1–1 of 1')")
                await page.click("#keys tbody tr:has-text('svc-006') button:has-text('Rotate')")
                await page.wait_for_selector("#secret:has-text('svc-006')")
                rotated = SECRET.search(await page.inner_text("#secret"))
                assert rotated is not None and rotated.group(0) != secret
                fresh = {"x-api-key": rotated.group(0)}
                assert (await http.get("/v1/models", headers=fresh)).status_code == 200

                # Another visit shows no secret.
                await page.reload()
                await page.wait_for_selector(f"#keys-count:has-text('1–50 of {KEYS + 1}')")
                assert await page.is_hidden("#secret")
                assert rotated.group(0) not in await page.content()
                await page.set_viewport_size({"width": 1280, "height": 1000})
                await page.screenshot(path=str(SHOTS / "admin-keys-wide.png"), full_page=True)
            finally:
                await browser.close()
