"""Per-request cost of the gateway and how it scales with workers, in one run.

An nginx upstream answers a fixed chat completion (and a fixed 20-chunk SSE stream) at
once; wrk loads the REST facade through the `openai` adapter. For each target it prints
requests/s, p50/p99, and the gateway's CPU ms per request (user + system time of the
gateway process and its children, read from /proc). Targets alternate within a round
and rounds repeat, so drift on a shared machine touches every target alike.

    python -m bench.perf                          # 1 worker, unary + stream, 1 and 32 conns
    python -m bench.perf --workers 1 2 --pin ''   # throughput of 1 vs 2 workers
    python -m bench.perf --profile [--grpc]       # py-spy raw stacks of one worker
    python -m bench.perf --responses stored       # the /v1/responses rows with storage
    python -m bench.perf --payload agent          # a coding agent's 80 KB turn, each dialect
    python -m bench.perf --gemini off             # without the Gemini API's rows
    python -m bench.perf --guardrails             # plus a gateway with every detector on

Each gateway also gets a `/v1/responses` row: the same generation asked through the
Responses API (unstored by default, as chat completions keep nothing either), and a
`/v1/messages` row: the same generation asked through the Messages API (`--messages off`
leaves it out).

With `--pin` (default: the gateway on core 0, nginx and wrk on core 1) CPU time is
clean; use `--pin ''` to let workers spread over every core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import payloads

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-api-key-000000000000"
TICKS = os.sysconf("SC_CLK_TCK")
CHUNKS = 20
# What every request asks (bench/payloads.py): set from --payload.
PAYLOAD = "hello"
LUA = """
wrk.method = "POST"
wrk.body = os.getenv("PERF_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-api-key"] = os.getenv("PERF_KEY")
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('PERF {"requests": %d, "us": %d, "errors": %d, "p50": %d, "p99": %d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


# The target column of a non-chat row, after the worker count.
LABELS = {"grpc": "gRPC", "responses": "/v1/responses", "messages": "/v1/messages",
          "anthropic": "/v1/messages, Anthropic upstream", "gemini": "Gemini",
          "gemini-native": "Gemini, Gemini upstream",
          "responses-native": "/v1/responses, Responses upstream"}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def pinned(core: str, argv: list[str]) -> list[str]:
    return ["taskset", "-c", core, *argv] if core else argv


def upstream_bodies() -> tuple[str, str]:
    head = {"id": "chatcmpl-bench", "created": 1767225600, "model": "bench"}
    unary = {
        **head, "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there."},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15},
    }  # fmt: skip
    events = []
    for i in range(CHUNKS):
        choice = {"index": 0, "delta": {"content": f" word{i}"}, "finish_reason": None}
        if i == CHUNKS - 1:
            choice["finish_reason"] = "stop"
        events.append({**head, "object": "chat.completion.chunk", "choices": [choice]})
    usage = {"prompt_tokens": 9, "completion_tokens": CHUNKS, "total_tokens": 9 + CHUNKS}
    events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return json.dumps(unary), stream


def anthropic_bodies() -> tuple[str, str]:
    """The same generation as an Anthropic upstream answers it, whole and streamed."""
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "bench",
               "stop_sequence": None}  # fmt: skip
    words = [f" word{i}" for i in range(CHUNKS)]
    unary = {**message, "content": [{"type": "text", "text": "".join(words)}],
             "stop_reason": "end_turn", "usage": {"input_tokens": 9, "output_tokens": CHUNKS}}  # fmt: skip
    events = [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                              "usage": {"input_tokens": 9, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}
          for w in words),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": CHUNKS}},
        {"type": "message_stop"},
    ]  # fmt: skip
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return json.dumps(unary), stream


