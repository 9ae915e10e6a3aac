"""What the deployment checks share: podman configured for this machine (runc; limits no
higher than this process may set, which runc otherwise fails to raise), free loopback
ports, the image under test and a wait for a gateway's readiness."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

IMAGE = os.environ.get("GATEWAY_IMAGE", "localhost/gateway:dev")
KEY = "deploy-check-key-0000000000"
MODEL = {
    "id": "sim-mini", "owned_by": "simulated", "created": 1767225600,
    "price": {"input": 0.15, "output": 0.60},
    "providers": [{"id": "sim", "type": "primary", "adapter": "simulated",
                   "params": {"ttft_ms": 20, "tokens_per_second": 400}}],
}  # fmt: skip
ROUTING = {
    "policy": "ordered",
    "profiles": {p: ["sim-mini"] for p in ("economy", "balanced", "quality")},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, timeout_s: float = 60.0, alive=lambda: True) -> float:  # type: ignore[no-untyped-def]
    """Seconds until `url`/readyz answered 200; fails when `alive()` turns false first."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        assert alive(), "the gateway stopped before it was ready"
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{url} not ready within {timeout_s} s")


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (.ci/run installs it)")
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc=4096:4096"]\n'
        '[engine]\nruntime = "runc"\n'
    )
    os.environ["CONTAINERS_CONF"] = str(conf)
    found = subprocess.run(["podman", "image", "exists", IMAGE])
    if found.returncode != 0:
        pytest.fail(f"no image {IMAGE}: run `make image` first")
    yield ["podman"]


def state_folder(tmp_path: Path) -> Path:
    """A folder the image's user (10001) may write, for its state."""
    folder = tmp_path / "state"
    folder.mkdir()
    os.chown(folder, 10001, 10001)
    return folder
