"""Load generators (wrk for HTTP, h2load for gRPC) and /proc readings for bench/load.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

LUA = Path(__file__).resolve().parent / "load_post.lua"
TOOLS = {"nginx": "nginx", "wrk": "wrk", "h2load": "nghttp2-client", "taskset": "util-linux"}
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
LOAD_CORE = "1"


def missing_tools() -> list[str]:
    """The Debian packages to install for the binaries not on PATH."""
    return sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})


@dataclass
class Load:
    """What one load-generator run measured."""

    requests: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    socket_errors: int
    status_errors: int

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def run_wrk(
    url: str, body: bytes, headers: dict[str, str], connections: int, seconds: int,
    cores: str = LOAD_CORE,
) -> Load:  # fmt: skip
    """A closed-loop wrk run: `connections` connections, each sending the next request
    as soon as the last answer (a whole SSE stream included) is read; on `cores`."""
    with tempfile.NamedTemporaryFile(suffix=".json") as body_file:
        body_file.write(body)
        body_file.flush()
        env = {
            **os.environ,
            "LOAD_BODY_FILE": body_file.name,
            "LOAD_HEADERS": "\n".join(f"{k}: {v}" for k, v in headers.items()),
        }
        argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s"]
        out = _pinned(argv + ["-s", str(LUA), url], env, cores)
    found = re.search(r"^LOAD_RESULT (.*)$", out, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"wrk printed no result:\n{out}")
    r = json.loads(found.group(1))
    return Load(
        requests=r["requests"],
        seconds=r["duration_us"] / 1e6,
        p50_ms=r["p50_us"] / 1000,
        p90_ms=r["p90_us"] / 1000,
        p99_ms=r["p99_us"] / 1000,
        socket_errors=r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"],
        status_errors=r["status_errors"],
    )


def run_h2load(
    url: str, body: bytes, headers: dict[str, str], connections: int, seconds: int
) -> Load:
    """A closed-loop h2load run, one stream per connection at a time. h2load sees HTTP
    status only: a gRPC error (grpc-status in trailers) still counts as a success here."""
    with tempfile.TemporaryDirectory() as tmp:
        body_path, log_path = Path(tmp, "body.bin"), Path(tmp, "requests.log")
        body_path.write_bytes(body)
        argv = ["h2load", "-t1", f"-c{connections}", "-m1", f"-D{seconds}"]
        argv += ["-d", str(body_path), "--log-file", str(log_path)]
        for name, value in headers.items():
            argv += ["-H", f"{name}: {value}"]
        out = _pinned(argv + [url], dict(os.environ))
        lines = log_path.read_text().splitlines()
    latencies = sorted(int(line.split("\t")[2]) / 1000 for line in lines if line)
    counts = _h2load_counts(out)
    return Load(
        requests=counts["succeeded"],
        seconds=seconds,
        p50_ms=percentile(latencies, 50),
        p90_ms=percentile(latencies, 90),
        p99_ms=percentile(latencies, 99),
        socket_errors=counts["errored"] + counts["timeout"],
        status_errors=counts["failed"] - counts["errored"] - counts["timeout"],
    )


def _h2load_counts(out: str) -> dict[str, int]:
    found = re.search(
        r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
        r"(\d+) failed, (\d+) errored, (\d+) timeout",
        out,
    )
    if found is None:
        raise RuntimeError(f"h2load printed no counts:\n{out}")
    names = ("total", "started", "done", "succeeded", "failed", "errored", "timeout")
    return dict(zip(names, map(int, found.groups()), strict=True))


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not ordered:
        return 0.0
    rank = max(1, round(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _pinned(argv: list[str], env: dict[str, str], cores: str = LOAD_CORE) -> str:
    """Runs a load generator on the load core (or `cores`) and returns its output."""
    done = subprocess.run(
        ["taskset", "-c", cores, *argv], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (LiteLLM may serve from a child process)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(_stat_fields(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time of the processes and their descendants, in seconds."""
    ticks = 0
    for pid in {p for root in pids for p in process_tree(root)}:
        try:
            fields = _stat_fields(pid)
        except OSError:
            continue  # ended meanwhile
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / TICKS_PER_S


def peak_memory_mb(pids: list[int]) -> float:
    """Summed VmHWM (peak resident set) of the processes and their descendants."""
    kib = 0
    for pid in {p for root in pids for p in process_tree(root)}:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        kib += int(found.group(1)) if found else 0
    return kib / 1024


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (which may hold spaces): state, ppid, ..."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()


def core_busy_seconds(core: str) -> float:
    """Busy CPU time of one core, whoever used it (/proc/stat: all but idle and iowait)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{core} "):
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, line.split()[1:9])
            return (user + nice + system + irq + softirq + steal) / TICKS_PER_S
    raise RuntimeError(f"no cpu{core} in /proc/stat")