def gemini_bodies() -> tuple[str, str]:
    """The same generation as a Gemini upstream answers it, whole and streamed."""
    head = {"modelVersion": "bench", "responseId": "bench-response"}
    usage = {"promptTokenCount": 9, "candidatesTokenCount": CHUNKS, "totalTokenCount": 9 + CHUNKS}
    words = [f" word{i}" for i in range(CHUNKS)]

    def answer(text: str, last: bool) -> dict:
        candidate: dict = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
        return {"candidates": [candidate | ({"finishReason": "STOP"} if last else {})],
                **({"usageMetadata": usage} if last else {}), **head}  # fmt: skip

    unary = answer("".join(words), True)
    stream = "".join(
        f"data: {json.dumps(answer(w, i == CHUNKS - 1))}\r\n\r\n" for i, w in enumerate(words)
    )
    return json.dumps(unary), stream


def responses_bodies() -> tuple[str, str]:
    """The same generation as an upstream of the Responses API answers it, whole and
    streamed (OpenAI's events, each numbered)."""
    words = [f" word{i}" for i in range(CHUNKS)]
    text = "".join(words)
    item = {"id": "msg_bench", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    usage = {"input_tokens": 9, "output_tokens": CHUNKS, "total_tokens": 9 + CHUNKS}
    response = {"id": "resp_bench", "object": "response", "created_at": 1767225600,
                "status": "completed", "model": "bench", "output": [item], "usage": usage}  # fmt: skip
    opened = {**response, "status": "in_progress", "output": [], "usage": None}
    at = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    events = [
        {"type": "response.created", "response": opened},
        {"type": "response.in_progress", "response": opened},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", **at, "part": part},
        *({"type": "response.output_text.delta", **at, "delta": w, "logprobs": []} for w in words),
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": {**part, "text": text}},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response},
    ]  # fmt: skip
    stream = "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': i})}\n\n"
        for i, e in enumerate(events)
    )
    return json.dumps(response), stream


# Where nginx answers as each other upstream format: (format, mode, path below its base URL).
NATIVE_PATHS = [
    ("anthropic", "unary", "/v1/messages"), ("anthropic", "stream", "/v1/messages"),
    ("gemini", "unary", "/models/bench:generateContent"),
    ("gemini", "stream", "/models/bench:streamGenerateContent"),
    ("responses", "unary", "/v1/responses"), ("responses", "stream", "/v1/responses"),
]  # fmt: skip
MIMES = {"unary": "application/json", "stream": "text/event-stream"}


