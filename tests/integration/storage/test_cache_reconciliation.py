"""Under a mixed concurrent load (prompt-cache reads and writes from two kinds of
upstream, response-cache hits and misses, unary and streamed, two dialects), the usage
each caller got, the ledger's rows and the metrics agree to the token and the cent:
nothing is counted twice and nothing is lost."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from typing import Any

import httpx
import pytest

from tests.support.gateways import running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

PROMPTS = [f"Question {i}: what is {i} squared?" for i in range(6)]


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def ask(http: httpx.AsyncClient, model_id: str, prompt: str, how: str) -> dict[str, Any]:
    """One request; returns the usage the caller got (in chat completions' terms)."""
    messages = [{"role": "user", "content": prompt}]
    if how == "messages":
        reply = await http.post("/v1/messages", headers={"anthropic-version": "2023-06-01"},
                                json={"model": model_id, "max_tokens": 40, "temperature": 0,
                                      "messages": messages})  # fmt: skip
        assert reply.status_code == 200, reply.text
        u = reply.json()["usage"]
        return {"prompt": u["input_tokens"] + u["cache_read_input_tokens"]
                + u["cache_creation_input_tokens"], "completion": u["output_tokens"],
                "read": u["cache_read_input_tokens"], "write": u["cache_creation_input_tokens"],
                "cost": u.get("total_cost_usd", 0), "hit": u.get("response_cached", False)}  # fmt: skip
    body = {"model": model_id, "messages": messages, "temperature": 0, "max_tokens": 40}
    if how == "stream":
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    reply = await http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    if how == "stream":
        last = [line for line in reply.text.split("\n\n") if line.startswith("data: {")][-1]
        u = json.loads(last[6:])["usage"]
    else:
        u = reply.json()["usage"]
    details = u["prompt_tokens_details"]
    return {"prompt": u["prompt_tokens"], "completion": u["completion_tokens"],
            "read": details["cached_tokens"], "write": details.get("cache_write_tokens", 0),
            "cost": u["total_cost_usd"], "hit": u.get("response_cached", False)}  # fmt: skip


@pytest.mark.postgres
async def test_usage_ledger_and_metrics_agree_under_a_mixed_load(pg_url):
    anthropic_usage = Usage(prompt_tokens=900, cached_tokens=600, cache_write_tokens=200,
                            cache_write_1h_tokens=50)  # fmt: skip
    async with (
        serving(AnthropicWire(), usage=anthropic_usage) as an,
        serving(OpenAIWire(), usage=Usage(prompt_tokens=700, cached_tokens=512)) as oa,
    ):
        data = with_models(
            model("claude-ish", provider("an-p", "anthropic", an.url)),
            model("gpt-ish", provider("oa-p", "openai", oa.url)),
        )
        data["storage"] |= {"database_url": pg_url}
        # A key of this run's own: the shared database holds other tests' rows too.
        name = f"reconcile-{uuid.uuid4().hex[:8]}"
        secret = f"sk-{name}-0000000000"
        data["keys"].append({"name": name, "kind": "api", "secret": secret})
        data["response_cache"] = {"keys": ["*"]}
        plan = [(m, p, how) for m in ("claude-ish", "gpt-ish") for p in PROMPTS
                for how in ("unary", "stream", "messages")] * 2  # fmt: skip
        random.Random(5).shuffle(plan)
        async with running_gateway(data) as gw:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{gw.http_port}", timeout=20,
                headers={"authorization": f"Bearer {secret}"},
            ) as http:  # fmt: skip
                got = []
                for batch in range(0, len(plan), 12):
                    got += await asyncio.gather(
                        *(ask(http, *job) for job in plan[batch : batch + 12])
                    )
                metrics = (await http.get("/metrics")).text
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT * FROM usage_records WHERE key_name = ?", name
            )
    hits = sum(u["hit"] for u in got)
    assert 0 < hits < len(got), "the load has response-cache hits and misses"
    assert len(rows) == len(got)
    assert sum(r["response_cached"] for r in rows) == hits
    assert sum(r["prompt_tokens"] for r in rows) == sum(u["prompt"] for u in got)
    assert sum(r["completion_tokens"] for r in rows) == sum(u["completion"] for u in got)
    assert sum(r["cached_tokens"] for r in rows) == sum(u["read"] for u in got)
    assert sum(r["cache_write_tokens"] for r in rows) == sum(u["write"] for u in got)
    assert sum(r["total_cost_usd"] for r in rows) == pytest.approx(sum(u["cost"] for u in got))
    # A hit reads no upstream prompt cache, writes none and costs nothing.
    assert all(r["cached_tokens"] == r["cache_write_tokens"] == 0 and r["total_cost_usd"] == 0
               for r in rows if r["response_cached"])  # fmt: skip
    assert (
        sum(r["cached_tokens"] for r in rows) > 0 and sum(r["cache_write_tokens"] for r in rows) > 0
    )
    assert metric(metrics, "gateway_response_cache_total", result="hit") == hits
    assert metric(metrics, "gateway_response_cache_total", result="miss") == len(got) - hits
    assert metric(metrics, "gateway_prompt_cache_tokens_total", kind="read") == sum(
        u["read"] for u in got
    )
    assert metric(metrics, "gateway_prompt_cache_tokens_total", kind="write") == sum(
        u["write"] for u in got
    )
    assert metric(metrics, "gateway_cost_usd_total") == pytest.approx(sum(u["cost"] for u in got))
