"""Cold start: from a process's start to its first answered chat completion, for the
gateway from the checkout's venv (the baseline) and from the image (`make image`) started
by podman, in one run; with podman starting a container that exits at once, to tell the
runtime's own share. Writes bench/results/cold_start.md.

Run: python -m bench.cold_start [--runs N] [--image localhost/gateway:dev]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
KEY = "gw-dev-api-key-0000000000"  # the embedded default's development key
CHAT = {"model": "sim-mini", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_answer(port: int, started: float, alive: Callable[[], bool]) -> float:
    """Seconds from `started` to the first 200 of a chat completion on `port`."""
    while True:
        if not alive():
            raise RuntimeError("the gateway stopped before answering")
        try:
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json=CHAT, headers={"x-api-key": KEY}, timeout=5,
            )  # fmt: skip
            if answer.status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.005)


def venv_start() -> float:
    http = free_port()
    argv = [str(ROOT / ".venv/bin/gateway"), "serve", "--http-port", str(http),
            "--grpc-port", str(free_port()), "--sqlite-path", ":memory:"]  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return first_answer(http, started, lambda: process.poll() is None)
    finally:
        process.terminate()
        process.wait()


def image_start(image: str) -> float:
    http = free_port()
    name = f"cold-start-{http}"
    argv = ["podman", "run", "-d", "--name", name, "--read-only", "--network", "host", image,
            "serve", "--host", "127.0.0.1", "--http-port", str(http), "--grpc-port",
            str(free_port())]  # fmt: skip
    started = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True)
    try:
        return first_answer(http, started, lambda: True)
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)


def runtime_only(image: str) -> float:
    """A container of the image that runs the interpreter and exits: podman's own share."""
    started = time.monotonic()
    subprocess.run(["podman", "run", "--rm", "--network", "host", "--entrypoint",
                    "/opt/gateway/bin/python", image, "-c", "pass"], check=True)  # fmt: skip
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default="localhost/gateway:dev")
    args = parser.parse_args()
    # runc cannot raise limits above this process's own, which podman's defaults ask for.
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    conf = Path(tempfile.mkdtemp()) / "containers.conf"
    conf.write_text(f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", '
                    '"nproc=4096:4096"]\n[engine]\nruntime = "runc"\n')  # fmt: skip
    os.environ["CONTAINERS_CONF"] = str(conf)
    rows = {
        "gateway from the venv (baseline)": [venv_start() for _ in range(args.runs)],
        f"image {args.image} under podman": [image_start(args.image) for _ in range(args.runs)],
        "podman: a container of the image running `python -c pass`": [
            runtime_only(args.image) for _ in range(args.runs)
        ],
    }
    base = statistics.median(rows["gateway from the venv (baseline)"])
    lines = [
        "# Cold start", "",
        f"Process start to the first answered chat completion, {args.runs} runs each "
        f"(`python -m bench.cold_start`), load average {os.getloadavg()[0]:.1f}.", "",
        "| what | median s | min s | max s | / baseline |", "|---|---|---|---|---|",
    ]  # fmt: skip
    for what, times in rows.items():
        median = statistics.median(times)
        lines.append(f"| {what} | {median:.2f} | {min(times):.2f} | {max(times):.2f} | "
                     f"{median / base:.2f}x |")  # fmt: skip
    report = "\n".join(lines) + "\n"
    (ROOT / "bench/results/cold_start.md").write_text(report)
    sys.stdout.write(report)


if __name__ == "__main__":
    main()
