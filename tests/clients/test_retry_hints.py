"""`x-should-retry` through the official SDKs, which obey it over their own rule by status:
a 429 for a spent budget is not asked again (their rule alone would retry it), an
overloaded gateway is (their rule alone would too), on the OpenAI, Anthropic and
Responses dialects alike. Each request the SDK sends is counted on its own HTTP client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from tests.support.facade import set_params
from tests.support.gateways import API_KEY, default_config_dict, running_gateway

HELLO: Any = [{"role": "user", "content": "Say hello."}]
SPENT = "gw-spent-budget-key-00000"
RETRIES = 2


@pytest.fixture(scope="module")
async def base_url() -> AsyncIterator[str]:
    data = default_config_dict()
    # A key whose budget nothing fits; sim-standard fails on every provider, at once.
    data["keys"].append({"name": "spent", "kind": "api", "secret": SPENT, "budget_usd": 0})
    set_params(data, "sim-standard", error_rate=1.0)
    async with running_gateway(data) as gw:
        yield f"http://127.0.0.1:{gw.http_port}"


def counting(http: Any = httpx) -> tuple[Any, list[int]]:
    """An HTTP client of the SDK's HTTP library (the anthropic SDK's is httpx2) that notes
    the status of every answer it gets."""
    statuses: list[int] = []

    async def note(response: Any) -> None:
        statuses.append(response.status_code)

    return http.AsyncClient(event_hooks={"response": [note]}), statuses


async def test_a_spent_budget_is_asked_once_by_the_openai_sdk(base_url: str) -> None:
    http, statuses = counting()
    sdk = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=SPENT, max_retries=RETRIES,
                             http_client=http)  # fmt: skip
    async with sdk:
        with pytest.raises(openai.RateLimitError) as refused:
            await sdk.chat.completions.create(model="sim-mini", messages=HELLO)
        assert refused.value.response.headers["x-should-retry"] == "false"
        with pytest.raises(openai.RateLimitError):
            await sdk.responses.create(model="sim-mini", input="Say hello.")
    assert statuses == [429, 429]


async def test_a_spent_budget_is_asked_once_by_the_anthropic_sdk(base_url: str) -> None:
    http, statuses = counting(httpx2)
    sdk = anthropic.AsyncAnthropic(base_url=base_url, api_key=SPENT, max_retries=RETRIES,
                                   http_client=http)  # fmt: skip
    async with sdk:
        with pytest.raises(anthropic.RateLimitError):
            await sdk.messages.create(model="sim-mini", max_tokens=50, messages=HELLO)
    assert statuses == [429]


async def test_an_unavailable_model_is_asked_again(base_url: str) -> None:
    http, statuses = counting(httpx2)
    sdk = anthropic.AsyncAnthropic(base_url=base_url, api_key=API_KEY, max_retries=RETRIES,
                                   http_client=http)  # fmt: skip
    async with sdk:
        with pytest.raises(anthropic.APIStatusError) as failed:
            await sdk.messages.create(model="sim-standard", max_tokens=50, messages=HELLO)
    assert failed.value.response.headers["x-should-retry"] == "true"
    assert len(statuses) == 1 + RETRIES and statuses[0] >= 500
