"""A rolling restart behind a real load balancer, under load.

Three gateway processes share one PostgreSQL database and one Redis, behind Debian's
nginx (retrying the next instance on a refused connection or a 502/503). A mixed load
runs through nginx the whole time: unary chat completions, two-second streams, and a
key with a per-minute limit that the load overruns on purpose. Each instance in turn gets
SIGTERM (it turns unready, drains its calls and its ledger, exits) and is started again.

Afterwards it reports: requests the clients saw fail (a failure nginx could have retried
counts too), streams that did not end with [DONE], whether every answered request has
its ledger row (per key and status), and whether the limited key got exactly its limit.

    python -m bench.rolling_restart [--seconds-between 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import yaml

from bench.perf import free_port, wait_port

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"
LOAD_KEY = "roll-load-key-00000000000"
LIMITED_KEY = "roll-limited-key-000000000"
LIMIT = 150  # requests per minute for the limited key: the load sends twice that
RESULTS = ROOT / "bench" / "results" / "rolling_restart.md"


def gateway_config(database: str, prefix: str, http_port: int, grpc_port: int) -> dict:
    path = ROOT / "server" / "base" / "default_config.yaml"
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    data["server"] = {"host": "127.0.0.1", "http_port": http_port, "grpc_port": grpc_port}
    data["storage"] = {"database_url": database, "redis_url": REDIS, "redis_prefix": prefix}
    data["operations"] = {"request_log": False, "readiness_delay_s": 1, "drain_s": 20}
    data["ledger"] = {"flush_interval_s": 0.5}
    data["keys"] = [
        {"name": "load", "kind": "api", "secret": LOAD_KEY},
        {"name": "limited", "kind": "api", "secret": LIMITED_KEY, "requests_per_minute": LIMIT},
    ]
    return data


def nginx_config(tmp: Path, port: int, upstreams: list[int]) -> Path:
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=0;\n" for p in upstreams)
    temps = "".join(f"    {k}_temp_path {tmp}/{k};\n"
                    for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))  # fmt: skip
    text = (
        f"daemon off; worker_processes 1; pid {tmp}/nginx.pid; error_log {tmp}/nginx.log warn;\n"
        "events { worker_connections 4096; }\n"
        f"http {{\n    access_log off;\n{temps}"
        f"    upstream gateways {{\n{servers}        keepalive 64;\n    }}\n"
        f"    server {{\n        listen 127.0.0.1:{port};\n"
        "        location / {\n"
        "            proxy_pass http://gateways;\n"
        "            proxy_http_version 1.1;\n"
        '            proxy_set_header Connection "";\n'
        "            proxy_buffering off;\n"
        "            proxy_read_timeout 60s;\n"
        # A refused connection or a draining instance's 503: the next one answers.
        "            proxy_next_upstream error timeout http_502 http_503 non_idempotent;\n"
        "            proxy_next_upstream_tries 3;\n"
        "        }\n    }\n}\n"
    )
    path = tmp / "nginx.conf"
    path.write_text(text)
    return path


class Instance:
    def __init__(self, tmp: Path, index: int, database: str, prefix: str) -> None:
        self.http_port, grpc_port = free_port(), free_port()
        self.config = tmp / f"gateway-{index}.yaml"
        self.config.write_text(
            yaml.safe_dump(gateway_config(database, prefix, self.http_port, grpc_port))
        )
        self.log = tmp / f"gateway-{index}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "server.cli.main", "--config", str(self.config)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log)
        try:
            wait_port(self.http_port)
        except RuntimeError:
            raise RuntimeError(self.log.read_text()[-2000:]) from None

    def stop(self) -> float:
        """SIGTERM, then the seconds until it exited (its drain)."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)
        return time.monotonic() - started


class Load:
    def __init__(self, base: str) -> None:
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        self.client = httpx.AsyncClient(base_url=base, limits=limits, timeout=60)
        self.running = True
        self.seen: Counter[tuple[str, int]] = Counter()  # (key name, status)
        self.failures: list[str] = []
        self.broken_streams = 0

    async def unary(self) -> None:
        while self.running:
            await self._call("load", LOAD_KEY, {"model": "sim-mini", "messages": _HELLO})

    async def streams(self) -> None:
        body = {"model": "sim-standard", "stream": True, "messages": _HELLO, "max_tokens": 40}
        while self.running:
            try:
                async with self.client.stream("POST", "/v1/chat/completions", json=body,
                                              headers={"x-api-key": LOAD_KEY}) as reply:  # fmt: skip
                    text = (await reply.aread()).decode()
                self.seen["load", reply.status_code] += 1
                if reply.status_code != 200:
                    self.failures.append(f"stream {reply.status_code}: {text[:120]}")
                elif not text.rstrip().endswith("data: [DONE]"):
                    self.broken_streams += 1
                    self.failures.append(f"stream ended without [DONE]: {text[-160:]}")
            except httpx.HTTPError as exc:
                self.failures.append(f"stream: {type(exc).__name__}: {exc}")

    async def limited(self, total: int, seconds: float) -> None:
        """`total` requests at a steady pace over `seconds` (inside one limit window,
        whatever each takes), so exactly LIMIT of them may pass."""
        body = {"model": "sim-mini", "messages": _HELLO}
        sent = []
        for _ in range(total):
            sent.append(asyncio.ensure_future(self._call("limited", LIMITED_KEY, body)))
            await asyncio.sleep(seconds / total)
        await asyncio.gather(*sent)

    async def _call(self, name: str, key: str, body: dict) -> None:
        try:
            reply = await self.client.post("/v1/chat/completions", json=body,
                                           headers={"x-api-key": key})  # fmt: skip
        except httpx.HTTPError as exc:
            self.failures.append(f"{name}: {type(exc).__name__}: {exc}")
            return
        self.seen[name, reply.status_code] += 1
        if reply.status_code not in (200, 429):
            self.failures.append(f"{name} {reply.status_code}: {reply.text[:120]}")


