"""Thousands of long streams on one gateway worker, against a model-like upstream.

The upstream runs in its own process (bench/streamload.c, compiled here with gcc): it
streams each chat completion as its request asks, first token after 200-500 ms, 30-80
tokens/s, 200-1,000 tokens. The load generator (the same program) holds N streams open
for a window, each with a random plan it knows, and measures what the path added to the
plan: time to first event and delay between events. Both are one epoll loop in C, on
the other core from the gateway; their CPU is reported, to show they are not the limit.

For each N: the upstream straight (the baseline: what the load itself adds), the
gateway's REST API (one worker, pinned to one core), with --simulated the gateway's
embedded simulated provider, with --litellm the LiteLLM proxy 1.106.2 (one worker)
under the same load, and with --floor the least a Python relay costs (bench/relay_floor.py:
a TCP proxy on uvloop, one read and one write per event, nothing parsed). Reported: streams done, errors, relayed
events/s, the server's CPU per relayed event and its cores used, resident memory per
open stream, added time to first event (p50, p99) and added delay between events (p99).

    python -m bench.long_streams                      # 500 1000 2000 3000 streams, 25 s
    python -m bench.long_streams --streams 2000 --seconds 40 --litellm
    python -m bench.long_streams --workers 2 --pin '' # every core to the gateway's workers
    python -m bench.long_streams --streams 1000 --floor  # beside a bare Python relay
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from bench.load_servers import LITELLM_KEY, litellm_binary, start_litellm
from bench.perf import KEY, cpu_s, free_port, pinned, tree, wait_port

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "streamload.c"


def build(tmp: Path) -> Path:
    binary = tmp / "streamload"
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(SOURCE)], check=True)
    return binary


def start_gateway(
    tmp: Path, upstream: int, workers: int, core: str, streams: int
) -> tuple[subprocess.Popen[bytes], int]:
    """A gateway with two models: `up`, relayed to the upstream (its pool as large as
    the streams, each of which holds a connection), and `sim`, the embedded simulated
    provider made to stream like a model (300 ms to the first token, 50 tokens/s, 200
    tokens), whose cost is reported apart."""
    relayed = {"id": "up-1", "type": "primary", "adapter": "openai",
               "params": {"base_url": f"http://127.0.0.1:{upstream}/v1", "model": "up",
                          "max_connections": 2 * streams}}  # fmt: skip
    simulated = {"id": "sim-1", "type": "primary", "adapter": "simulated",
                 "params": {"ttft_ms": 300, "tokens_per_second": 50, "min_reply_tokens": 200,
                            "max_reply_tokens": 200}}  # fmt: skip
    price = {"input": 1, "output": 2}
    http_port = free_port()
    config = {
        "server": {"host": "127.0.0.1", "grpc_port": free_port(), "http_port": http_port},
        "storage": {"sqlite_path": str(tmp / "gateway.db")},
        "models": [{"id": "up", "owned_by": "bench", "created": 0, "price": price,
                    "providers": [relayed]},
                   {"id": "sim", "owned_by": "bench", "created": 0, "price": price,
                    "providers": [simulated]}],
        "routing": {"profiles": {p: ["up"] for p in ("economy", "balanced", "quality")}},
        "keys": [{"name": "bench", "kind": "api", "secret": KEY}],
    }  # fmt: skip
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "server.cli.main", "serve", "--config", str(path)]
    argv += ["--log-level", "WARNING"] + (["--workers", str(workers)] if workers > 1 else [])
    proc = subprocess.Popen(pinned(core, argv), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    wait_port(http_port)
    time.sleep(1.0 if workers > 1 else 0.3)  # every worker listening
    return proc, http_port


def simulated_alone(streams: int = 500) -> float:
    """The embedded simulated provider's own CPU per token, in us, with no gateway
    around it: `streams` at 50 tokens/s in this process (the pacing timers included)."""
    import asyncio

    from server.base.generation import GenerationRequest
    from server.cli.serving import event_loop
    from server.providers.simulated import SimulatedParams, SimulatedProvider

    params = SimulatedParams(ttft_ms=0, tokens_per_second=50, min_reply_tokens=150,
                             max_reply_tokens=150)  # fmt: skip
    provider = SimulatedProvider("sim", params)
    request = GenerationRequest(prompt="Once upon a time", max_tokens=150)

    async def run() -> int:
        async def one() -> int:
            return sum([1 async for _ in provider.generate(request)])

        return sum(await asyncio.gather(*(one() for _ in range(streams))))

    started = time.process_time()
    with asyncio.Runner(loop_factory=event_loop()) as runner:
        events = runner.run(run())
    return (time.process_time() - started) * 1e6 / events


def rss_kb(pid: int) -> int:
    """Resident memory of the process tree now, in KB."""
    total = 0
    for p in tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def load(
    binary: Path, port: int, path: str, model: str, key: str, streams: int, seconds: float,
    core: str, server_pid: int | None, upstream_pid: int, fresh_kb: int, fixed: bool = False,
) -> dict:  # fmt: skip
    """One window of `streams` open streams; the server's CPU and memory over it (memory
    per stream: the peak over what the server held when it had just started)."""
    before = cpu_s(server_pid) if server_pid else 0.0
    upstream_before = cpu_s(upstream_pid)
    peak_kb = [fresh_kb]

    def sample() -> None:  # memory once every stream is open (after the ramp)
        while not done.wait(1.0):
            peak_kb[0] = max(peak_kb[0], rss_kb(server_pid) if server_pid else 0)

    done = threading.Event()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    argv = [str(binary), "client", str(port), path, model, key, str(streams), str(seconds), "7"]
    argv += ["fixed"] if fixed else []
    out = subprocess.run(pinned(core, argv), capture_output=True, text=True, check=True).stdout
    elapsed = time.monotonic() - started
    done.set()
    sampler.join()
    result = json.loads(out)
    result["seconds"] = elapsed
    result["server_cpu_s"] = (cpu_s(server_pid) - before) if server_pid else 0.0
    result["upstream_cpu_s"] = cpu_s(upstream_pid) - upstream_before
    result["rss_kb_per_stream"] = (peak_kb[0] - fresh_kb) / streams if server_pid else 0.0
    result["rss_mb"] = peak_kb[0] / 1024
    return result


def row(target: str, streams: int, r: dict, to_plan: bool) -> str:
    events = max(1, r["events"])
    us_per_event = r["server_cpu_s"] * 1e6 / events
    cores = r["server_cpu_s"] / r["seconds"]
    load_cores = (r["cpu_s"] + r["upstream_cpu_s"]) / r["seconds"]
    ttft, gap = r["ttft_added_ms"], r["gap_added_ms"]
    added = f"{ttft[0]:.1f} / {ttft[1]:.1f} | {gap[1]:.1f}" if to_plan else "- | -"
    return (
        f"| {streams} | {target} | {r['done']} | {r['errors']} | {events / r['seconds']:.0f} | "
        f"{us_per_event:.1f} | {cores:.2f} | {r['rss_mb']:.0f} | {r['rss_kb_per_stream']:.0f} | "
        f"{added} | {load_cores:.2f} |"
    )


def fair_row(target: str, streams: int, r: dict) -> str:
    """A --fixed window: every stream the same plan (4.3 s alone), each run to its end."""
    p50, p99, worst = (ms / 1000 for ms in r["stream_ms"])
    events = max(1, r["events"])
    return (
        f"| {streams} | {target} | {r['done']} | {r['errors'] + r['unfinished']} | "
        f"{p50:.2f} / {p99:.2f} / {worst:.2f} | {p99 / max(p50, 1e-9):.2f} | "
        f"{events / r['seconds']:.0f} | {r['server_cpu_s'] * 1e6 / events:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[500, 1000, 2000, 3000])
    parser.add_argument("--seconds", type=float, default=25)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--pin", default="0:1", help="server core:load core, '' for none")
    parser.add_argument("--litellm", action="store_true", help="also load LiteLLM 1.106.2")
    parser.add_argument(
        "--simulated", action="store_true",
        help="also load the embedded simulated provider (its added latencies are not to plan)",
    )  # fmt: skip
    parser.add_argument(
        "--floor", action="store_true",
        help="also load a bare Python relay (a TCP proxy on uvloop): the least one can cost",
    )  # fmt: skip
    parser.add_argument(
        "--fixed", action="store_true",
        help="every stream the same plan (300 ms, 50 tokens/s, 200 tokens), opened once and run "
        "to its end: stream time p50 / p99 (fairness when saturated); --seconds caps the wait",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    server_core, load_core = args.pin.split(":") if args.pin else ("", "")
    tmp = Path(tempfile.mkdtemp(prefix="bench-long-"))
    binary = build(tmp)
    up_port = free_port()
    upstream = subprocess.Popen(pinned(load_core, [str(binary), "upstream", str(up_port)]))
    wait_port(up_port)
    servers: list[subprocess.Popen[bytes]] = []
    results: dict[str, dict] = {}
    try:
        gateway, http_port = start_gateway(
            tmp, up_port, args.workers, server_core, max(args.streams)
        )
        servers.append(gateway)
        workers = f"{args.workers} worker{'s' if args.workers > 1 else ''}"
        chat = "/v1/chat/completions"
        targets = [("upstream straight", up_port, chat, "up", "x", None),
                   (f"gateway ({workers})", http_port, chat, "up", KEY, gateway.pid)]  # fmt: skip
        if args.simulated:
            targets.append((f"gateway ({workers}), simulated provider", http_port, chat, "sim",
                            KEY, gateway.pid))  # fmt: skip
        if args.floor:
            floor_port = free_port()
            argv = [sys.executable, "-m", "bench.relay_floor", str(floor_port), str(up_port)]
            floor = subprocess.Popen(pinned(server_core, argv), cwd=ROOT)
            servers.append(floor)
            wait_port(floor_port)
            targets.append(("Python relay floor (TCP proxy)", floor_port, chat, "up", "x",
                            floor.pid))  # fmt: skip
        if args.litellm:
            binary_path, why = litellm_binary()
            if binary_path is None:
                print(f"LiteLLM left out: {why}")
            else:
                server, port = start_litellm(binary_path, tmp, up_port)
                servers.append(server.proc)
                targets.append(("LiteLLM 1.106.2", port, chat, "bench-stream", LITELLM_KEY,
                                server.pid))  # fmt: skip
        if args.fixed:
            print("| streams | target | done | errors or unfinished | stream time p50 / p99 / max s "
                  "| p99 / p50 | events/s | server CPU us/event |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|")
        else:
            print("| streams | target | done | errors | events/s | server CPU us/event | server cores "
                  "| RSS MB | RSS KB/stream | added TTFT p50 / p99 ms | added gap p99 ms "
                  "| load gen + upstream cores |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        fresh = {pid: rss_kb(pid) for *_, pid in targets if pid}
        for streams in args.streams:
            for name, port, path, model, key, pid in targets:
                r = load(binary, port, path, model, key, streams, args.seconds, load_core, pid,
                         upstream.pid, fresh.get(pid, 0), args.fixed)  # fmt: skip
                results[f"{streams} {name}"] = r
                line = (
                    fair_row(name, streams, r)
                    if args.fixed
                    else row(name, streams, r, model != "sim")
                )
                print(line, flush=True)
                time.sleep(2)  # streams still closing settle before the next window
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(30)
        upstream.terminate()
        upstream.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    if args.simulated:
        alone = simulated_alone()
        results["simulated provider alone"] = {"cpu_us_per_token": alone}
        print(f"\nThe simulated provider alone (500 streams at 50 tokens/s in one process, "
              f"no gateway): {alone:.1f} us of CPU per token")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
