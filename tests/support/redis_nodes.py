"""Redis topologies started by the tests themselves, on free loopback ports in temporary
folders, and stopped afterwards: a six-node Redis Cluster (three primaries with a
replica each) and a primary with a replica watched by a Sentinel. Tests that use them
are skipped, saying why, where redis-server or redis-cli is not installed."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.ports import steady_port

# The bound on a topology's start, for a loaded machine; they form in a few seconds.
START_DEADLINE_S = 60.0
START_ATTEMPTS = 5


def require_redis() -> None:
    for tool in ("redis-server", "redis-cli"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (Debian package redis-server)")


# A cluster node also listens on its port + BUS_OFFSET, for its peers.
BUS_OFFSET = 10_000


def cli(port: int, *args: str) -> str:
    done = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return done.stdout.strip()


def wait_until(check, what: str, deadline_s: float = START_DEADLINE_S) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {deadline_s}s")
        time.sleep(0.05)


def _answers(port: int, process: subprocess.Popen[bytes]) -> bool:
    """Whether this process, not another on its port, answers there; False once it
    has exited (its port was taken)."""
    deadline = time.monotonic() + START_DEADLINE_S
    while process.poll() is None:
        if f"process_id:{process.pid}" in cli(port, "info", "server"):
            return True
        if time.monotonic() > deadline:
            process.kill()
            raise TimeoutError(f"redis on {port}: not within {START_DEADLINE_S}s")
        time.sleep(0.05)
    return False


@dataclass
class Nodes:
    """Redis processes this test session started; `stop` ends every one."""

    folder: Path
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, *options: str, config: str | None = None) -> int:
        """Starts a node on a free port and returns the port. A port another session's
        node took meanwhile makes this node exit at once; it then tries another."""
        for _ in range(START_ATTEMPTS):
            port = steady_port(BUS_OFFSET)
            home = self.folder / str(port)
            home.mkdir()
            argv = ["redis-server"]
            if config is not None:  # a Sentinel rewrites its config file
                (home / "node.conf").write_text(config)
                argv.append(str(home / "node.conf"))
            argv += ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(home)]
            argv += ["--save", "", "--appendonly", "no", *options]
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if _answers(port, process):
                self.processes[port] = process
                return port
        raise RuntimeError(f"no redis-server started in {START_ATTEMPTS} attempts")

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def redis_cluster(folder: Path, node_timeout_ms: int = 30_000) -> Iterator[str]:
    """A six-node Redis Cluster; yields its `redis+cluster://` URL. A node that does not
    answer its peers for `node_timeout_ms` is failed over: long by default, so that a
    loaded machine never fails over a node a test did not stop (a write acknowledged by
    the old primary could then be lost); a test that kills a primary sets it short."""
    require_redis()
    nodes = Nodes(folder)
    try:
        ports = [
            nodes.start("--cluster-enabled", "yes", "--cluster-node-timeout", str(node_timeout_ms))
            for _ in range(6)
        ]
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert created.returncode == 0, created.stdout + created.stderr

        def formed() -> bool:
            return all("cluster_state:ok" in cli(p, "cluster", "info") for p in ports)

        wait_until(formed, "the cluster")
        yield "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports[:2])
    finally:
        nodes.stop()


@dataclass(frozen=True)
class SentinelSet:
    url: str
    primary: int
    replica: int
    sentinel: int
    service: str

    def primary_now(self) -> int:
        """The primary's port as the Sentinel names it."""
        _, port = cli(self.sentinel, "sentinel", "get-master-addr-by-name", self.service).split()
        return int(port)


@contextmanager
def redis_sentinel(folder: Path, service: str = "gateway") -> Iterator[SentinelSet]:
    """A primary, its replica and a Sentinel watching them. The URL names a Sentinel
    that is not running first, so a client must try the next."""
    require_redis()
    nodes = Nodes(folder)
    absent = steady_port(BUS_OFFSET)
    try:
        primary = nodes.start()
        replica = nodes.start("--replicaof", "127.0.0.1", str(primary))
        wait_until(
            lambda: "master_link_status:up" in cli(replica, "info", "replication"),
            "the replica's link",
        )
        config = (
            f"sentinel monitor {service} 127.0.0.1 {primary} 1\n"
            f"sentinel down-after-milliseconds {service} 1000\n"
            f"sentinel failover-timeout {service} 5000\n"
        )
        sentinel = nodes.start("--sentinel", config=config)
        wait_until(
            lambda: f"{replica}" in cli(sentinel, "sentinel", "replicas", service),
            "the Sentinel's view of the replica",
        )
        url = f"redis+sentinel://127.0.0.1:{absent},127.0.0.1:{sentinel}/{service}"
        yield SentinelSet(url, primary, replica, sentinel, service)
    finally:
        nodes.stop()
