"""Fuzzing as a habit (issue 12, item 8): schemathesis against the OpenAPI document the
facade generates from the contract, and random bytes and random field values over
gRPC. Bounded in examples and time. Whatever arrives: no 5xx, no traceback in the log,
JSON error bodies, the declared response shapes."""

from __future__ import annotations

import asyncio
import random
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import hypothesis
import pytest
import requests
import schemathesis
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, Phase

from server.base.pipeline import methods
from tests.support.gateways import (
    API_KEY,
    ROUTER_KEY,
    GatewayProcess,
    start_process,
    write_config,
)
from tests.support.shared_state import ADMIN_KEY, config_with

KEYS = {"x-api-key": API_KEY, "x-router-key": ROUTER_KEY, "x-admin-key": ADMIN_KEY}


@pytest.fixture(scope="module")
def gateway_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    data = config_with(sqlite_path=str(tmp / "fuzz.db"))
    data["server"]["request_timeout_s"] = 10
    # The fuzzer reads only the first events of a stream and leaves the rest unread:
    # the send timeout ends such a stream soon (as it would for any such caller).
    data["server"]["send_timeout_s"] = 2
    gw = start_process("--config", str(write_config(tmp, data)))
    assert gw.http_port and gw.grpc_port, "".join(gw.output)
    # Keep reading its output (a request log line per call): a pipe nobody reads fills
    # up and then blocks the gateway's every write.
    assert gw.process.stdout is not None
    reader = threading.Thread(target=lambda: gw.output.extend(gw.process.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    yield gw
    gw.process.send_signal(signal.SIGTERM)
    gw.process.wait(30)
    reader.join(10)
    output = "".join(gw.output)
    assert "Traceback" not in output, output[-4000:]
    assert "Exception in ASGI" not in output, output[-4000:]


# The operations in this many parts, each a test of its own: parallel workers share them.
SHARDS = 12


@pytest.mark.parametrize("shard", range(SHARDS))
def test_rest_fuzz(gateway_process: GatewayProcess, shard: int) -> None:
    schema = schemathesis.openapi.from_url(
        f"http://127.0.0.1:{gateway_process.http_port}/openapi.json"
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations[shard::SHARDS]:

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=12,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def fuzz(case) -> None:  # type: ignore[no-untyped-def]
            _check(case)

        fuzz()


def _check(case) -> None:  # type: ignore[no-untyped-def]
    for headers in (KEYS, {}):
        try:
            # A connection of its own per call: the fuzzer stops reading streams early,
            # and an unfinished stream must not hold up the next request behind it.
            with requests.Session() as session:
                response = case.call(headers=dict(headers), timeout=15, session=session)
        except Exception as exc:
            raise AssertionError(f"{case.method} {case.formatted_path} {case.body!r:.300}") from exc
        where = (case.method, case.formatted_path, response.status_code, response.text[:300])
        assert response.status_code < 500, where
        kind = response.headers.get("content-type") or ""
        kind = kind[0] if isinstance(kind, list) else kind
        if response.status_code >= 400:
            assert kind.startswith("application/json"), where
            body = response.json()
            error = body["error"]
            # OpenAI's shape names a code; Anthropic's (the Messages paths) a type;
            # Google's (the Gemini paths) a status.
            named = (
                error.get("status")
                if isinstance(error.get("code"), int)
                else (error.get("code") if body.get("type") != "error" else error["type"])
            )
            assert isinstance(error["message"], str) and isinstance(named, str), where
            assert "Traceback" not in response.text
        elif kind.startswith("application/json"):
            case.validate_response(response)


# -- gRPC: random bytes and random field values ------------------------------------------


def _random_value(field: FieldDescriptor, rng: random.Random, depth: int) -> object:
    t = FieldDescriptor
    kind = field.type
    if kind == t.TYPE_STRING:
        return rng.choice(["", "sim-mini", "x" * rng.randint(0, 3000), "\x00", "é😀", "economy"])
    if kind == t.TYPE_BOOL:
        return rng.random() < 0.5
    if kind in (t.TYPE_DOUBLE, t.TYPE_FLOAT):
        return rng.choice([0.0, -1.0, 1e308, float("nan"), float("inf"), rng.uniform(-5, 5)])
    if kind in (t.TYPE_INT32, t.TYPE_SINT32, t.TYPE_SFIXED32):
        return rng.choice([0, -1, 1, 2**31 - 1, -(2**31), rng.randint(-100, 5000)])
    if kind in (t.TYPE_INT64, t.TYPE_SINT64, t.TYPE_SFIXED64):
        return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-(10**12), 10**12)])
    if kind in (t.TYPE_UINT32, t.TYPE_FIXED32, t.TYPE_UINT64, t.TYPE_FIXED64):
        return rng.choice([0, 1, 2**32 - 1])
    if kind == t.TYPE_ENUM:
        return rng.choice([v.number for v in field.enum_type.values] + [99])
    if kind == t.TYPE_BYTES:
        return rng.randbytes(rng.randint(0, 20))
    return None


def _fill(message: Message, rng: random.Random, depth: int = 0) -> Message:
    for field in message.DESCRIPTOR.fields:
        if rng.random() < 0.3:
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth > 3 or field.message_type.GetOptions().map_entry:
                continue
            if field.message_type.full_name.startswith("google.protobuf."):
                continue
            if field.is_repeated:
                for _ in range(rng.randint(0, 3)):
                    _fill(getattr(message, field.name).add(), rng, depth + 1)
            else:
                _fill(getattr(message, field.name), rng, depth + 1)
                getattr(message, field.name).SetInParent()
            continue
        if field.is_repeated:
            getattr(message, field.name).extend(
                _random_value(field, rng, depth) for _ in range(rng.randint(0, 5))
            )
        else:
            setattr(message, field.name, _random_value(field, rng, depth))
    return message


async def test_grpc_fuzz(gateway_process: GatewayProcess) -> None:
    from google.protobuf import message_factory

    rng = random.Random(12)
    bad_codes = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS}
    metadata = tuple(KEYS.items())
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway_process.grpc_port}") as channel:
        for method in methods():
            path = f"/{method.containing_service.full_name}/{method.name}"
            request_type = message_factory.GetMessageClass(
                descriptor_pool.Default().FindMessageTypeByName(method.input_type.full_name)
            )
            payloads = [rng.randbytes(rng.randint(1, 64)) for _ in range(4)]
            payloads += [_fill(request_type(), rng).SerializeToString() for _ in range(8)]
            for payload in payloads:
                make = channel.unary_stream if method.server_streaming else channel.unary_unary
                call = make(path, request_serializer=lambda b: b, response_deserializer=bytes)
                try:
                    async with asyncio.timeout(15):
                        if method.server_streaming:
                            async for _ in call(payload, metadata=metadata, timeout=5):
                                pass
                        else:
                            await call(payload, metadata=metadata, timeout=5)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() not in bad_codes, (path, exc.code(), exc.details())
                except TimeoutError:
                    pytest.fail(f"{path}: no answer within 15 s")