_HELLO = [{"role": "user", "content": "hello"}]


async def ledger_counts(database: str) -> Counter[tuple[str, str]]:
    db = await asyncpg.connect(database)
    try:
        rows = await db.fetch(
            "SELECT key_name, status, COUNT(*) AS n FROM usage_records GROUP BY key_name, status"
        )
    finally:
        await db.close()
    return Counter({(r["key_name"], r["status"]): r["n"] for r in rows})


async def run(between_s: float) -> str:
    name = f"gw_roll_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(PG_ADMIN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    database = f"postgresql://postgres@127.0.0.1:5432/{name}"
    prefix = f"roll:{uuid.uuid4().hex[:8]}:"
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.chmod(tmp, 0o755)  # nginx's worker reads its files
        instances = [Instance(tmp, i, database, prefix) for i in range(3)]
        for instance in instances:
            instance.start()
        port = free_port()
        conf = nginx_config(tmp, port, [i.http_port for i in instances])
        nginx = await asyncio.create_subprocess_exec(
            "nginx", "-c", str(conf), "-p", str(tmp),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_port(port)
        load = Load(f"http://127.0.0.1:{port}")
        # The restarts take about this long; the limited key's requests span it, and it
        # stays well inside one 60 s limit window.
        total_s = between_s * (len(instances) + 1) + 3 * 5
        tasks = [asyncio.ensure_future(load.unary()) for _ in range(12)]
        tasks += [asyncio.ensure_future(load.streams()) for _ in range(6)]
        tasks.append(asyncio.ensure_future(load.limited(2 * LIMIT, total_s)))
        drains = []
        try:
            await asyncio.sleep(between_s)
            for instance in instances:
                drains.append(await asyncio.to_thread(instance.stop))
                await asyncio.to_thread(instance.start)
                await asyncio.sleep(between_s)
            await tasks[-1]  # the limited key's requests all sent
        finally:
            load.running = False
            await asyncio.gather(*tasks, return_exceptions=True)
            await load.client.aclose()
            nginx.terminate()
            await nginx.wait()
            for instance in instances:
                if instance.process is not None and instance.process.poll() is None:
                    await asyncio.to_thread(instance.stop)
        ledger = await ledger_counts(database)
    admin = await asyncpg.connect(PG_ADMIN)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()
    return report(load, ledger, drains)


def report(load: Load, ledger: Counter[tuple[str, str]], drains: list[float]) -> str:
    answered = sum(load.seen.values())
    status_name = {200: "OK", 429: "RESOURCE_EXHAUSTED"}
    expected = Counter({(k, status_name.get(s, str(s))): n for (k, s), n in load.seen.items()})
    missing = {k: expected[k] - ledger[k] for k in expected if expected[k] != ledger[k]}
    lines = [
        "| what | figure |",
        "|---|---|",
        f"| requests answered through nginx | {answered} |",
        f"| failed requests (any a balancer could have retried included) | {len(load.failures)} |",
        f"| streams cut short (no [DONE]) | {load.broken_streams} |",
        f"| answered requests without their ledger row | {sum(missing.values())} |",
        f"| limited key: allowed / refused (limit {LIMIT}) | {load.seen['limited', 200]} / "
        f"{load.seen['limited', 429]} |",
        f"| drain per instance, s | {', '.join(f'{d:.1f}' for d in drains)} |",
    ]
    out = "\n".join(lines)
    if load.failures:
        out += "\n\nFailures:\n" + "\n".join(f"- {f}" for f in load.failures[:20])
    if missing:
        out += f"\n\nLedger differences (answered minus rows): {json.dumps(missing)}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-between", type=float, default=4.0)
    args = parser.parse_args()
    table = asyncio.run(run(args.seconds_between))
    print(table)
    RESULTS.write_text(
        "# Rolling restart behind nginx\n\n`python -m bench.rolling_restart` "
        f"(run {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores):\n\n{table}\n"
    )


if __name__ == "__main__":
    main()
