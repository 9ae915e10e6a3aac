"""bench/load.py's outputs: a markdown table (load.md) and the raw figures (load.json)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from bench.load_servers import LITELLM_VERSION, PORTKEY_VERSION, STREAM_CHUNKS

RESULTS = Path(__file__).resolve().parent / "results"
BASELINE, LITELLM = "nginx directly (baseline)", "LiteLLM proxy"
PORTKEY = f"Portkey gateway {PORTKEY_VERSION}"
OURS = "gateway REST, in-process"
# bench/proxy_floor.py: uvicorn and the gateway's upstream client, nothing between them.
FLOOR = "proxy floor (uvicorn + the gateway's client)"
MODE_TITLES = {
    "unary": "Unary chat completion",
    "stream": f"Streamed chat completion ({STREAM_CHUNKS} content chunks, usage chunk, [DONE])",
}


def write(
    args: argparse.Namespace, results: list[dict], grpc_check: dict, started: float, out: Path
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m bench.load " + shlex.join(sys.argv[1:])
    machine = machine_notes()
    raw = {
        "command": command.strip(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "settings": {
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "connections": args.connections,
            "rounds": args.rounds,
            "payload": args.payload,
        },
        "machine": machine,
        "grpc_sample_check": grpc_check,
        "results": results,
    }
    (out / "load.json").write_text(json.dumps(raw, indent=2) + "\n")
    render(out)


def render(out: Path) -> None:
    """(Re)writes load.md from load.json."""
    raw = json.loads((out / "load.json").read_text())
    (out / "load.md").write_text(markdown(raw))
    print((out / "load.md").read_text())


def machine_notes() -> dict[str, str]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "nginx": _version(["nginx", "-v"]),
        "wrk": _version(["wrk", "-v"]),
        "h2load": _version(["h2load", "--version"]),
        "litellm": LITELLM_VERSION,
        "portkey": PORTKEY_VERSION,
        "node": _version(["node", "--version"]),
    }


def _version(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return lines[0] if lines else "?"


def markdown(raw: dict) -> str:
    m = raw["machine"]
    lines = [
        "# Load benchmark",
        "",
        f"Command: `{raw['command']}` ({raw['started']}; {raw['settings']['duration_s']:g} s "
        f"per run after a {raw['settings']['warmup_s']:g} s warm-up, closed loop).",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}, Python {m['python']}; "
        f"{m['nginx']}, {m['wrk']}, {m['h2load']}; LiteLLM {m['litellm']}; "
        f"Portkey {m.get('portkey', '-')} on Node {m.get('node', '-')}.",
        "",
        *(
            [
                "Requests: a coding agent's turn (bench/payloads.py: about 80 KB, a system "
                "prompt, 20 tools with JSON Schemas, 20 rounds of tool calls and results).",
                "",
            ]
            if raw["settings"].get("payload") == "agent"
            else []
        ),
        "Gateway processes and LiteLLM run on core 0; nginx and the load generator (wrk for",
        "HTTP, h2load for gRPC) on core 1. The gateway talks to nginx through its `openai`",
        "adapter (unary upstream call for unary requests, SSE for streams); LiteLLM has one",
        "worker, callbacks and logging off, the same upstream. Targets alternate within each",
        "connection count. The proxy floor (bench/proxy_floor.py) is uvicorn and the gateway's",
        "upstream client with nothing between them (no key, ledger, limits or contract): what",
        "any proxy built on this stack pays, so LiteLLM's CPU over the floor's bounds the ratio",
        "a gateway on it could show.",
        "",
        "- **added p50**: target p50 minus the baseline p50 at the same connection count.",
        "- **CPU ms/req**: user+system CPU of the target's processes (/proc/PID/stat) during",
        "  the run, divided by the requests completed; the edge tier counts both processes;",
        "  the baseline row is nginx's.",
        "- **peak MB**: VmHWM after the run (the in-process gateway serves both the REST and",
        "  the gRPC rows, so its peak is shared); the edge tier sums both processes.",
        "- **errors**: non-2xx plus socket errors seen by wrk/h2load, plus requests the",
        "  gateway's usage ledger recorded with an error status (CANCELLED excluded: those",
        "  are the requests in flight when the load generator stops). h2load only sees HTTP",
        "  status and counts a gRPC error (grpc-status in the trailers) as a success, so a",
        "  gRPC row counts every answer the ledger did not record as OK (a refused key is",
        "  not recorded at all).",
        "- **x LiteLLM**: requests/s divided by LiteLLM's; **LiteLLM CPU /** and **Portkey",
        "  CPU /**: the peer's CPU per request divided by the target's (how many times",
        "  cheaper). Portkey (one Node process, routed by its `x-portkey-provider: openai`",
        "  and `x-portkey-custom-host` headers to the same nginx) is loaded only in the modes",
        "  whose sample request it answers; a mode it fails shows as a failed row.",
        "- **other core-0 %**: busy time of core 0 (/proc/stat) not spent by the target's",
        "  processes, as a share of the run: other jobs on a shared machine, plus kernel",
        "  network work not charged to a process. High values mean a disturbed run; with",
        "  `--rounds N` each cell shows its quietest round (all rounds are in load.json).",
        "",
        f"gRPC sample through a real stub: {_grpc_check_text(raw['grpc_sample_check'])}",
        "",
    ]
    lines += peers(raw["results"])
    for mode, title in MODE_TITLES.items():
        lines += [f"## {title}", "", *table(raw["results"], mode), ""]
    return "\n".join(lines)


def peers(results: list[dict]) -> list[str]:
    """The gateway beside the floor and the two peers: CPU per request at each
    connection count, the peers' over ours, and ours above the floor."""
    lines = ["## Beside the peers", "",
             "CPU ms per request (quietest round); in brackets the peer's over the gateway "
             "REST in-process row's; `above floor` is the gateway's minus the proxy floor's.",
             ""]  # fmt: skip
    for mode in MODES_ORDER:
        mine = quietest([r for r in results if r["mode"] == mode])
        conns = sorted({r["connections"] for r in mine})
        if not conns:
            continue
        lines += [f"| {mode} | " + " | ".join(f"{c} conns" for c in conns) + " |",
                  "|---|" + "---:|" * len(conns)]  # fmt: skip
        ours = {c: _find([r for r in mine if r["connections"] == c], OURS) for c in conns}
        for name in (OURS, FLOOR, PORTKEY, LITELLM):
            cells = []
            for c in conns:
                r = next((r for r in mine if r["connections"] == c and r["target"] == name), None)
                cells.append(_peer_cell(r, ours[c], name))
            if any(cell != "-" for cell in cells):
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
        floor = {c: _find([r for r in mine if r["connections"] == c], FLOOR) for c in conns}
        above = []
        for c in conns:
            mine_c, floor_c = ours[c], floor[c]
            if (
                mine_c
                and floor_c
                and mine_c["cpu_ms_per_request"]
                and floor_c["cpu_ms_per_request"]
            ):
                above.append(f"{mine_c['cpu_ms_per_request'] - floor_c['cpu_ms_per_request']:.2f}")
            else:
                above.append("-")
        lines += ["| gateway above floor | " + " | ".join(above) + " |", ""]
    return lines


