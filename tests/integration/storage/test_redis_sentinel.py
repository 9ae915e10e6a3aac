"""`redis+sentinel://`: the gateway finds the primary through its Sentinels (passing
over one that is down), and after a failover writes its limits to the new primary."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.support.gateways import running_gateway
from tests.support.redis_nodes import cli, redis_sentinel, wait_until
from tests.support.shared_state import config_with

pytestmark = pytest.mark.redis

SECRET = "sentinel-key-000000000000"
HELLO = {"model": "sim-mini", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 5}


async def test_limits_follow_the_primary_through_a_failover(tmp_path):
    prefix = f"gwtest:{uuid.uuid4().hex[:8]}:"
    with redis_sentinel(tmp_path) as nodes:
        data = config_with(redis_url=nodes.url, redis_prefix=prefix)
        data["keys"].append(
            {"name": "limited", "kind": "api", "secret": SECRET, "requests_per_minute": 1000}
        )
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30,
                headers={"authorization": f"Bearer {SECRET}"},
            ) as http,
        ):  # fmt: skip
            reply = await http.post("/v1/chat/completions", json=HELLO)
            assert reply.status_code == 200, reply.text
            assert cli(nodes.primary, "--scan", "--pattern", f"{prefix}*")

            cli(nodes.sentinel, "sentinel", "failover", nodes.service)
            wait_until(lambda: nodes.primary_now() == nodes.replica, "the failover")
            wait_until(
                lambda: "role:master" in cli(nodes.replica, "info", "replication"),
                "the replica's promotion",
            )
            # The old primary turns replica: the gateway's connections to it now meet
            # READONLY, and must find the new one.
            wait_until(
                lambda: "role:slave" in cli(nodes.primary, "info", "replication"),
                "the old primary's demotion",
            )

            def updated() -> str:
                """When the key's rate-limit bucket on the new primary last changed."""
                [bucket] = cli(nodes.replica, "--scan", "--pattern", f"{prefix}rl:*:b").split()
                return cli(nodes.replica, "hget", bucket, "at")

            before = updated()  # replicated before the failover
            # The first request after it is served, no refusal, and its count is written
            # to the new primary (the old one takes no writes now).
            reply = await http.post("/v1/chat/completions", json=HELLO)
            assert reply.status_code == 200, reply.text
            assert updated() != before
