"""Load benchmark: the gateway against an instant nginx upstream and the LiteLLM proxy.

In one run, alternating targets at each connection count, it measures:

- baseline: nginx serving a fixed chat completion and a fixed 20-chunk SSE stream, hit
  directly;
- the REST facade in-process, through the `openai` adapter to that nginx;
- the REST facade as an edge tier (`--grpc-target`) over a gRPC-only gateway process;
- the gRPC API (ChatService) under h2load with a prepared gRPC body;
- the LiteLLM proxy (pinned version, own virtualenv, one worker) on the same upstream;
- Portkey's open-source gateway (pinned npm package in build/portkey, Node, one process)
  on the same upstream, routed by its headers; a mode whose sample request fails (its
  streams on Node 20) is reported as failing rather than loaded;
- the floor of a proxy on the gateway's stack (bench/proxy_floor.py: uvicorn and the
  gateway's upstream client, nothing between them), so the ratio LiteLLM's CPU over the
  floor's bounds what any gateway built this way could show.

Gateway processes and LiteLLM run on core 0 (`taskset`); nginx, wrk and h2load on
core 1. Writes bench/results/load.md and bench/results/load.json.

Run: python -m bench.load [--duration S] [--connections 1 32 64] [--rounds N] [--no-litellm]
     python -m bench.load --quick --out /tmp/load  # a smoke test: 2 s runs, 1 and 32 conns
     python -m bench.load --payload agent --out bench/results/agent  # a coding agent's turn
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench import load_checks as checks
from bench import load_report as report
from bench import load_servers as servers
from bench import payloads
from bench.load_servers import GATEWAY_CORE
from bench.load_tools import (
    Load,
    core_busy_seconds,
    cpu_seconds,
    missing_tools,
    peak_memory_mb,
    run_h2load,
    run_wrk,
)

MODES = ("unary", "stream")
GRPC_PATHS = {
    "unary": "/gateway.v1.ChatService/CreateChatCompletion",
    "stream": "/gateway.v1.ChatService/StreamChatCompletion",
}
GRPC_HEADERS = {"content-type": "application/grpc", "te": "trailers"}


@dataclass
class Target:
    """One thing under load: where to send each mode's requests and which processes
    pay for them."""

    name: str
    run: Callable[[str, bytes, dict[str, str], int, int], Load]
    urls: dict[str, str]
    bodies: dict[str, bytes]
    headers: dict[str, str]
    pids: list[int]
    ledger: Path | None = None
    grpc: bool = False
    # False for the baseline, whose processes run on the load core.
    on_gateway_core: bool = True
    # Headers of one mode only (Portkey names its upstream per request).
    mode_headers: dict[str, dict[str, str]] = field(default_factory=dict)
    # The server's log, whose last error explains a failing sample.
    log: Path | None = None
    # Modes whose sample request failed, and why: reported, not loaded.
    broken: dict[str, str] = field(default_factory=dict)

    def headers_for(self, mode: str) -> dict[str, str]:
        return {**self.headers, **self.mode_headers.get(mode, {})}


def rest_target(
    name: str, base: str, headers: dict[str, str], pids: list[int], payload: str,
    ledger: Path | None = None,
) -> Target:  # fmt: skip
    return Target(
        name,
        run_wrk,
        {mode: f"{base}/v1/chat/completions" for mode in MODES},
        {mode: checks.rest_body(mode == "stream", payload) for mode in MODES},
        headers,
        pids,
        ledger,
    )


def start_targets(
    tmp: Path, stack: contextlib.ExitStack, litellm: bool, portkey: bool, payload: str
) -> tuple[list[Target], int]:
    """Starts every server; returns the targets in the order they are measured and the
    in-process gateway's gRPC port."""
    nginx, upstream = servers.start_nginx(tmp)
    stack.callback(nginx.stop)
    local = "http://127.0.0.1"
    baseline = Target(
        report.BASELINE,
        run_wrk,
        {mode: f"{local}:{upstream}/{mode}/v1/chat/completions" for mode in MODES},
        {mode: checks.rest_body(mode == "stream", payload) for mode in MODES},
        {},
        [nginx.pid],
        on_gateway_core=False,
    )

    gateway = servers.start_gateway("gateway", tmp, upstream)
    stack.callback(gateway.server.stop)
    backend = servers.start_gateway("grpc-backend", tmp, upstream, "--no-http")
    stack.callback(backend.server.stop)
    edge = servers.start_gateway(
        "edge", tmp, upstream, grpc_target=f"127.0.0.1:{backend.grpc_port}"
    )
    stack.callback(edge.server.stop)
    key = {"x-api-key": servers.KEY}

    rest = rest_target(
        "gateway REST, in-process",
        f"{local}:{gateway.http_port}",
        key,
        [gateway.server.pid],
        payload,
        gateway.sqlite_path,
    )
    # Both processes of the edge tier count: the facade and the gateway it forwards to.
    edge_tier = rest_target(
        "gateway REST, edge tier -> gRPC gateway",
        f"{local}:{edge.http_port}",
        key,
        [edge.server.pid, backend.server.pid],
        payload,
        backend.sqlite_path,
    )
    grpc_api = Target(
        "gateway gRPC (h2load)",
        run_h2load,
        {mode: f"{local}:{gateway.grpc_port}{GRPC_PATHS[mode]}" for mode in MODES},
        {mode: checks.grpc_message(mode == "stream", payload) for mode in MODES},
        {**GRPC_HEADERS, **key},
        [gateway.server.pid],
        gateway.sqlite_path,
        grpc=True,
    )
    floor, floor_port = servers.start_proxy_floor(tmp, upstream)
    stack.callback(floor.stop)
    proxy_floor = rest_target(report.FLOOR, f"{local}:{floor_port}", {}, [floor.pid], payload)
    targets = [baseline, rest, edge_tier, grpc_api, proxy_floor]
    if portkey:
        peer = start_portkey(tmp, stack, upstream, payload)
        if peer is not None:
            targets.append(peer)
    if litellm:
        peer = start_litellm(tmp, stack, upstream, payload)
        if peer is not None:
            targets.append(peer)
    assert gateway.grpc_port is not None
    return targets, gateway.grpc_port


