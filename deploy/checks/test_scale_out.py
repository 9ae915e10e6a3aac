"""Scale-out as a platform runs it: three gateway containers from the image behind
haproxy, sharing a six-node Redis Cluster and PostgreSQL behind pgbouncer in transaction
mode. A key's rate limit and budget hold exactly across the three under concurrent load;
a rolling restart of all three under load fails no request and loses no ledger row; a
Redis primary killed mid-load fails over, and the requests refused meanwhile are few and
inside the failover window. Figures are printed (`pytest -s`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest
import yaml

from deploy.checks.conftest import IMAGE, MODEL, ROUTING, free_port, state_folder, wait_ready
from tests.support.pgbouncer import pgbouncer
from tests.support.redis_nodes import cli, redis_cluster

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
LIMITED = "scale-limited-key-000000000"  # 60 requests a minute
BUDGETED = "scale-budget-key-0000000000"  # a budget of a few requests
STEADY = "scale-steady-key-0000000000"  # no limit: the load of the restarts
BUDGET_USD = 0.0005
CHAT = {"model": "sim-mini", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}


@dataclass
class Gateway:
    name: str
    http: int
    grpc: int


@dataclass
class Fleet:
    podman: list[str]
    url: str  # the balancer's
    database: str  # PostgreSQL itself, for counting rows
    redis_ports: list[int]
    gateways: list[Gateway] = field(default_factory=list)

    async def restart(self, gateway: Gateway) -> None:
        """SIGTERM (drains), then started again and ready: one step of a rolling restart."""
        await run(*self.podman, "stop", "--time", "60", gateway.name)
        await run(*self.podman, "start", gateway.name)
        await asyncio.to_thread(wait_ready, f"http://127.0.0.1:{gateway.http}")


async def run(*argv: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await process.communicate()
    assert process.returncode == 0, (argv, err.decode())


def config() -> dict[str, Any]:
    keys = [
        {"name": "limited", "kind": "api", "secret": LIMITED, "requests_per_minute": 60},
        {"name": "budgeted", "kind": "api", "secret": BUDGETED, "budget_usd": BUDGET_USD},
        {"name": "steady", "kind": "api", "secret": STEADY},
    ]
    return {
        "default_model": "sim-mini", "models": [MODEL], "routing": ROUTING, "keys": keys,
        "server": {"request_timeout_s": 60},
        # Readiness off for longer than the balancer takes to see it (300 ms checks).
        "operations": {"readiness_delay_s": 2, "drain_s": 30},
        # The bound on one storage call, above what a loaded machine takes: exactness is
        # checked here, not speed.
        "storage": {"pgbouncer": True, "timeout_s": 10},
    }  # fmt: skip


def haproxy_config(port: int, gateways: list[Gateway]) -> str:
    servers = "\n".join(
        f"  server {g.name} 127.0.0.1:{g.http} check inter 300ms fall 1 rise 1" for g in gateways
    )
    return f"""global
  maxconn 2000
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch
  retry-on conn-failure
frontend gateway
  bind 127.0.0.1:{port}
  default_backend gateways
