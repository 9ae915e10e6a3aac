"""Instructions per request, counted by callgrind: a figure that does not move with what
else the machine runs, so two trees can be compared on a shared machine.

For each tree (a checkout of this project; default: this one) and for the proxy floor
(bench/proxy_floor.py), the server runs under `valgrind --tool=callgrind` with counting
off; once it listens, `--warmup` requests are sent, counting is turned on
(`callgrind_control -i on`), `--requests` more are sent one after another on one
keep-alive connection, and the counts are dumped. Instructions per request is the
dump's total over the requests: the server's whole work for them, its event loop,
ledger writes and timers included, nothing of start-up. The REST unary and streamed
chat completions go through the `openai` adapter to the nginx of bench.load, as there.

    python -m bench.instructions                                 # this tree and the floor
    python -m bench.instructions --tree /path/to/other/checkout  # then that tree too
    python -m bench.instructions --set operations.request_log=false  # a default turned off

`--set SECTION.FIELD=JSON` (repeatable) counts this tree once more with each change to
its configuration, so that what a default feature costs is measured beside it.

Counts are exact for one binary and input, but a server's timers fire by wall-clock time,
which callgrind stretches: runs of one tree differ by a few tenths of a percent.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from bench.load_servers import (
    KEY,
    ROOT,
    STREAM_MODEL,
    UNARY_MODEL,
    free_port,
    gateway_config,
    start_nginx,
    wait_port,
)

START_TIMEOUT_S = 600.0  # an import under valgrind takes a minute on a loaded machine
BODY = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}


def send(port: int, model: str, count: int) -> None:
    """`count` chat completions on one keep-alive connection, each read to its end."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({**BODY, "model": model, "stream": model == STREAM_MODEL})
    headers = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
    for _ in range(count):
        conn.request("POST", "/v1/chat/completions", body, headers)
        reply = conn.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}: {data[:300]!r}")
    conn.close()


def counted(argv: list[str], cwd: Path, env: dict[str, str], port: int, model: str,
            warmup: int, requests: int, tmp: Path) -> float:  # fmt: skip
    """Instructions per request of the server `argv` listening on `port`."""
    out = tmp / f"callgrind.{port}.out"
    log = tmp / f"server.{port}.log"
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    with log.open("wb") as sink:
        proc = subprocess.Popen(valgrind + argv, cwd=cwd, env=env, stdout=sink, stderr=sink)
    try:
        wait_port(port, proc, "the server under callgrind", START_TIMEOUT_S)
        send(port, model, warmup)
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True,
                       capture_output=True)  # fmt: skip
        send(port, model, requests)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True,
                       capture_output=True)  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(120)
    totals = 0
    for dump in tmp.glob(f"callgrind.{port}.out*"):
        if m := re.search(r"^summary:\s*(\d+)", dump.read_text(errors="replace"), re.M):
            totals = max(totals, int(m.group(1)))
    return totals / requests


def gateway_argv(
    tree: Path, tmp: Path, upstream_port: int, change: str | None = None
) -> tuple[list[str], int]:
    config = gateway_config(upstream_port, tmp / f"{tree.name}-{free_port()}.db")
    if change is not None:
        dotted, _, value = change.partition("=")
        *sections, field = dotted.split(".")
        place = config
        for section in sections:
            place = place.setdefault(section, {})
        place[field] = json.loads(value)
    path = tmp / f"gateway-{config['server']['http_port']}.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "server.cli.main", "--config", str(path)]
    return argv + ["--log-level", "WARNING"], config["server"]["http_port"]


def env_of(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'generated'}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout to count (repeatable)")  # fmt: skip
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=JSON",
                        help="count this tree again with this configuration change")  # fmt: skip
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("bench.instructions needs valgrind (Debian package valgrind)")
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="instructions-") as name:
        tmp = Path(name)
        nginx, upstream_port = start_nginx(tmp)
        try:
            for mode, model in (("unary", UNARY_MODEL), ("stream", STREAM_MODEL)):
                if not args.no_floor:
                    port = free_port()
                    argv = [sys.executable, "-m", "bench.proxy_floor", "--port", str(port),
                            "--upstream", f"http://127.0.0.1:{upstream_port}"]  # fmt: skip
                    each = counted(argv, ROOT, env_of(ROOT), port, model, args.warmup,
                                   args.requests, tmp)  # fmt: skip
                    rows.append(("proxy floor", mode, each))
                    print(
                        f"proxy floor {mode}: {each / 1e6:.2f} M instructions/request", flush=True
                    )
                runs = [(tree, None) for tree in trees] + [(ROOT, change) for change in args.set]
                for tree, change in runs:
                    argv, port = gateway_argv(tree, tmp, upstream_port, change)
                    each = counted(argv, tree, env_of(tree), port, model, args.warmup,
                                   args.requests, tmp)  # fmt: skip
                    name = f"{tree} with {change}" if change else str(tree)
                    rows.append((name, mode, each))
                    print(f"{name} {mode}: {each / 1e6:.2f} M instructions/request", flush=True)
        finally:
            nginx.stop()
    print("\n| server | mode | M instructions per request |\n|---|---|---:|")
    for server, mode, each in rows:
        print(f"| {server} | {mode} | {each / 1e6:.2f} |")


if __name__ == "__main__":
    main()