def start_litellm(
    tmp: Path, stack: contextlib.ExitStack, upstream: int, payload: str
) -> Target | None:
    binary, version = servers.litellm_binary()
    if binary is None:
        print(f"load: skipping LiteLLM: {version}", file=sys.stderr)
        return None
    try:
        proxy, port = servers.start_litellm(binary, tmp, upstream)
    except RuntimeError as exc:
        print(f"load: skipping LiteLLM: {exc}", file=sys.stderr)
        return None
    stack.callback(proxy.stop)
    auth = {"authorization": f"Bearer {servers.LITELLM_KEY}"}
    return rest_target(report.LITELLM, f"http://127.0.0.1:{port}", auth, [proxy.pid], payload)


def start_portkey(
    tmp: Path, stack: contextlib.ExitStack, upstream: int, payload: str
) -> Target | None:
    script, version = servers.portkey_script()
    if script is None:
        print(f"load: skipping Portkey: {version}", file=sys.stderr)
        return None
    try:
        gateway, port = servers.start_portkey(script, tmp)
    except RuntimeError as exc:
        print(f"load: skipping Portkey: {exc}", file=sys.stderr)
        return None
    stack.callback(gateway.stop)
    target = rest_target(report.PORTKEY, f"http://127.0.0.1:{port}", {}, [gateway.pid], payload)
    target.mode_headers = {mode: servers.portkey_headers(upstream, mode) for mode in MODES}
    target.log = gateway.log
    return target


def usable(target: Target) -> bool:
    """A sample request per mode must succeed before that mode is loaded; a target
    none of whose modes answers is left out."""
    if target.grpc:
        return True  # checked with a real stub, see check_grpc
    for mode in MODES:
        problem = checks.check_http(
            target.urls[mode], target.bodies[mode], target.headers_for(mode), mode == "stream"
        )
        if problem:
            logged = servers.last_error(target.log) if target.log else ""
            # The server's own error first: the answer's body seldom says what failed.
            target.broken[mode] = f"{logged} ({problem})" if logged else problem
            print(f"load: {target.name} fails its {mode} sample: {target.broken[mode]}",
                  file=sys.stderr)  # fmt: skip
    return len(target.broken) < len(MODES)