def start_nginx(tmp: Path, core: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    tmp.chmod(0o755)
    unary, stream = upstream_bodies()
    (tmp / "unary.body").write_text(unary)
    (tmp / "stream.body").write_text(stream)
    for upstream, bodies in (("anthropic", anthropic_bodies), ("gemini", gemini_bodies),
                             ("responses", responses_bodies)):  # fmt: skip
        unary, stream = bodies()
        (tmp / f"{upstream}-unary.body").write_text(unary)
        (tmp / f"{upstream}-stream.body").write_text(stream)
    temps = "".join(f"    {k}_temp_path {tmp}/{k};\n" for k in ("client_body", "proxy", "fastcgi"))
    temps += "".join(f"    {k}_temp_path {tmp}/{k};\n" for k in ("uwsgi", "scgi"))
    locations = "".join(
        f"        location = /{name}/v1/chat/completions {{ types {{ }} default_type {mime}; "
        f"alias {tmp}/{name}.body; error_page 405 =200 $uri; }}\n"
        for name, mime in (("unary", "application/json"), ("stream", "text/event-stream"))
    ) + "".join(
        f"        location = /{upstream}-{name}{path} {{ types {{ }} default_type {MIMES[name]}; "
        f"alias {tmp}/{upstream}-{name}.body; error_page 405 =200 $uri; }}\n"
        for upstream, name, path in NATIVE_PATHS
    )
    (tmp / "nginx.conf").write_text(
        f"daemon off; worker_processes 1; pid {tmp}/nginx.pid; error_log {tmp}/nginx.log warn;\n"
        "events { worker_connections 4096; }\n"
        "http {\n    access_log off; keepalive_requests 10000000; keepalive_timeout 300s;\n"
        f"{temps}    server {{\n        listen 127.0.0.1:{port};\n{locations}    }}\n}}\n"
    )
    argv = ["nginx", "-c", str(tmp / "nginx.conf"), "-p", str(tmp), "-e", str(tmp / "nginx.log")]
    proc = subprocess.Popen(pinned(core, argv), stdout=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def start_gateway(
    tmp: Path,
    upstream: int,
    workers: int,
    core: str,
    limits: bool,
    root: Path = ROOT,
    guardrails: bool = False,
    log: Path | None = None,
) -> tuple[subprocess.Popen[bytes], int, int]:
    def model(model_id: str, path: str, stream: bool, adapter: str = "openai") -> dict:
        base = f"http://127.0.0.1:{upstream}/{path}" + ("/v1" if "openai" in adapter else "")
        params = {"base_url": base, "model": "bench", "stream": stream}
        if adapter == "openai-responses":
            adapter, params["responses_api"] = "openai", True
        return {"id": model_id, "owned_by": "bench", "created": 0,
                "price": {"input": 1, "output": 2},
                "providers": [{"id": f"{model_id}-nginx", "type": "primary", "adapter": adapter,
                               "params": params}]}  # fmt: skip

    key = {"name": "bench", "kind": "api", "secret": KEY}
    if limits:
        key |= {"requests_per_minute": 10_000_000, "budget_usd": 1_000_000}
    http_port, grpc_port = free_port(), free_port()
    config = {
        "server": {"host": "127.0.0.1", "grpc_port": grpc_port, "http_port": http_port},
        "storage": {"sqlite_path": str(tmp / f"gateway-{workers}-{http_port}.db")},
        "models": [
            model("bench", "unary", False),
            model("bench-stream", "stream", True),
            model("claude-bench", "anthropic-unary", False, "anthropic"),
            model("claude-bench-stream", "anthropic-stream", True, "anthropic"),
            model("gemini-bench", "gemini-unary", False, "gemini"),
            model("gemini-bench-stream", "gemini-stream", True, "gemini"),
            model("responses-bench", "responses-unary", False, "openai-responses"),
            model("responses-bench-stream", "responses-stream", True, "openai-responses"),
        ],
        "routing": {"profiles": {p: ["bench"] for p in ("economy", "balanced", "quality")}},
        "keys": [key],
    }
    if guardrails:  # every built-in detector on every phase, redacting
        config |= {"guardrails": [{"id": "pii"}], "default_guardrails": ["pii"]}
    path = tmp / f"gateway-{workers}-{http_port}.yaml"
    path.write_text(yaml.safe_dump(config))
    python = root / ".venv" / "bin" / "python"  # a compared tree runs in its own environment
    argv = [str(python if python.exists() else sys.executable), "-m", "server.cli.main", "serve"]
    argv += ["--config", str(path)]
    argv += ["--log-level", "WARNING"] + (["--workers", str(workers)] if workers > 1 else [])
    # The request log goes to stderr: this terminal's, or `log`.
    stderr = log.open("ab") if log else None
    proc = subprocess.Popen(pinned(core, argv), cwd=root, stdout=subprocess.DEVNULL, stderr=stderr)
    if stderr:
        stderr.close()
    wait_port(http_port)
    wait_port(grpc_port)
    time.sleep(1.0 if workers > 1 else 0.3)  # every worker listening
    return proc, http_port, grpc_port


def tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def busy_s() -> float:
    """CPU time every process on the machine has used, in seconds (from /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / TICKS


def children_s() -> float:
    """CPU time of this script's finished children (wrk, h2load), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_s(pid: int) -> float:
    ticks = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / TICKS


def rss_mb(pid: int) -> float:
    """Peak resident memory of the largest process in the tree (one worker), in MB."""
    peak = 0
    for p in tree(pid):
        try:
            found = re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{p}/status").read_text())
        except OSError:
            continue
        if found:
            peak = max(peak, int(found.group(1)))
    return peak / 1024


def wrk(url: str, body: str, connections: int, seconds: float, core: str, lua: Path) -> dict:
    env = {**os.environ, "PERF_BODY": body, "PERF_KEY": KEY}
    argv = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{int(seconds)}s",
        "--timeout",
        "30s",
        "-s",
        str(lua),
    ]
    done = subprocess.run(pinned(core, [*argv, url]), env=env, capture_output=True, text=True)
    found = re.search(r"^PERF (.*)$", done.stdout, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"wrk failed: {done.stdout}{done.stderr}")
    return json.loads(found.group(1))


def h2load(port: int, stream: bool, connections: int, seconds: float, core: str) -> dict:
    """The gRPC API under h2load: one prepared request, one stream per connection."""
    from gateway.v1 import chat_service_pb2 as chat

    from http_facade import codec

    kind = chat.StreamChatCompletionRequest if stream else chat.CreateChatCompletionRequest
    payload = payloads.chat(PAYLOAD, "bench-stream" if stream else "bench", False)
    message = codec.from_dict(payload, kind()).SerializeToString()
    method = "StreamChatCompletion" if stream else "CreateChatCompletion"
    with tempfile.TemporaryDirectory() as tmp:
        data, log = Path(tmp, "body"), Path(tmp, "log")
        data.write_bytes(b"\0" + len(message).to_bytes(4, "big") + message)
        argv = ["h2load", "-t1", f"-c{connections}", "-m1", f"-D{int(seconds)}", "-d", str(data),
                "--log-file", str(log), "-H", "content-type: application/grpc",
                "-H", "te: trailers", "-H", f"x-api-key: {KEY}",
                f"http://127.0.0.1:{port}/gateway.v1.ChatService/{method}"]  # fmt: skip
        done = subprocess.run(pinned(core, argv), capture_output=True, text=True)
        latencies = sorted(int(line.split("\t")[2]) for line in log.read_text().splitlines())
    found = re.search(r"(\d+) succeeded, (\d+) failed", done.stdout)
    if found is None or not latencies:
        raise RuntimeError(f"h2load failed: {done.stdout}{done.stderr}")
    return {
        "requests": int(found.group(1)),
        "us": int(seconds * 1e6),
        "errors": int(found.group(2)),
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)],
    }


