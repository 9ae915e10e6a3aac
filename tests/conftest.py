"""Fixtures every test can use, and the markers that say what a test needs.

A test that takes the `pg_url` fixture is marked `postgres`, one that takes
`redis_prefix` is marked `redis`, so `pytest -m "not postgres and not redis"` runs
the suite on a machine without those services; `browser` marks the tests that drive
headless Chromium.
"""

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