def measure(target: Target, mode: str, connections: int, seconds: int, warmup: int) -> dict:
    """One closed-loop run after a warm-up: throughput, latency, errors, and the CPU
    and peak memory of the processes behind the target."""
    url, body, headers = target.urls[mode], target.bodies[mode], target.headers_for(mode)
    if warmup:
        target.run(url, body, headers, connections, warmup)
    before = checks.settled_ledger(target.ledger)
    cpu_before, core_before = cpu_seconds(target.pids), core_busy_seconds(GATEWAY_CORE)
    load = target.run(url, body, headers, connections, seconds)
    cpu = cpu_seconds(target.pids) - cpu_before
    # Work on the gateway core by anything but the target (other jobs on a shared
    # machine, kernel network work): the noise figure of this run.
    other = core_busy_seconds(GATEWAY_CORE) - core_before - (cpu if target.on_gateway_core else 0)
    after = checks.settled_ledger(target.ledger)
    ledger_errors = checks.ledger_errors(before, after)
    failed = sum(ledger_errors.values())
    if target.grpc and after:
        # A gRPC error is an HTTP 200 to h2load: every answer the ledger did not record
        # as OK failed (a refused key is not recorded at all).
        failed = max(failed, load.requests - checks.ledger_ok(before, after))
    errors = load.socket_errors + load.status_errors + failed
    return {
        "target": target.name,
        "mode": mode,
        "connections": connections,
        "requests": load.requests,
        "seconds": round(load.seconds, 3),
        "requests_per_s": round(load.rate, 1),
        "p50_ms": load.p50_ms,
        "p90_ms": load.p90_ms,
        "p99_ms": load.p99_ms,
        "errors": errors,
        "socket_errors": load.socket_errors,
        "status_errors": load.status_errors,
        "ledger_errors": ledger_errors,
        "ledger_ok": checks.ledger_ok(before, after) if after else None,
        "ledger_failed": failed,
        "cpu_ms_per_request": round(cpu * 1000 / load.requests, 3) if load.requests else None,
        "peak_memory_mb": round(peak_memory_mb(target.pids), 1),
        "other_core0_pct": round(max(0.0, other) * 100 / load.seconds, 1) if load.seconds else None,
    }


def runs(args: argparse.Namespace, targets: list[Target]) -> Iterator[dict]:
    """Alternates targets inside each (mode, connections, round) step, so slow drift
    of the machine affects every target alike."""
    for mode in MODES:
        for connections in args.connections:
            for round_ in range(1, args.rounds + 1):
                for target in targets:
                    print(f"load: {mode:6} c={connections:<3} round {round_} {target.name}")
                    step = {"target": target.name, "mode": mode, "connections": connections,
                            "round": round_}  # fmt: skip
                    if mode in target.broken:
                        yield step | {"failed": f"every sample fails: {target.broken[mode]}"}
                        continue
                    try:
                        yield step | measure(target, mode, connections, args.duration, args.warmup)
                    except RuntimeError as exc:
                        print(f"load: {target.name} failed: {exc}", file=sys.stderr)
                        yield step | {"failed": str(exc)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="whole seconds per run")
    parser.add_argument("--warmup", type=int, default=1, help="whole seconds before each run")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 32, 64])
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs per cell; the table shows the quietest"
    )
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument("--no-portkey", action="store_true", help="leave Portkey out")
    parser.add_argument(
        "--quick", action="store_true",
        help="a smoke test: 2 s runs after 1 s of warm-up, 1 and 32 connections, one round",
    )  # fmt: skip
    parser.add_argument(
        "--payload", choices=payloads.KINDS, default="hello",
        help="a one-line hello, or a coding agent's 80 KB turn (bench/payloads.py)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=report.RESULTS)
    parser.add_argument("--render", action="store_true", help="only rewrite load.md from load.json")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.warmup, args.connections, args.rounds = 2, 1, [1, 32], 1
    return args


def main() -> None:
    args = parse_args()
    if args.render:
        report.render(args.out)
        return
    missing = missing_tools()
    if missing:
        sys.exit(f"load: missing tools; install with: apt-get install -y {' '.join(missing)}")
    started = time.time()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-load-")))
        targets, grpc_port = start_targets(
            tmp, stack, not args.no_litellm, not args.no_portkey, args.payload
        )
        targets = [t for t in targets if usable(t)]
        grpc_check = checks.check_grpc(grpc_port)
        print(f"load: gRPC sample through a real stub: {grpc_check}")
        results = list(runs(args, targets))
    report.write(args, results, grpc_check, started, args.out)


if __name__ == "__main__":
    main()