MODES_ORDER = ("unary", "stream")


def _peer_cell(r: dict | None, ours: dict | None, name: str) -> str:
    if r is None:
        return "-"
    if "failed" in r:
        return "fails every request"
    if not r["requests"] or r["cpu_ms_per_request"] is None:
        return "no request completed"
    cell = f"{r['cpu_ms_per_request']:.2f}"
    if name != OURS and ours and ours["cpu_ms_per_request"]:
        cell += f" ({r['cpu_ms_per_request'] / ours['cpu_ms_per_request']:.1f}x)"
    return cell


def _grpc_check_text(check: dict) -> str:
    if not check.get("ok"):
        return f"FAILED ({check.get('error', check)})"
    return (
        f"OK (unary reply {check['unary_reply']!r}; stream of {check['stream_messages']} "
        f"messages carrying {STREAM_CHUNKS} content chunks)"
    )


def table(results: list[dict], mode: str) -> list[str]:
    rows = [
        "| conns | target | req/s | p50 ms | p90 ms | p99 ms | added p50 ms | errors "
        "| CPU ms/req | peak MB | x LiteLLM req/s | LiteLLM CPU / | Portkey CPU / "
        "| other core-0 % |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    mine = quietest([r for r in results if r["mode"] == mode])
    for connections in sorted({r["connections"] for r in mine}):
        step = [r for r in mine if r["connections"] == connections]
        base = _find(step, BASELINE)
        peer = _find(step, LITELLM)
        portkey = _find(step, PORTKEY)
        for r in step:
            rows.append(_row(r, base, peer, portkey))
    return rows


def quietest(results: list[dict]) -> list[dict]:
    """One run per (connections, target), in measuring order: of several rounds, the one
    with the least other work on the gateway core (a shared machine is noisy)."""
    chosen: dict[tuple[int, str], dict] = {}
    for r in results:
        cell = (r["connections"], r["target"])
        if cell not in chosen or _noise(r) < _noise(chosen[cell]):
            chosen[cell] = r
    return list(chosen.values())


def _noise(r: dict) -> float:
    if "failed" in r or not r["requests"]:
        return float("inf")
    return r.get("other_core0_pct") or 0.0


def _find(step: list[dict], name: str) -> dict | None:
    return next((r for r in step if r["target"] == name and _noise(r) != float("inf")), None)


def _row(r: dict, base: dict | None, peer: dict | None, portkey: dict | None = None) -> str:
    if "failed" in r:
        reason = " ".join(r["failed"].split())[:160]
        return f"| {r['connections']} | {r['target']} | failed: {reason} |"
    if not r["requests"]:
        return f"| {r['connections']} | {r['target']} | no request completed within the run |"
    added = "-" if base is None or r is base else f"{r['p50_ms'] - base['p50_ms']:+.2f}"
    faster = cheaper = "-"
    if peer is not None and r is not peer and r["target"] != BASELINE:
        if peer["requests_per_s"]:
            faster = f"{r['requests_per_s'] / peer['requests_per_s']:.1f}x"
        if r["cpu_ms_per_request"] and peer["cpu_ms_per_request"]:
            cheaper = f"{peer['cpu_ms_per_request'] / r['cpu_ms_per_request']:.1f}x"
    by_portkey = "-"
    if (
        portkey is not None
        and r is not portkey
        and r["target"] != BASELINE
        and r["cpu_ms_per_request"]
        and portkey["cpu_ms_per_request"]
    ):
        by_portkey = f"{portkey['cpu_ms_per_request'] / r['cpu_ms_per_request']:.1f}x"
    cpu = "-" if r["cpu_ms_per_request"] is None else f"{r['cpu_ms_per_request']:.2f}"
    return (
        f"| {r['connections']} | {r['target']} | {r['requests_per_s']:.0f} "
        f"| {r['p50_ms']:.2f} | {r['p90_ms']:.2f} | {r['p99_ms']:.2f} | {added} "
        f"| {r['errors']} | {cpu} | {r['peak_memory_mb']:.0f} | {faster} | {cheaper} "
        f"| {by_portkey} | {r['other_core0_pct']:.0f} |"
    )
