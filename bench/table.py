"""The table gateways are compared by: fixed request rates and maximum rate, added
latency percentiles, requests/s, CPU and memory, for each API the gateway serves.

The way the published benches of other gateways measure: an instant upstream (nginx,
answering each API's own format as bench.perf's does), the gateway on one core, and for
each call

- fixed-rate runs (`--rates`, default 500, 1,000 and 2,000 requests/s) with hey
  (`-q`, spread over `--rate-connections` workers, 32 by default), and
- maximum-rate runs at `--connections` (10 and 32) with wrk and bench/load_post.lua,

each the same load sent to nginx directly first, so that the **added** p50, p90 and p99
are the gateway's (its percentile minus the upstream's at the same load). CPU % is the
gateway process's CPU time over the run's wall time (100% is its one core), RSS its
peak resident memory. Calls: chat completions (OpenAI upstream), Messages (Anthropic
upstream), Responses (a Responses API upstream) and Gemini's generateContent (Gemini
upstream), unary and streamed (20 events), each relayed as the gateway serves them.

Writes bench/results/table.md (a markdown table to paste into docs/performance.md)
and table.json.

    python -m bench.table [--seconds 5] [--rates 500 1000 2000] [--connections 10 32]
    python -m bench.table --quick --out /tmp/table    # a smoke test: 2 s runs, 500 req/s, c=10
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import payloads, perf
from bench.load_tools import LOAD_CORE, cpu_seconds, peak_memory_mb, percentile, run_wrk

RESULTS = Path(__file__).resolve().parent / "results"
GATEWAY_CORE = "0"
MODES = ("unary", "stream")


@dataclass
class Call:
    """One API: where nginx answers it directly, and the gateway's URL and body."""

    name: str
    upstream_path: dict[str, str]  # by mode, under nginx's root
    gateway_url: dict[str, str]  # by mode, under the gateway's root
    body: dict[str, bytes]


def calls(kinds: list[str]) -> list[Call]:
    def both(make: Callable[[bool], Any]) -> dict[str, Any]:
        return {mode: make(mode == "stream") for mode in MODES}

    gemini_body = json.dumps(payloads.gemini("hello")).encode()
    every = {
        "chat": Call(
            "chat completions",
            {m: f"/{m}/v1/chat/completions" for m in MODES},
            both(lambda _s: "/v1/chat/completions"),
            both(lambda s: perf.body(s).encode()),
        ),
        "messages": Call(
            "Messages",
            {m: f"/anthropic-{m}/v1/messages" for m in MODES},
            both(lambda _s: "/v1/messages"),
            both(lambda s: perf.messages_body(s, anthropic=True).encode()),
        ),
        "responses": Call(
            "Responses",
            {m: f"/responses-{m}/v1/responses" for m in MODES},
            both(lambda _s: "/v1/responses"),
            both(lambda s: perf.responses_body(s, store=False, native=True).encode()),
        ),
        "gemini": Call(
            "Gemini generateContent",
            {
                "unary": "/gemini-unary/models/bench:generateContent",
                "stream": "/gemini-stream/models/bench:streamGenerateContent",
            },
            both(lambda s: perf.gemini_url(0, s, native=True).split(":0", 1)[1]),
            both(lambda _s: gemini_body),
        ),
    }
    return [every[k] for k in kinds]


@dataclass
class Run:
    requests: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    errors: int