def body(stream: bool) -> str:
    return json.dumps(payloads.chat(PAYLOAD, "bench-stream" if stream else "bench", stream))


def messages_body(stream: bool, anthropic: bool = False) -> str:
    """The same generation as `body`, asked through the Messages API (of an OpenAI or,
    with `anthropic`, an Anthropic upstream)."""
    model = ("claude-bench" if anthropic else "bench") + ("-stream" if stream else "")
    return json.dumps(payloads.messages(PAYLOAD, model, stream))


def gemini_url(port: int, stream: bool, native: bool = False) -> str:
    """The same generation as `body`, asked through the Gemini API (of an OpenAI or,
    with `native`, a Gemini upstream)."""
    model = ("gemini-bench" if native else "bench") + ("-stream" if stream else "")
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"http://127.0.0.1:{port}/v1beta/models/{model}:{method}"


def responses_body(stream: bool, store: bool, native: bool = False) -> str:
    """The same generation as `body`, asked through the Responses API (of an OpenAI
    chat or, with `native`, a Responses upstream)."""
    model = ("responses-bench" if native else "bench") + ("-stream" if stream else "")
    return json.dumps(payloads.responses(PAYLOAD, model, stream, store))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1])
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--modes", nargs="+", default=["unary", "stream"])
    parser.add_argument("--grpc", action="store_true", help="also load the gRPC API (h2load)")
    parser.add_argument(
        "--responses", choices=["off", "unstored", "stored"], default="unstored",
        help="also load /v1/responses (the same generation; stored or not)",
    )  # fmt: skip
    parser.add_argument(
        "--messages", choices=["on", "off"], default="on",
        help="also load /v1/messages (the same generation, of an OpenAI and of an Anthropic "
        "upstream)",
    )  # fmt: skip
    parser.add_argument(
        "--guardrails", action="store_true",
        help="also measure a gateway (1 worker) with a guardrail of every detector on",
    )  # fmt: skip
    parser.add_argument(
        "--gemini", choices=["on", "off"], default="on",
        help="also load the Gemini API's generateContent (the same generation)",
    )  # fmt: skip
    parser.add_argument(
        "--payload", choices=payloads.KINDS, default="hello",
        help="a one-line hello, or a coding agent's 80 KB turn (bench/payloads.py)",
    )  # fmt: skip
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pin", default="0:1", help="gateway core:load core, '' for none")
    parser.add_argument("--limits", action="store_true", help="a key with rpm and budget")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy raw stacks of 1 worker (of the gRPC API with --grpc)",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        help="also measure the gateway in this source tree, with its .venv if it has one (1 worker)",
    )
    args = parser.parse_args()
    global PAYLOAD
    PAYLOAD = args.payload
    gw_core, load_core = args.pin.split(":") if args.pin else ("", "")
    tmp = Path(tempfile.mkdtemp(prefix="bench-perf-"))
    lua = tmp / "post.lua"
    lua.write_text(LUA)
    nginx, upstream = start_nginx(tmp, load_core)
    gateways = {}
    try:
        if args.compare:
            gateways["base"] = start_gateway(
                tmp, upstream, 1, gw_core, args.limits, args.compare.resolve()
            )
        for n in args.workers:
            gateways[n] = start_gateway(tmp, upstream, n, gw_core, args.limits)
        if args.guardrails:
            gateways["guarded"] = start_gateway(
                tmp, upstream, 1, gw_core, args.limits, guardrails=True
            )
        for _, port, _ in gateways.values():  # warm up
            for mode in args.modes:
                wrk(f"http://127.0.0.1:{port}/v1/chat/completions", body(mode == "stream"),
                    8, 1, load_core, lua)  # fmt: skip
                wrk(f"http://127.0.0.1:{port}/v1/messages", messages_body(mode == "stream"),
                    8, 1, load_core, lua)  # fmt: skip
                for native in (False, True):
                    wrk(gemini_url(port, mode == "stream", native),
                        json.dumps(payloads.gemini(PAYLOAD)), 8, 1, load_core, lua)  # fmt: skip
                    wrk(f"http://127.0.0.1:{port}/v1/responses",
                        responses_body(mode == "stream", args.responses == "stored", native),
                        8, 1, load_core, lua)  # fmt: skip
        if args.profile:
            profile(gateways[args.workers[0]], args, load_core, lua)
            return
        results: dict[tuple, list[dict]] = {}
        for _ in range(args.rounds):
            for mode in args.modes:
                for c in args.connections:
                    # The upstream alone: what the gateway's figures are compared with.
                    url = f"http://127.0.0.1:{upstream}/{mode}/v1/chat/completions"
                    mark = (busy_s(), children_s(), cpu_s(nginx.pid))
                    r = wrk(url, body(mode == "stream"), c, args.seconds, load_core, lua)
                    r["cpu_ms"] = 0.0
                    r["load_ms"] = 0.0
                    r["others"] = others(mark, nginx.pid, None, args.seconds)
                    results.setdefault((mode, c, "nginx"), []).append(r)
                    for n, (proc, port, grpc_port) in gateways.items():
                        ingresses = ["rest", "grpc"] if args.grpc else ["rest"]
                        if args.responses != "off":
                            ingresses += ["responses", "responses-native"]
                        if args.messages == "on":
                            ingresses += ["messages", "anthropic"]
                        if args.gemini == "on":
                            ingresses += ["gemini", "gemini-native"]
                        for ingress in ingresses:
                            before = cpu_s(proc.pid)
                            mark = (busy_s(), children_s(), cpu_s(nginx.pid))
                            if ingress == "rest":
                                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                                r = wrk(
                                    url, body(mode == "stream"), c, args.seconds, load_core, lua
                                )
                            elif ingress in ("messages", "anthropic"):
                                url = f"http://127.0.0.1:{port}/v1/messages"
                                native = ingress == "anthropic"
                                r = wrk(url, messages_body(mode == "stream", native), c,
                                        args.seconds, load_core, lua)  # fmt: skip
                            elif ingress.startswith("gemini"):
                                native = ingress == "gemini-native"
                                r = wrk(gemini_url(port, mode == "stream", native),
                                        json.dumps(payloads.gemini(PAYLOAD)), c,
                                        args.seconds, load_core, lua)  # fmt: skip
                            elif ingress.startswith("responses"):
                                url = f"http://127.0.0.1:{port}/v1/responses"
                                stored = args.responses == "stored"
                                native = ingress == "responses-native"
                                r = wrk(url, responses_body(mode == "stream", stored, native), c,
                                        args.seconds, load_core, lua)  # fmt: skip
                            else:
                                r = h2load(grpc_port, mode == "stream", c, args.seconds, load_core)
                            r["cpu_ms"] = (cpu_s(proc.pid) - before) * 1000 / max(1, r["requests"])
                            r["others"] = others(mark, nginx.pid, (proc.pid, before), args.seconds)
                            load = children_s() - mark[1] + cpu_s(nginx.pid) - mark[2]
                            r["load_ms"] = load * 1000 / max(1, r["requests"])
                            label = n if ingress == "rest" else f"{n} {LABELS[ingress]}"
                            results.setdefault((mode, c, label), []).append(r)
        # Noise (other work, a slower moment of a shared core) only ever adds CPU time.
        print("Each row: the round with the least CPU per request (`others`: cores busy in")
        print("that round with processes other than the gateway, nginx and the load generator).\n")
        print("| mode | conns | target | req/s | p50 ms | p99 ms | CPU ms/req | errors | peak MB "
              "| others | nginx+wrk ms/req |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for (mode, c, n), rs in results.items():
            quiet = min(rs, key=lambda r: r["cpu_ms"] if r["cpu_ms"] else r["others"])
            rate = quiet["requests"] / quiet["us"] * 1e6
            p50 = quiet["p50"] / 1000
            p99 = quiet["p99"] / 1000
            cpu = quiet["cpu_ms"]
            errors = sum(r["errors"] for r in rs)
            owner = str(n).split(" ")[0]
            key = int(owner) if owner.isdigit() else owner
            mb = rss_mb(gateways[key][0].pid) if key in gateways else 0.0
            print(f"| {mode} | {c} | {n} | {rate:.0f} | {p50:.2f} | {p99:.2f} | {cpu:.3f} | "
                  f"{errors} | {mb:.0f} | {quiet['others']:.2f} | {quiet['load_ms']:.3f} |")  # fmt: skip
        if len(args.workers) > 1:
            for mode in args.modes:
                for c in args.connections:
                    rates = {
                        n: max(r["requests"] / r["us"] * 1e6 for r in rs)
                        for (m, cc, n), rs in results.items()
                        if m == mode and cc == c and isinstance(n, int)
                    }
                    base = rates[args.workers[0]]
                    shown = ", ".join(f"{n}: {rate / base:.2f}x" for n, rate in rates.items())
                    print(f"{mode} c={c} throughput vs {args.workers[0]} worker(s): {shown}")
    finally:
        for proc, _, _ in gateways.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        nginx.terminate()
        nginx.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def others(mark: tuple, nginx: int, gateway: tuple | None, seconds: float) -> float:
    """Cores used by everything else on the machine since `mark`."""
    busy, children, nginx_before = mark
    ours = (children_s() - children) + (cpu_s(nginx) - nginx_before)
    if gateway is not None:
        ours += cpu_s(gateway[0]) - gateway[1]
    return max(0.0, (busy_s() - busy - ours) / seconds)


def profile(gateway: tuple, args: argparse.Namespace, load_core: str, lua: Path) -> None:
    """py-spy's raw stacks of one worker under load: the REST API, or with --grpc the gRPC API."""
    proc, port, grpc_port = gateway
    pid = max(tree(proc.pid))  # the serving process (the only one with one worker)
    out = Path(tempfile.gettempdir()) / f"perf-profile-{pid}"
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-f", "raw", "-o", str(out), "-d",
         str(int(args.seconds * len(args.modes)) + 1), "-r", "200"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(0.5)
    for mode in args.modes:
        if args.grpc:
            h2load(grpc_port, mode == "stream", args.connections[-1], args.seconds, load_core)
        else:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            wrk(url, body(mode == "stream"), args.connections[-1], args.seconds, load_core, lua)
    spy.wait()
    print(f"raw collapsed stacks: {out}")


if __name__ == "__main__":
    main()
