"""What a hostile request under 64 KiB costs the gateway: CPU time and resident memory.

Starts the gateway on its embedded default (the simulated models), sends each request
of a set built to eat a naive implementation (schemas with `$ref` cycles, huge
`minLength`/`minItems`, self-referencing `anyOf`, deep nesting, a keyword of the wrong
type, n=128 choices), `--repeat` times each, and reports for each: the HTTP status, the
gateway's CPU milliseconds per request (from /proc, the process's own user + system
time) and how much its resident set grew (peak, VmHWM) over the run so far.

    python -m bench.hostile_requests [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.perf import free_port, wait_port

TICKS = os.sysconf("SC_CLK_TCK")
KEY = "gw-dev-api-key-0000000000"
HELLO = [{"role": "user", "content": "hi"}]


def structured(schema: Any) -> dict[str, Any]:
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    return {"model": "sim-mini", "messages": HELLO, "response_format": fmt}


def tool(parameters: Any) -> dict[str, Any]:
    spec = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    return {"model": "sim-mini", "messages": HELLO, "tools": [spec], "tool_choice": "required"}


def requests() -> dict[str, bytes]:
    wide = {"type": "object", "properties": {f"p{i}": {"$ref": "#"} for i in range(2000)}}
    refs = {f"p{i}": {"$ref": "#/$defs/a"} for i in range(6)}
    deep = {"$defs": {"a": {"type": "object", "properties": refs}}, "$ref": "#/$defs/a"}
    long = {"type": "object", "properties": {"s": {"type": "string", "minLength": 200_000_000}}}
    items = {"type": "array", "minItems": 10**9, "items": {"type": "string", "minLength": 10**6}}
    bodies: dict[str, Any] = {
        "schema: $ref cycle, 2000 wide": structured(wide),
        "schema: $ref cycle, 6 wide": structured(deep),
        "schema: minLength 2e8": structured(long),
        "schema: minItems 1e9 of minLength 1e6": structured(items),
        "schema: anyOf of itself x3000": structured({"anyOf": [{"$ref": "#"}] * 3000}),
        "schema: minimum 'abc' (400)": structured({"type": "integer", "minimum": "abc"}),
        "tool: $ref cycle, 2000 wide": tool(wide),
        "tool: minItems 1e9": tool({"type": "object", "properties": {"a": items}}),
        "n=128, max_tokens 4096": {
            "model": "sim-mini", "messages": HELLO, "n": 128, "max_tokens": 4096,
        },
    }  # fmt: skip
    out = {name: json.dumps(body).encode() for name, body in bodies.items()}
    nest = 30_000
    out["JSON nested 30000 deep (400)"] = (
        b'{"model": "sim-mini", "x": ' + b"[" * nest + b"]" * nest + b"}"
    )
    for name, body in out.items():
        assert len(body) < 64 * 1024, f"{name} is {len(body)} bytes"
    return out


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(repeat: int) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "server.cli.main", "--http-port", str(port),
                "--grpc-port", str(free_port()), "--log-level", "WARNING"]  # fmt: skip
        # In the scratch folder: the embedded default keeps its ledger in ./gateway.db.
        proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            wait_port(port)
            headers = {"x-api-key": KEY, "content-type": "application/json"}
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
                for _ in range(20):  # warm up
                    client.post("/v1/chat/completions", json={"model": "sim-mini",
                                "messages": HELLO}, headers=headers)  # fmt: skip
                base = peak_mb(proc.pid)
                print(f"gateway peak RSS after warm-up: {base:.1f} MB; {repeat} requests each\n")
                print(
                    "| request | bytes | status | CPU ms/request | wall ms (max) | peak RSS +MB |"
                )
                print("|---|---|---|---|---|---|")
                for name, body in requests().items():
                    before, walls, status = cpu_s(proc.pid), [], 0
                    for _ in range(repeat):
                        started = time.perf_counter()
                        status = client.post(
                            "/v1/chat/completions", content=body, headers=headers
                        ).status_code
                        walls.append(time.perf_counter() - started)
                    cpu = (cpu_s(proc.pid) - before) / repeat * 1000
                    grown = peak_mb(proc.pid) - base
                    print(f"| {name} | {len(body)} | {status} | {cpu:.1f} | "
                          f"{max(walls) * 1000:.0f} | {grown:.1f} |")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    main(parser.parse_args().repeat)
