import pytest

from tests.support.gateways import default_config_dict, running_gateway


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
