"""Metrics on /metrics and the per-request log line, over gRPC and REST alike: after a
mixed run the metrics agree with the usage ledger, row for row and dollar for dollar."""

from __future__ import annotations

import io
import json
import logging
import time
from collections import defaultdict

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import model_service_pb2 as models
from prometheus_client.parser import text_string_to_metric_families

from server.ops import requestlog
from tests.support.gateways import API_KEY, ROUTER_KEY, eventually, running_gateway
from tests.support.grpc_stubs import Stubs
from tests.support.shared_state import AdminClient, config_with

HELLO = [chat.ChatMessage(role="user", content="hello")]


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Metric samples by sample name (`gateway_requests_total`...)."""
    found: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[s.name].append((s.labels, s.value))
    return found


def total(found, name: str, **labels: str) -> float:  # type: ignore[no-untyped-def]
    return sum(
        v for lab, v in found.get(name, []) if all(lab.get(k) == x for k, x in labels.items())
    )


def mixed_config(tmp_path) -> dict:  # type: ignore[no-untyped-def]
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    by_id = {m["id"]: m for m in data["models"]}
    # sim-mini's primary always fails: every call fails over to its backup.
    by_id["sim-mini"]["providers"][0]["params"]["error_rate"] = 1
    # sim-pro's streams break after three tokens: errors after the upstream answered.
    for provider in by_id["sim-pro"]["providers"]:
        provider["params"]["fail_after_tokens"] = 3
    return data


async def test_metrics_reconcile_with_the_ledger(tmp_path):
    async with running_gateway(mixed_config(tmp_path)) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
            httpx.AsyncClient(base_url=base, timeout=10) as rest,
        ):
            stubs = Stubs(channel)
            key_id, secret = await AdminClient(channel).create("metered", requests_per_minute=1000)
            limited_id, limited = await AdminClient(channel).create("tight", requests_per_minute=1)
            mine = (("x-api-key", secret),)
            for _ in range(6):  # gRPC unary, each failing over from sim-mini-primary
                await stubs.chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO),
                    metadata=mine,
                )
            for _ in range(3):  # gRPC streams
                stream = stubs.chat.StreamChatCompletion(
                    chat.StreamChatCompletionRequest(model="sim-standard", messages=HELLO),
                    metadata=mine,
                )
                assert [c async for c in stream][-1].choices[0].finish_reason == "stop"
            body = {"model": "sim-standard", "messages": [{"role": "user", "content": "hi"}]}
            headers = {"x-api-key": secret}
            for _ in range(3):  # REST SSE streams
                reply = await rest.post(
                    "/v1/chat/completions", json={**body, "stream": True}, headers=headers
                )
                assert reply.text.rstrip().endswith("data: [DONE]")
            broken = await rest.post(  # a stream cut after its first tokens
                "/v1/chat/completions",
                json={"model": "sim-pro", "messages": body["messages"], "stream": True},
                headers=headers,
            )
            assert '"error"' in broken.text
            bad = await rest.post(
                "/v1/chat/completions", json={**body, "temperature": 7}, headers=headers
            )
            assert bad.status_code == 400
            missing = await rest.post(
                "/v1/chat/completions", json={**body, "model": "nope"}, headers=headers
            )
            assert missing.status_code == 404
            tight = {"x-api-key": limited}
            assert (await rest.post("/v1/chat/completions", json=body, headers=tight)).is_success
            assert (
                await rest.post("/v1/chat/completions", json=body, headers=tight)
            ).status_code == 429
            routed = await rest.post(
                "/v1/infer",
                json={"prompt": "hi", "profile": "economy"},
                headers={"x-router-key": ROUTER_KEY},
            )
            assert routed.is_success
            assert (
                await rest.get("/v1/models", headers={"x-api-key": "wrong-key"})
            ).status_code == 401

            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch("SELECT * FROM usage_records")
            scraped = await rest.get("/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    found = samples(scraped.text)

    # Same request count, same total cost, same tokens as the ledger (admin calls too).
    accounted = [(lab, v) for lab, v in found["gateway_requests_total"] if lab["key_id"] != ""]
    assert sum(v for _, v in accounted) == len(rows)
    assert sum(v for _, v in found["gateway_cost_usd_total"]) == pytest.approx(
        sum(r["total_cost_usd"] or 0 for r in rows), rel=1e-9
    )
    for key in (key_id, limited_id):
        assert total(found, "gateway_requests_total", key_id=key) == sum(
            1 for r in rows if r["key_id"] == key
        )
    output_tokens = total(found, "gen_ai_client_token_usage_sum", gen_ai_token_type="output")
    assert output_tokens == sum(r["completion_tokens"] for r in rows)
    # The unauthenticated call is counted, under no key.
    assert total(found, "gateway_requests_total", key_id="", status="UNAUTHENTICATED") == 1

    assert total(found, "gateway_requests_total", rpc="StreamChatCompletion", status="OK") == 6
    assert (
        total(found, "gateway_request_errors_total", reason="UPSTREAM_ERROR", model="sim-pro") == 1
    )
    assert total(found, "gateway_rate_limit_rejections_total", key_id=limited_id) == 1
    assert total(found, "gateway_failovers_total", provider="sim-mini-primary") >= 6
    assert total(found, "gateway_routing_decisions_total", profile="economy") == 1
    # sim-mini's primary failed every time: its circuit is open (2).
    assert total(found, "gateway_circuit_breaker_state", provider="sim-mini-primary") == 2
    assert total(found, "gateway_circuit_breaker_state", provider="sim-standard-primary") == 0
    assert total(found, "gateway_ledger_buffered_rows") == 0
    assert total(found, "gateway_ledger_written_rows_total") >= len(rows) - 1
    overhead = total(found, "gateway_overhead_seconds_count", rpc="CreateChatCompletion")
    assert overhead >= 6 + 2 + 2  # gRPC unary, the refused and the tight ones
    assert total(found, "gen_ai_server_time_to_first_token_seconds_count") > 0
    assert (
        total(found, "gen_ai_client_operation_duration_seconds_count", gen_ai_operation_name="chat")
        > 0
    )
    # Key ids only: no secret appears anywhere in the exposition.
    for s in (secret, limited, API_KEY, ROUTER_KEY):
        assert s not in scraped.text


@pytest.fixture
def request_lines():
    """Every request log line written while the test runs, parsed."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(requestlog.LOGGER)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.mark.parametrize("log_text", [False, True])
