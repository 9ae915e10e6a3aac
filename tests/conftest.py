"""Fixtures every test can use, and the markers that say what a test needs.

A test that takes the `pg_url` fixture is marked `postgres`, one that takes
`redis_prefix` is marked `redis`, so `pytest -m "not postgres and not redis"` runs
the suite on a machine without those services; `browser` marks the tests that drive
headless Chromium.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.gateways import default_config_dict, running_gateway

# The PostgreSQL database and Redis prefix private to the session.
pytest_plugins = ("tests.support.shared_state",)

NEEDS = {
    "pg_url": "postgres",
    "redis_prefix": "redis",
    "redis_cluster_url": "redis",
    "redis_sentinel_url": "redis",
}


def pytest_configure(config: pytest.Config) -> None:
    # Every client the tests make (httpx's, each SDK's, the gateways they start) trusts
    # one certificate of the session's own instead of the roots httpx would load from
    # certifi: no test reaches a public host, and loading those roots costs 50 ms of
    # CPU per client, thousands of times in a run. A test of TLS names its own.
    if "SSL_CERT_FILE" in os.environ:
        return
    from tests.support.tls_front import certificate

    folder = Path(tempfile.mkdtemp(prefix="gateway-tests-ca-"))
    (folder / "trusted.pem").write_bytes(certificate()[0])
    os.environ["SSL_CERT_FILE"] = str(folder / "trusted.pem")
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in NEEDS:
                item.add_marker(NEEDS[fixture])


@pytest.fixture
def config_dict():
    """A fresh copy of the default config with instant simulated providers, ports 0."""
    return default_config_dict()


@pytest.fixture
async def gateway(config_dict):
    """A gateway (gRPC + in-process facade) serving `config_dict`."""
    async with running_gateway(config_dict) as running:
        yield running


@pytest.fixture
async def stubs(gateway):
    """gRPC stubs connected to the `gateway` fixture."""
    import grpc

    from tests.support.grpc_stubs import Stubs

    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        yield Stubs(channel)
