"""Readiness (/readyz, the edge tier's too), providers disabled and enabled at run time
through the admin API, and the metrics listener of a gRPC-only gateway."""

from __future__ import annotations

import grpc
import httpx
import yaml
from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import admin_service_pb2_grpc

from server.base import config
from tests.support.gateways import (
    API_KEY,
    eventually,
    running_gateway,
    start_process,
    stop_process,
    write_config,
)
from tests.support.grpc_stubs import details
from tests.support.shared_state import ADMIN, ADMIN_KEY, config_with
from tests.support.upstreams.base import refused_url

ADMIN_HEADERS = {"x-admin-key": ADMIN_KEY}
API_HEADERS = {"x-api-key": API_KEY}


async def providers(rest: httpx.AsyncClient, model: str) -> dict[str, tuple[bool, str]]:
    listing = await rest.get("/v1/providers", params={"model": model}, headers=API_HEADERS)
    return {p["id"]: (p["enabled"], p["health"]) for p in listing.json()["providers"]}


async def test_providers_disabled_and_enabled_at_run_time():
    async with running_gateway(config_with()) as gw:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest:
            assert (await rest.get("/readyz")).status_code == 200
            off = await rest.post(
                "/v1/admin/providers/sim-mini-primary:disable", json={}, headers=ADMIN_HEADERS
            )
            assert off.status_code == 200, off.text
            assert off.json()["provider"]["enabled"] is False
            assert off.json()["provider"]["health"] == "disabled"
            assert off.json()["model"] == "sim-mini"
            assert (await providers(rest, "sim-mini"))["sim-mini-primary"] == (False, "disabled")
            # New calls skip it: the backup serves.
            reply = await rest.post(
                "/v1/chat/completions",
                json={"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]},
                headers=API_HEADERS,
            )
            assert reply.status_code == 200
            rows = gw.gateway.accounts.ledger
            await rows.flush()
            served = await gw.gateway.store.db.fetch(
                "SELECT provider FROM usage_records WHERE method = 'CreateChatCompletion'"
            )
            assert [r["provider"] for r in served] == ["sim-mini-backup"]

            # Both providers off: the model cannot be served, so the gateway is not ready.
            await rest.post(
                "/v1/admin/providers/sim-mini-backup:disable", json={}, headers=ADMIN_HEADERS
            )
            ready = await rest.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["problems"] == [
                "model sim-mini: no enabled provider with a closed circuit"
            ]
            on = await rest.post(
                "/v1/admin/providers/sim-mini-primary:enable", json={}, headers=ADMIN_HEADERS
            )
            assert on.json()["provider"]["enabled"] is True
            assert (await providers(rest, "sim-mini"))["sim-mini-primary"] == (True, "healthy")
            assert (await rest.get("/readyz")).status_code == 200

            unknown = await rest.post(
                "/v1/admin/providers/nope:enable", json={}, headers=ADMIN_HEADERS
            )
            assert unknown.status_code == 404
            refused = await rest.post(
                "/v1/admin/providers/sim-mini-primary:disable", json={}, headers=API_HEADERS
            )
            assert refused.status_code == 401
            assert (await providers(rest, "sim-mini"))["sim-mini-primary"] == (True, "healthy")

        # The same over gRPC.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            stub = admin_service_pb2_grpc.AdminServiceStub(channel)
            answer = await stub.DisableProvider(
                admin_pb.DisableProviderRequest(provider_id="sim-pro-backup"), metadata=ADMIN
            )
            assert (answer.provider.id, answer.provider.enabled) == ("sim-pro-backup", False)
            try:
                await stub.ReloadConfig(admin_pb.ReloadConfigRequest(), metadata=ADMIN)
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert details(exc)["ErrorInfo"].reason == "CONFIG_INVALID"  # type: ignore[attr-defined]
                assert "no file to reload" in (exc.details() or "")
            else:
                raise AssertionError("a gateway without a config file cannot reload")


async def test_readiness_reports_unreachable_storage():
    async with (
        running_gateway(config_with()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest,
    ):
        assert (await rest.get("/readyz")).status_code == 200
        assert gw.gateway.store is not None
        await gw.gateway.store.db.close()
        ready = await rest.get("/readyz")
        assert (await rest.get("/healthz")).status_code == 200  # alive all the same
    assert ready.status_code == 503
    assert any(p.startswith("storage: unreachable") for p in ready.json()["problems"])


async def test_edge_tier_readiness_follows_the_remote_gateway(config_dict):
    async with running_gateway(config_dict) as gw:
        target = f"127.0.0.1:{gw.grpc_port}"
        async with (
            running_gateway(config_dict, grpc_target=target) as edge,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{edge.http_port}") as rest,
        ):
            assert (await rest.get("/healthz")).status_code == 200
            assert (await rest.get("/readyz")).json() == {"ready": True, "problems": []}
            await gw.drain()  # the remote gateway starts shutting down
            ready = await rest.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["problems"] == ["remote gateway: NOT_SERVING"]
    async with (
        running_gateway(config_dict, grpc_target=refused_url().removeprefix("http://")) as edge,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{edge.http_port}") as rest,
    ):
        ready = await rest.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["problems"][0].startswith("remote gateway: unreachable")


async def test_grpc_only_gateway_serves_metrics_on_its_own_port(tmp_path):
    path = write_config(tmp_path, config_with(sqlite_path=str(tmp_path / "gw.db")))
    gw = start_process("--config", str(path), "--no-http", "--metrics-port", "0")
    try:
        assert gw.http_port is None and gw.grpc_port, "".join(gw.output)
        line = next(x for x in gw.output if "metrics listening" in x)
        port = int(line.split(":")[-1].split("/")[0])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as rest:
            scraped = await rest.get("/metrics")
            assert scraped.status_code == 200
            assert "gateway_circuit_breaker_state" in scraped.text
            assert (await rest.get("/readyz")).status_code == 200
            assert (await rest.get("/v1/models", headers=API_HEADERS)).status_code == 404
    finally:
        output = stop_process(gw)
    assert gw.process.returncode == 0, output


async def test_workers_sharing_a_multiprocess_directory_report_together(tmp_path):
    """Two gateway processes with one PROMETHEUS_MULTIPROC_DIR (as `--workers N` runs
    them): either one's /metrics counts the calls of both."""
    shared = tmp_path / "prometheus"
    shared.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(shared)}
    workers = []
    try:
        for name in ("a", "b"):
            data = config_with(sqlite_path=str(tmp_path / f"{name}.db"))
            path = tmp_path / name
            path.mkdir()
            workers.append(start_process("--config", str(write_config(path, data)), env=env))
        ports = [w.http_port for w in workers]
        assert all(ports), [w.output for w in workers]
        for port, calls in zip(ports, (3, 2), strict=True):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as rest:
                for _ in range(calls):
                    assert (await rest.get("/v1/models", headers=API_HEADERS)).status_code == 200
        # Each worker moves its calls' counts into the shared files once a second.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[0]}") as rest:

            async def both_counted() -> None:
                assert listed((await rest.get("/metrics")).text) == 5

            await eventually(both_counted)
    finally:
        outputs = [stop_process(w) for w in workers]
    assert all(w.process.returncode == 0 for w in workers), outputs


def listed(scraped: str) -> float:
    """The ListModels calls a scrape counts."""
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in scraped.splitlines()
        if line.startswith("gateway_requests_total{") and 'rpc="ListModels"' in line
    )  # fmt: skip


async def test_reload_warns_of_settings_that_need_a_restart(tmp_path):
    data = config_with()
    path = write_config(tmp_path, data)
    async with running_gateway(data) as gw:
        control = gw.gateway.control
        control.source = lambda: (config.parse(yaml.safe_load(path.read_text()), "x"), str(path))
        changed = {**data, "limits": {"window_s": 5}}
        changed["server"] = {**data["server"], "request_timeout_s": 7}
        path.write_text(yaml.safe_dump(changed))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest:
            done = await rest.post("/v1/admin/config:reload", json={}, headers=ADMIN_HEADERS)
            scraped = (await rest.get("/metrics")).text
    assert done.status_code == 200, done.text
    assert done.json()["warnings"] == [
        "server: changed; takes effect after a restart",
        "limits.window_s: changed; takes effect after a restart",
    ]
    assert 'gateway_config_reloads_total{result="ok"} 1.0' in scraped