async def test_one_json_line_per_request(config_dict, request_lines, log_text):
    config_dict["operations"] = {"log_text": log_text}
    async with running_gateway(config_dict) as gw:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest:
            reply = await rest.post(
                "/v1/chat/completions",
                json={
                    "model": "sim-mini",
                    "messages": [{"role": "user", "content": "secret plan"}],
                },
                headers={"x-api-key": API_KEY, "x-request-id": "req-log-1"},
            )
            unknown = await rest.get("/v1/models", headers={"x-api-key": "gw-not-a-real-key-000"})
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            echoed = Stubs(channel).chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO),
                metadata=(("x-api-key", API_KEY), ("x-request-id", "req-log-2")),
            )
            await echoed
            assert dict(await echoed.initial_metadata())["x-request-id"] == "req-log-2"
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await Stubs(channel).models.ListModels(
                    models.ListModelsRequest(), metadata=(("x-api-key", "gw-wrong-key-0000000"),)
                )
            grpc_generated = dict(refused.value.trailing_metadata())["x-request-id"]
    assert reply.headers["x-request-id"] == "req-log-1"
    assert unknown.status_code == 401
    generated = unknown.headers["x-request-id"]
    lines = request_lines()
    by_id = {line["request_id"]: line for line in lines}
    assert len(lines) == 4
    assert set(by_id) == {"req-log-1", "req-log-2", generated, grpc_generated}
    ok = by_id["req-log-1"]
    usage = reply.json()["usage"]
    assert ok["rpc"] == "CreateChatCompletion" and ok["status"] == "OK"
    assert (ok["model"], ok["provider"], ok["key_id"]) == (
        "sim-mini",
        "sim-mini-primary",
        "cfg-dev-api",
    )
    assert ok["prompt_tokens"] == usage["prompt_tokens"]
    assert ok["completion_tokens"] == usage["completion_tokens"]
    assert ok["cost_usd"] == pytest.approx(usage["total_cost_usd"])
    assert ok["latency_ms"] > 0 and ok["ttft_ms"] is not None
    refused = by_id[generated]
    assert (refused["status"], refused["reason"], refused["key_id"]) == (
        "UNAUTHENTICATED", "UNAUTHENTICATED", "",
    )  # fmt: skip
    assert by_id["req-log-2"]["status"] == "OK"  # gRPC is logged alike
    text = json.dumps(lines)
    assert API_KEY not in text and "gw-not-a-real-key" not in text and "gw-wrong-key" not in text
    if log_text:
        assert ok["prompt"] == [{"role": "user", "content": "secret plan"}]
        assert ok["completion"] == reply.json()["choices"][0]["message"]["content"]
    else:
        assert "secret plan" not in text and "prompt" not in ok and "completion" not in ok


async def test_the_event_loop_lag_shows_a_blocked_worker_and_its_recovery():
    """A worker whose loop is held (a saturated worker, here a blocking call) shows it
    as gateway_event_loop_lag_seconds, the worst lag of the last second; once the loop
    runs freely again, the gauge falls back."""
    async with running_gateway() as gw:
        rest = httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}")
        async with rest:

            async def lag() -> float:
                scraped = await rest.get("/metrics")
                return total(samples(scraped.text), "gateway_event_loop_lag_seconds")

            async def stalled() -> None:
                assert await lag() >= 0.3

            async def recovered() -> None:
                assert await lag() < 0.2

            time.sleep(0.4)  # noqa: ASYNC251 - the stall itself: the loop does nothing else
            await eventually(stalled)  # seen once the window with the stall ends
            await eventually(recovered)  # then a window of a free loop


@pytest.mark.parametrize("off", ["request_metrics", "request_log"])
async def test_request_metrics_and_the_request_log_turn_off_apart(config_dict, request_lines, off):
    """Either per-request output turned off (each costs CPU per request): the other is
    still written. One pass hands a request to both, metrics first, so once the one left
    on shows the request, the one turned off has had its chance."""
    config_dict["operations"] = {off: False}
    async with (
        running_gateway(config_dict) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as rest,
    ):
        reply = await rest.post(
            "/v1/chat/completions",
            json={"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]},
            headers={"x-api-key": API_KEY, "x-request-id": "req-off-1"},
        )
        assert reply.status_code == 200

        async def counted() -> float:
            found = samples((await rest.get("/metrics")).text)
            return total(found, "gateway_requests_total", rpc="CreateChatCompletion")

        async def seen() -> None:
            if off == "request_metrics":
                assert [line["request_id"] for line in request_lines()] == ["req-off-1"]
            else:
                assert await counted() == 1

        await eventually(seen)
        if off == "request_metrics":
            assert await counted() == 0
        else:
            assert request_lines() == []
