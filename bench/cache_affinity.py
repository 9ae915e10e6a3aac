"""What cache affinity saves: a multi-turn agent workload against one model served by
several simulated providers, each with a prompt cache of its own (a prefix cache with
a TTL, cached input at a tenth of the price). Every conversation resends a shared
system prompt and a context of its own. Two ways of serving the model:

- spread: three providers with equal weights share the traffic (as behind a load
  balancer or several keys and regions for throughput);
- failover: a primary that fails a share of requests and a backup.

Each runs through two gateways in one run, affinity off and on; the table gives the
prompt-cache hit rate (cached prompt tokens over all prompt tokens, from the
upstreams' usage) and the cost, both from the gateway's metrics.

Run: python -m bench.cache_affinity [--conversations N] [--turns N] [--error-rate R]
Writes bench/results/cache_affinity.md.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateways import API_KEY, default_config_dict, running_gateway

RESULTS = Path(__file__).resolve().parent / "results" / "cache_affinity.md"
SYSTEM = "You are a coding agent. Follow the repository's conventions. " * 120
PRICE = {"input": 3.0, "output": 15.0, "cached_input": 0.3}


def providers(scenario: str, error_rate: float) -> list[dict[str, Any]]:
    fast = {"ttft_ms": 0, "tokens_per_second": 0, "prompt_cache_ttl_s": 300}
    if scenario == "spread":
        return [{"id": name, "type": "primary" if name == "a" else "backup",
                 "adapter": "simulated", "params": fast, "weight": 1}
                for name in ("a", "b", "c")]  # fmt: skip
    return [
        {"id": "primary", "type": "primary", "adapter": "simulated",
         "params": {**fast, "error_rate": error_rate}},
        {"id": "backup", "type": "backup", "adapter": "simulated", "params": fast},
    ]  # fmt: skip


def config(scenario: str, error_rate: float, affinity: bool) -> dict[str, Any]:
    data = default_config_dict()
    data["models"].append({"id": "agent", "owned_by": "bench", "created": 0, "price": PRICE,
                           "providers": providers(scenario, error_rate)})  # fmt: skip
    data["affinity"] = {"enabled": affinity}
    return data


async def conversation(http: httpx.AsyncClient, number: int, turns: int) -> None:
    # Each task brings its own context (the files the agent read), resent every turn.
    context = f"Task {number}: fix the failing test. Files: " + f"module_{number}.py ... " * 400
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": context}]
    for turn in range(turns):
        body = {"model": "agent", "messages": messages, "max_tokens": 40}
        reply = await http.post("/v1/chat/completions", json=body)
        reply.raise_for_status()
        said = reply.json()["choices"][0]["message"]["content"]
        messages += [{"role": "assistant", "content": said},
                     {"role": "user", "content": f"Tool output {turn}: 3 tests pass."}]  # fmt: skip


def total(metrics: str, name: str, **labels: str) -> float:
    found = 0.0
    for line in metrics.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            found += float(line.rsplit(" ", 1)[1])
    return found


async def run(
    scenario: str, error_rate: float, affinity: bool, conversations: int, turns: int
) -> dict[str, float]:
    random.seed(7)
    async with running_gateway(config(scenario, error_rate, affinity)) as gw:
        headers = {"authorization": f"Bearer {API_KEY}"}
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{gw.http_port}", headers=headers, timeout=30
        ) as http:
            await asyncio.gather(*(conversation(http, n, turns) for n in range(conversations)))
            metrics = (await http.get("/metrics")).text
    read = total(metrics, "gateway_prompt_cache_tokens_total", kind="read")
    prompt = read + total(metrics, "gateway_prompt_cache_tokens_total", kind="uncached")
    hits = {r: total(metrics, "gateway_cache_affinity_total", result=r)
            for r in ("hit", "moved", "miss")}  # fmt: skip
    return {"hit_rate": read / prompt, "cost": total(metrics, "gateway_cost_usd_total"),
            "prompt": prompt, **hits}  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--error-rate", type=float, default=0.3)
    args = parser.parse_args()
    lines = [
        "# Cache affinity",
        "",
        f"{args.conversations} conversations x {args.turns} turns, a "
        f"{len(SYSTEM) // 4}-token system prompt and a context per conversation; "
        f"spread: three providers of equal weight; failover: the primary fails "
        f"{args.error_rate:.0%} of requests; prices {PRICE} USD per million tokens; "
        "`python -m bench.cache_affinity`.",
        "",
        "| serving | affinity | prompt-cache hit rate | cost (USD) | affinity hit / moved / miss |",
        "|---|---|---:|---:|---|",
    ]
    saved = []
    for scenario in ("spread", "failover"):
        rows = {}
        for affinity in (False, True):
            row = await run(scenario, args.error_rate, affinity, args.conversations, args.turns)
            rows[affinity] = row
            outcome = f"{row['hit']:.0f} / {row['moved']:.0f} / {row['miss']:.0f}"
            lines.append(f"| {scenario} | {'on' if affinity else 'off'} | "
                         f"{row['hit_rate']:.1%} | {row['cost']:.4f} | {outcome} |")  # fmt: skip
        saved.append(f"{scenario}: affinity on costs {rows[True]['cost'] / rows[False]['cost']:.2f}x "
                     f"of affinity off.")  # fmt: skip
    lines += ["", *saved, ""]
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