def run_hey(url: str, body: bytes, rate: int, connections: int, seconds: int) -> Run:
    """A fixed-rate run: hey's `connections` workers, each at rate/connections per second,
    on the load core; percentiles from every request's time (hey's CSV, 0.1 ms steps)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as body_file:
        body_file.write(body)
        body_file.flush()
        argv = ["taskset", "-c", LOAD_CORE, "hey", "-z", f"{seconds}s", "-c", str(connections),
                "-q", f"{rate / connections:.3f}", "-m", "POST", "-D", body_file.name,
                "-T", "application/json", "-H", f"x-api-key: {perf.KEY}", "-o", "csv", url]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"hey failed ({done.returncode}): {done.stderr[-500:]}")
    rows = [line.split(",") for line in done.stdout.splitlines()[1:] if line]
    times = sorted(float(row[0]) * 1000 for row in rows)
    errors = sum(1 for row in rows if not row[6].startswith("2"))
    return Run(
        len(rows) - errors,
        float(seconds),
        percentile(times, 50),
        percentile(times, 90),
        percentile(times, 99),
        errors,
    )


def run_max(url: str, body: bytes, connections: int, seconds: int) -> Run:
    load = run_wrk(url, body, {"x-api-key": perf.KEY}, connections, seconds)
    errors = load.socket_errors + load.status_errors
    return Run(load.requests, load.seconds, load.p50_ms, load.p90_ms, load.p99_ms, errors)


def measure(
    args: argparse.Namespace, upstream: int, gateway: int, pid: int, call: Call, mode: str
) -> list[dict]:
    loads = [("rate", r) for r in args.rates] + [("max", c) for c in args.connections]
    rows = []
    for kind, level in loads:

        def one(url: str, seconds: int, kind: str = kind, level: int = level) -> Run:
            if kind == "rate":
                return run_hey(url, call.body[mode], level, args.rate_connections, seconds)
            return run_max(url, call.body[mode], level, seconds)

        direct = f"http://127.0.0.1:{upstream}{call.upstream_path[mode]}"
        through = f"http://127.0.0.1:{gateway}{call.gateway_url[mode]}"
        print(f"table: {call.name:24} {mode:6} {kind} {level}")
        one(through, 1)  # warm-up
        base = one(direct, args.seconds)
        cpu0 = cpu_seconds([pid])
        run = one(through, args.seconds)
        cpu = cpu_seconds([pid]) - cpu0
        rows.append({
            "call": call.name, "mode": mode, "load": kind, "level": level,
            "requests_per_s": round(run.requests / run.seconds, 1) if run.seconds else 0.0,
            "p50_ms": run.p50_ms, "p90_ms": run.p90_ms, "p99_ms": run.p99_ms,
            "added_p50_ms": round(run.p50_ms - base.p50_ms, 3),
            "added_p90_ms": round(run.p90_ms - base.p90_ms, 3),
            "added_p99_ms": round(run.p99_ms - base.p99_ms, 3),
            "upstream_p50_ms": base.p50_ms,
            "errors": run.errors,
            "cpu_pct": round(cpu * 100 / run.seconds, 1) if run.seconds else None,
            "cpu_ms_per_request": round(cpu * 1000 / run.requests, 3) if run.requests else None,
            "rss_mb": round(peak_memory_mb([pid]), 1),
        })  # fmt: skip
    return rows


def markdown(raw: dict) -> str:
    lines = [
        "# The comparison table",
        "",
        f"Command: `{raw['command']}` ({raw['started']}; {raw['seconds']} s per run after a "
        "1 s warm-up). One gateway worker on core 0; nginx (the upstream, answering at once) "
        f"and the load generator on core 1. Fixed rates: hey, {raw['rate_connections']} "
        "workers; max: wrk, closed loop. Added pNN: the gateway's pNN minus nginx's alone "
        "at the same load. CPU %: the gateway's CPU time over the run (100% = its one "
        "core); RSS: its peak resident memory.",
        "",
        "| call | mode | load | req/s | added p50 ms | added p90 ms | added p99 ms "
        "| errors | CPU % | CPU ms/req | RSS MB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in raw["results"]:
        load = f"{r['level']:,} req/s" if r["load"] == "rate" else f"max, {r['level']} conns"
        cpu = "-" if r["cpu_ms_per_request"] is None else f"{r['cpu_ms_per_request']:.3f}"
        lines.append(
            f"| {r['call']} | {r['mode']} | {load} | {r['requests_per_s']:,.0f} "
            f"| {r['added_p50_ms']:+.2f} | {r['added_p90_ms']:+.2f} | {r['added_p99_ms']:+.2f} "
            f"| {r['errors']} | {r['cpu_pct']:.0f} | {cpu} | {r['rss_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="whole seconds per run")
    parser.add_argument("--rates", type=int, nargs="*", default=[500, 1000, 2000])
    parser.add_argument("--rate-connections", type=int, default=32, help="hey's workers")
    parser.add_argument("--connections", type=int, nargs="*", default=[10, 32])
    parser.add_argument("--calls", nargs="+", choices=["chat", "messages", "responses", "gemini"],
                        default=["chat", "messages", "responses", "gemini"])  # fmt: skip
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--quick", action="store_true", help="2 s runs, 500 req/s and c=10 only")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rates, args.connections = 2, [500], [10]
    return args


def main() -> None:
    args = parse_args()
    missing = [tool for tool in ("hey", "wrk", "nginx", "taskset") if shutil.which(tool) is None]
    if missing:
        sys.exit(
            f"table: missing {', '.join(missing)}; on Debian: apt-get install -y hey wrk nginx"
        )
    started = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="bench-table-"))
    nginx, upstream = perf.start_nginx(tmp, LOAD_CORE)
    gateway = None
    try:
        gateway, port, _grpc = perf.start_gateway(
            tmp, upstream, 1, GATEWAY_CORE, limits=False, log=tmp / "gateway.log"
        )
        results = [
            row
            for call in calls(args.calls)
            for mode in args.modes
            for row in measure(args, upstream, port, gateway.pid, call, mode)
        ]
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(30)
        nginx.terminate()
        nginx.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    raw = {
        "command": "python -m bench.table " + shlex.join(sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": args.seconds,
        "rate_connections": args.rate_connections,
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.json").write_text(json.dumps(raw, indent=2) + "\n")
    text = markdown(raw)
    (args.out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
