"""Shadow traffic: a model's calls also go to its candidate (`shadow: {model, share}`),
through the openai SDK whole and streamed; each candidate call is a ledger row of its
own beside the original, billed to the operator account (never to the caller's usage),
with the comparison `GET /v1/admin/shadow?model=` reports; a candidate that fails
every call never touches the caller."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import openai

from tests.support.facade import set_params
from tests.support.gateways import eventually, running_gateway
from tests.support.shared_state import ADMIN_KEY, config_with

KEY = "gw-shadowed-api-key-000001"
HELLO: Any = [{"role": "user", "content": "Say hello."}]
CALLS = 6


def shadow_config() -> dict[str, Any]:
    data = config_with()
    data["keys"].append({"name": "shadowed", "kind": "api", "secret": KEY})
    # sim-pro's candidate: a copy of sim-standard whose every provider fails.
    broken = copy.deepcopy(next(m for m in data["models"] if m["id"] == "sim-standard"))
    broken["id"] = "sim-broken"
    for provider in broken["providers"]:
        provider["id"] = provider["id"].replace("standard", "broken")
    data["models"].append(broken)
    set_params(data, "sim-broken", error_rate=1.0)
    for model in data["models"]:
        if model["id"] == "sim-mini":
            model["shadow"] = {"model": "sim-standard", "share": 1.0, "compare": "exact"}
        if model["id"] == "sim-pro":
            model["shadow"] = {"model": "sim-broken", "share": 1.0}
    data["operations"] = {"request_log": False}
    return data


async def test_shadow_rows_are_counted_compared_and_never_billed_to_the_caller() -> None:
    async with running_gateway(shadow_config()) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
        admin = {"x-admin-key": ADMIN_KEY}
        async with sdk, httpx.AsyncClient(base_url=base, timeout=30) as http:
            texts = []
            for i in range(CALLS):
                model = "sim-mini" if i % 2 == 0 else "sim-pro"
                if i % 3 == 0:  # streamed
                    stream = await sdk.chat.completions.create(
                        model=model, messages=HELLO, max_tokens=8, stream=True
                    )
                    texts.append(
                        "".join(
                            [c.choices[0].delta.content or "" async for c in stream if c.choices]
                        )
                    )
                else:
                    reply = await sdk.chat.completions.create(
                        model=model, messages=HELLO, max_tokens=8
                    )
                    texts.append(reply.choices[0].message.content or "")
            # Every caller was answered, the failing candidate notwithstanding.
            assert all(texts), texts

            async def reported(model: str) -> dict[str, Any]:
                answer = await http.get("/v1/admin/shadow", headers=admin, params={"model": model})
                assert answer.status_code == 200, answer.text
                report = answer.json()
                assert report.get("calls", 0) == CALLS // 2, report
                return report

            mini = await eventually(lambda: reported("sim-mini"), timeout_s=10)
            pro = await eventually(lambda: reported("sim-pro"), timeout_s=10)

            # The caller's usage holds its own calls only.
            usage = (await http.get("/v1/usage", headers={"x-api-key": KEY})).json()
            assert int(usage["total"]["requests"]) == CALLS, usage
            missing = await http.get("/v1/admin/shadow", headers=admin)
            assert missing.status_code == 400 and "model" in missing.text

        rows = await gw.gateway.store.db.fetch(
            "SELECT key_id, model, status, shadow_of, shadow_agrees FROM usage_records "
            "WHERE shadow_of <> ''"
        )
        originals = await gw.gateway.store.db.fetch(
            "SELECT request_id FROM usage_records WHERE key_name = 'shadowed'"
        )

    # sim-standard, given the same prompt, answers as sim-mini does (the simulator's
    # text depends on the request alone): exact agreement on every call.
    assert mini["compared"] == mini["agreed"] == CALLS // 2, mini
    assert mini["agreement_rate"] == 1.0 and mini["candidate"]["model"] == "sim-standard"
    assert mini["candidate"]["total_tokens"] > 0 and mini["original"]["total_tokens"] > 0
    # The broken candidate: every call an error, nothing compared.
    assert pro["candidate"]["errors"] == CALLS // 2 and pro.get("compared", 0) == 0
    assert pro["original"].get("errors", 0) == 0
    # Beside the original: one candidate row per call, billed to the operator account.
    assert {r["key_id"] for r in rows} == {"operator:shadow"}
    assert sorted(r["shadow_of"] for r in rows) == sorted(r["request_id"] for r in originals)
    assert {r["model"] for r in rows if r["status"] != "OK"} == {"sim-broken"}
