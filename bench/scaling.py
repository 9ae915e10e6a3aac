"""Scaling across cores: one worker against `--workers 2`, against an upstream that
costs nothing, with limits and budgets on, without and with Redis.

The upstream is the gateway's embedded simulated provider answering at once (no first
token wait, every token at once): no process of its own, so every CPU second the
gateway spends is its own. The key has a rate limit and a budget (both far above the
load), so each request pays the limiter and the budget book: across workers, the
parent's book over a Unix socket without Redis, Redis with it (a redis-server of the
bench's own, on a free port).

One worker is pinned to core 0 with wrk on core 1; two workers and wrk share both cores.
On a two-core machine wrk then takes part of the cores the workers would have, so each
row also gives the cores each party used (from /proc: the gateway's processes, wrk's as
this script's child, Redis's) and the scaling with the load generator accounted apart:
requests per gateway CPU second times the cores the workers may use, against one
worker's (2 x one worker's CPU per request over two workers'). That assumes a worker is
bound by its CPU, which the row's gateway cores show.

After each gateway's runs, a key limited to 60 requests a minute is asked 100 times,
each on a new connection (so the kernel spreads them over the workers): exactly 60 must
be answered, the rest refused with 429.

`--netns` runs the whole bench in a network namespace of its own (`unshare -n`, its
loopback brought up): ports, connections and loopback traffic apart from other jobs.

    python -m bench.scaling [--seconds 5] [--connections 32 64] [--rounds 2] [--no-redis]
    python -m bench.scaling --quick             # a smoke test: 2 s runs, 32 conns, 1 round
    python -m bench.scaling --netns --quick     # the same in a namespace of its own
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from bench import load_checks as checks
from bench import payloads
from bench.load_servers import KEY, ROOT, Server, free_port, start, wait_port
from bench.load_tools import core_busy_seconds, cpu_seconds, peak_memory_mb, run_wrk

RESULTS = Path(__file__).resolve().parent / "results"
MODEL = "sim"
LIMITED_KEY = "bench-limited-key-000000000"
LIMITED_RPM = 60
CORES = {1: "0", 2: "0,1"}
WRK_CORES = {1: "1", 2: "0,1"}
IN_NETNS = "BENCH_SCALING_NETNS"


def gateway_config(tmp: Path, name: str, redis_url: str | None) -> dict:
    simulated = {"id": "sim-1", "type": "primary", "adapter": "simulated",
                 "params": {"ttft_ms": 0, "tokens_per_second": 0, "min_reply_tokens": 20,
                            "max_reply_tokens": 20}}  # fmt: skip
    storage: dict = {"sqlite_path": str(tmp / f"{name}.db")}
    if redis_url:
        storage["redis_url"] = redis_url
    return {
        "server": {"host": "127.0.0.1", "grpc_port": free_port(), "http_port": free_port()},
        "storage": storage,
        "models": [{"id": MODEL, "owned_by": "bench", "created": 0,
                    "price": {"input": 1, "output": 2}, "providers": [simulated]}],
        "routing": {"profiles": {p: [MODEL] for p in ("economy", "balanced", "quality")}},
        "keys": [
            {"name": "bench", "kind": "api", "secret": KEY,
             "requests_per_minute": 100_000_000, "budget_usd": 1_000_000},
            {"name": "limited", "kind": "api", "secret": LIMITED_KEY,
             "requests_per_minute": LIMITED_RPM},
        ],
    }  # fmt: skip


class Gateway:
    def __init__(self, tmp: Path, workers: int, redis_url: str | None) -> None:
        self.workers = workers
        self.name = f"{workers} worker{'s' if workers > 1 else ''}" + (
            ", Redis" if redis_url else ""
        )
        slug = f"gw{workers}{'r' if redis_url else ''}"
        config = gateway_config(tmp, slug, redis_url)
        path = tmp / f"{slug}.yaml"
        path.write_text(yaml.safe_dump(config))
        self.port = config["server"]["http_port"]
        self.ledger = Path(config["storage"]["sqlite_path"])
        argv = [sys.executable, "-m", "server.cli.main", "serve", "--config", str(path)]
        argv += ["--log-level", "WARNING", "--workers", str(workers)]
        self.server = start(slug, argv, CORES[workers], tmp)
        wait_port(self.port, self.server.proc, slug, 60)
        wait_workers(self.server.pid, workers)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"


def wait_workers(pid: int, workers: int, timeout_s: float = 60) -> None:
    """Until each worker answers (a parent with N workers has N children listening)."""
    from bench.load_tools import process_tree

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(process_tree(pid)) >= workers + 1 or workers == 1:
            break
        time.sleep(0.1)
    time.sleep(0.5)  # the last one's listening socket


def start_redis(tmp: Path) -> tuple[Server, str] | None:
    if shutil.which("redis-server") is None:
        print("scaling: no redis-server on PATH: leaving the Redis rows out", file=sys.stderr)
        return None
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(tmp)]  # fmt: skip
    server = start("redis", argv, "0,1", tmp)
    wait_port(port, server.proc, "redis", 20)
    return server, f"redis://127.0.0.1:{port}"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(gw: Gateway, redis: Server | None, mode: str, connections: int, seconds: int) -> dict:
    stream = mode == "stream"
    body = json.dumps({**payloads.chat("hello", MODEL, stream), "stream": stream}).encode()
    headers = {"x-api-key": KEY}
    cores = CORES[gw.workers]
    run_wrk(gw.url, body, headers, connections, 1, WRK_CORES[gw.workers])  # warm-up
    before = checks.settled_ledger(gw.ledger)
    gateway0, wrk0 = cpu_seconds([gw.server.pid]), children_cpu()
    redis0 = cpu_seconds([redis.pid]) if redis else 0.0
    busy0 = sum(core_busy_seconds(c) for c in cores.split(","))
    load = run_wrk(gw.url, body, headers, connections, seconds, WRK_CORES[gw.workers])
    gateway = cpu_seconds([gw.server.pid]) - gateway0
    wrk = children_cpu() - wrk0
    redis_s = (cpu_seconds([redis.pid]) - redis0) if redis else 0.0
    busy = sum(core_busy_seconds(c) for c in cores.split(",")) - busy0
    after = checks.settled_ledger(gw.ledger)
    wall = load.seconds or seconds
    ours = gateway + redis_s + (wrk if gw.workers > 1 else 0)
    return {
        "target": gw.name,
        "workers": gw.workers,
        "mode": mode,
        "connections": connections,
        "requests": load.requests,
        "requests_per_s": round(load.rate, 1),
        "p50_ms": load.p50_ms,
        "p99_ms": load.p99_ms,
        "errors": load.socket_errors
        + load.status_errors
        + sum(checks.ledger_errors(before, after).values()),
        "cpu_ms_per_request": round(gateway * 1000 / load.requests, 3) if load.requests else None,
        "gateway_cores": round(gateway / wall, 2),
        "load_generator_cores": round(wrk / wall, 2),
        "redis_cores": round(redis_s / wall, 2),
        "other_cores": round(max(0.0, busy - ours) / wall, 2),
        "peak_memory_mb": round(peak_memory_mb([gw.server.pid]), 1),
    }


def limits_exact(gw: Gateway, asks: int = 100) -> dict:
    """`asks` requests of the limited key, each on a new connection: how many passed."""
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}).encode()
    passed = refused = other = 0
    for _ in range(asks):
        request = urllib.request.Request(
            gw.url, data=body,
            headers={"content-type": "application/json", "x-api-key": LIMITED_KEY,
                     "connection": "close"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()
                passed += 1
        except urllib.error.HTTPError as exc:
            refused += exc.code == 429
            other += exc.code != 429
    return {"asked": asks, "limit": LIMITED_RPM, "answered": passed, "refused_429": refused,
            "other": other, "exact": passed == LIMITED_RPM and other == 0}  # fmt: skip


def quietest(rows: list[dict]) -> dict[tuple, dict]:
    """Per (target, mode, connections): the round with the least other work."""
    chosen: dict[tuple, dict] = {}
    for r in rows:
        cell = (r["target"], r["mode"], r["connections"])
        if cell not in chosen or r["other_cores"] < chosen[cell]["other_cores"]:
            chosen[cell] = r
    return chosen


def markdown(raw: dict) -> str:
    chosen = quietest(raw["results"])
    lines = [
        "# Scaling across cores",
        "",
        f"Command: `{raw['command']}` ({raw['started']}; {raw['seconds']} s per run after a "
        f"1 s warm-up{', in a network namespace of its own' if raw['netns'] else ''}).",
        "",
        "The embedded simulated provider answers at once (20 tokens); the key has a rate",
        "limit and a budget. One worker on core 0, wrk on core 1; two workers and wrk on",
        "both cores. **cores**: CPU seconds per second of the gateway's processes, wrk's",
        "and Redis's; **other**: the cores' busy time left over (other jobs, kernel work).",
        "**x 1 worker**: requests/s over one worker's (same mode, connections and Redis or",
        "not); **accounted apart**: requests per gateway CPU second times the cores the",
        "workers may use, over one worker's (the load generator and Redis left out).",
        "",
        "| mode | conns | gateway | req/s | p50 ms | p99 ms | errors | CPU ms/req "
        "| gateway cores | wrk cores | Redis cores | other | peak MB | x 1 worker "
        "| accounted apart |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (target, mode, conns), r in chosen.items():
        one = next((o for (t, m, c), o in chosen.items() if m == mode and c == conns
                    and o["workers"] == 1 and ("Redis" in t) == ("Redis" in target)), None)  # fmt: skip
        ratio = apart = "-"
        if one and one is not r and one["requests_per_s"] and r["cpu_ms_per_request"]:
            ratio = f"{r['requests_per_s'] / one['requests_per_s']:.2f}x"
            apart = f"{r['workers'] * one['cpu_ms_per_request'] / r['cpu_ms_per_request']:.2f}x"
        cpu = "-" if r["cpu_ms_per_request"] is None else f"{r['cpu_ms_per_request']:.3f}"
        lines.append(
            f"| {mode} | {conns} | {target} | {r['requests_per_s']:.0f} | {r['p50_ms']:.2f} "
            f"| {r['p99_ms']:.2f} | {r['errors']} | {cpu} | {r['gateway_cores']:.2f} "
            f"| {r['load_generator_cores']:.2f} | {r['redis_cores']:.2f} "
            f"| {r['other_cores']:.2f} | {r['peak_memory_mb']:.0f} | {ratio} | {apart} |"
        )
    lines += ["", "Limits across workers (a key of 60 requests a minute, asked 100 times, "
              "each on a new connection):", ""]  # fmt: skip
    for name, check in raw["limits"].items():
        verdict = "exact" if check["exact"] else "NOT exact"
        lines.append(f"- {name}: {check['answered']} answered, {check['refused_429']} refused "
                     f"with 429, {check['other']} other ({verdict})")  # fmt: skip
    return "\n".join(lines) + "\n"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="whole seconds per run")
    parser.add_argument("--connections", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--modes", nargs="+", choices=["unary", "stream"],
                        default=["unary", "stream"])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-redis", action="store_true", help="leave the Redis rows out")
    parser.add_argument("--netns", action="store_true", help="in a network namespace of its own")
    parser.add_argument("--quick", action="store_true", help="2 s runs, 32 conns, one round")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.connections, args.rounds = 2, [32], 1
    return args


def in_namespace() -> None:
    """Runs this command again inside a new network namespace with its loopback up."""
    argv = [sys.executable, "-m", "bench.scaling", *sys.argv[1:]]
    script = "ip link set lo up && exec " + " ".join(map(repr, argv))
    env = {**os.environ, IN_NETNS: "1"}
    done = subprocess.run(["unshare", "-n", "sh", "-c", script], cwd=ROOT, env=env, check=False)
    sys.exit(done.returncode)


def main() -> None:
    args = parse_args()
    if args.netns and not os.environ.get(IN_NETNS):
        in_namespace()
    started = time.time()
    results, limits = [], {}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scaling-")))
        redis = None if args.no_redis else start_redis(tmp)
        if redis:
            stack.callback(redis[0].stop)
        gateways = []
        for redis_url in [None] + ([redis[1]] if redis else []):
            for workers in (1, 2):
                # A Redis database of each gateway's own: their limiters must not share.
                gw = Gateway(tmp, workers, redis_url and f"{redis_url}/{workers}")
                stack.callback(gw.server.stop)
                gateways.append(gw)
        for round_ in range(1, args.rounds + 1):
            for mode in args.modes:
                for connections in args.connections:
                    for gw in gateways:
                        print(f"scaling: {mode:6} c={connections:<3} round {round_} {gw.name}")
                        server = redis[0] if redis and "Redis" in gw.name else None
                        row = measure(gw, server, mode, connections, args.seconds)
                        results.append(row | {"round": round_})
        for gw in gateways:
            limits[gw.name] = limits_exact(gw)
    raw = {
        "command": "python -m bench.scaling " + " ".join(sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": args.seconds,
        "netns": bool(os.environ.get(IN_NETNS)),
        "results": results,
        "limits": limits,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scaling.json").write_text(json.dumps(raw, indent=2) + "\n")
    text = markdown(raw)
    (args.out / "scaling.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