backend gateways
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
{servers}
"""


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    name = f"gw_scale_{uuid.uuid4().hex[:10]}"
    psql = ["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-c"]
    subprocess.run([*psql, f'CREATE DATABASE "{name}"'], check=True)
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    subprocess.run([*psql, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'], check=True)


@pytest.fixture(scope="module")
def pgbouncer_url(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """pgbouncer in transaction mode in front of the database; yields its URL."""
    with pgbouncer(tmp_path_factory.mktemp("pgbouncer"), pool_size=20) as port:
        yield f"postgresql://postgres@127.0.0.1:{port}/{database.rsplit('/', 1)[1]}"


@pytest.fixture(scope="module")
def fleet(podman, database, pgbouncer_url, tmp_path_factory) -> Iterator[Fleet]:
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed (.ci/run installs it)")
    folder = tmp_path_factory.mktemp("fleet")
    with redis_cluster(folder, node_timeout_ms=2000) as redis_url:
        ports = [int(n.rsplit(":", 1)[1]) for n in redis_url.split("://", 1)[1].split(",")]
        cluster_ports = sorted(int(line.split()[1].split(":")[1].split("@")[0])
                               for line in cli(ports[0], "cluster", "nodes").splitlines())  # fmt: skip
        (folder / "gateway.yaml").write_text(yaml.safe_dump(config()))
        gateways = [Gateway(f"gw-scale-{i}-{uuid.uuid4().hex[:6]}", free_port(), free_port())
                    for i in range(3)]  # fmt: skip
        balancer = free_port()
        (folder / "haproxy.cfg").write_text(haproxy_config(balancer, gateways))
        haproxy = None
        try:
            for g in gateways:
                (folder / g.name).mkdir()
                state = state_folder(folder / g.name)
                subprocess.run(
                    [*podman, "run", "-d", "--name", g.name, "--read-only", "--network", "host",
                     "-e", f"GATEWAY_DATABASE_URL={pgbouncer_url}", "-e", f"GATEWAY_REDIS_URL={redis_url}",
                     "-v", f"{state}:/var/lib/gateway", "-v", f"{folder / 'gateway.yaml'}:/etc/gateway.yaml:ro",
                     IMAGE, "serve", "--config", "/etc/gateway.yaml", "--host", "127.0.0.1",
                     "--http-port", str(g.http), "--grpc-port", str(g.grpc)],
                    check=True, capture_output=True,
                )  # fmt: skip
            for g in gateways:
                wait_ready(f"http://127.0.0.1:{g.http}")
            haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(folder / "haproxy.cfg")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            wait_ready(f"http://127.0.0.1:{balancer}")
            yield Fleet(podman, f"http://127.0.0.1:{balancer}", database, cluster_ports, gateways)
        finally:
            if haproxy is not None:
                haproxy.terminate()
                haproxy.wait(timeout=10)
            for g in gateways:
                logs = subprocess.run([*podman, "logs", g.name], capture_output=True, text=True)
                subprocess.run([*podman, "rm", "-f", "--time", "30", g.name], capture_output=True)
                assert "Traceback" not in logs.stdout + logs.stderr, logs.stderr[-3000:]


async def burst(url: str, key: str, count: int) -> Counter[int]:
    async with httpx.AsyncClient(base_url=url, headers={"x-api-key": key}, timeout=60) as c:
        answers = await asyncio.gather(
            *(c.post("/v1/chat/completions", json=CHAT) for _ in range(count))
        )
    odd = {a.text for a in answers if a.status_code not in (200, 429)}
    assert not odd, odd
    return Counter(a.status_code for a in answers)


async def rows(database: str, key_name: str) -> tuple[int, float]:
    connection = await asyncpg.connect(database)
    try:
        found = await connection.fetchrow(
            "SELECT count(*) AS n, coalesce(sum(total_cost_usd), 0) AS usd "
            "FROM usage_records WHERE key_name = $1 AND status = 'OK'", key_name,
        )  # fmt: skip
    finally:
        await connection.close()
    return int(found["n"]), float(found["usd"])


async def settled(fleet: Fleet, key_name: str, expected: int) -> tuple[int, float]:
    """The key's ledger rows once the gateways' buffers reached the database."""
    deadline = time.monotonic() + 30
    while True:
        found = await rows(fleet.database, key_name)
        if found[0] >= expected or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


def test_a_keys_rate_limit_is_exact_across_three_replicas(fleet):
    started = time.monotonic()
    statuses = asyncio.run(burst(fleet.url, LIMITED, 150))
    took = time.monotonic() - started
    print(f"rate limit 60/min over 3 replicas, 150 at once in {took:.1f} s: {dict(statuses)}")
    # The bucket holds 60 and refills one a second while the burst lasts.
    assert set(statuses) == {200, 429} and sum(statuses.values()) == 150
    assert 60 <= statuses[200] <= 60 + int(took)


def test_a_keys_budget_is_not_overrun_across_three_replicas(fleet):
    statuses = asyncio.run(burst(fleet.url, BUDGETED, 120))
    count, spent = asyncio.run(settled(fleet, "budgeted", statuses[200]))
    print(
        f"budget ${BUDGET_USD} over 3 replicas, 120 at once: {dict(statuses)}, spent ${spent:.7f}"
    )
    assert set(statuses) <= {200, 429} and statuses[200] >= 1
    assert count == statuses[200] and spent <= BUDGET_USD


@dataclass
class Load:
    """Outcomes of a steady load, and when each failure came."""

    seen: Counter[str] = field(default_factory=Counter)
    failed_at: list[float] = field(default_factory=list)


async def steady_load(url: str, stop: asyncio.Event, workers: int = 8) -> Load:
    """Requests one after another on `workers` connections until `stop`."""
    load = Load()

    async def one_worker() -> None:
        async with httpx.AsyncClient(base_url=url, headers={"x-api-key": STEADY}, timeout=60) as c:
            while not stop.is_set():
                try:
                    outcome = str((await c.post("/v1/chat/completions", json=CHAT)).status_code)
                except httpx.HTTPError as error:
                    outcome = type(error).__name__
                load.seen[outcome] += 1
                if outcome != "200":
                    load.failed_at.append(time.monotonic())

    await asyncio.gather(*(one_worker() for _ in range(workers)))
    return load


def test_a_rolling_restart_under_load_fails_nothing_and_loses_no_row(fleet):
    async def scenario() -> Counter[str]:
        before, _ = await rows(fleet.database, "steady")
        stop = asyncio.Event()
        load = asyncio.create_task(steady_load(fleet.url, stop))
        for gateway in fleet.gateways:
            await fleet.restart(gateway)
        stop.set()
        seen = (await load).seen
        after, _ = await settled(fleet, "steady", before + seen["200"])
        seen["rows"] = after - before
        return seen

    seen = asyncio.run(scenario())
    print(f"rolling restart of 3 under load: {dict(seen)}")
    assert set(seen) == {"200", "rows"} and seen["rows"] == seen["200"] > 0


def test_a_redis_primary_killed_mid_load_fails_over_within_seconds(fleet):
    nodes = [line.split() for line in cli(fleet.redis_ports[0], "cluster", "nodes").splitlines()]
    port = {n[0]: int(n[1].split(":")[1].split("@")[0]) for n in nodes}
    victim = next(n for n in nodes if "master" in n[2])
    heir = port[next(n[0] for n in nodes if n[3] == victim[0])]  # the victim's replica
    pid = int(cli(port[victim[0]], "info", "server").split("process_id:")[1].split()[0])

    def promoted() -> bool:
        return "role:master" in cli(heir, "info", "replication")

    async def scenario() -> tuple[Load, float, float]:
        stop = asyncio.Event()
        load = asyncio.create_task(steady_load(fleet.url, stop))
        await asyncio.sleep(1)  # the load runs before the kill
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        while not promoted():
            assert time.monotonic() - killed < 60, "no failover in a minute"
            await asyncio.sleep(0.1)
        window = time.monotonic() - killed
        await asyncio.sleep(2)  # and after the failover
        stop.set()
        return await load, killed, window

    load, killed, window = asyncio.run(scenario())
    print(f"Redis primary killed under load: replica promoted in {window:.1f} s; {dict(load.seen)}")
    # Refusals only while the failover runs, or a storage call's bound (10 s) after it.
    late = [round(t - killed, 1) for t in load.failed_at if t - killed > window + 10.5]
    assert late == [] and load.seen["200"] > 0, (late, load.seen)
    assert asyncio.run(burst(fleet.url, STEADY, 30)) == Counter({200: 30})
