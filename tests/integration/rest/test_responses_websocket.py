"""The Responses API's WebSocket mode (`GET /v1/responses` upgraded), driven by a real
WebSocket client on loopback: responses one after another on one socket, continued
from the socket's own responses, warmed up without billing, and every refusal an HTTP
answer before the socket opens."""

from __future__ import annotations

import json
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.support.gateways import API_KEY, default_config_dict, running_gateway, wait_for

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _url(gw: Any) -> str:
    return f"ws://127.0.0.1:{gw.http_port}/v1/responses"


async def _response(ws: Any, **request: Any) -> list[dict[str, Any]]:
    """Sends one response.create; the events up to its last (completed or error)."""
    await ws.send(json.dumps({"type": "response.create", **request}))
    events = []
    while True:
        event = json.loads(await ws.recv())
        events.append(event)
        if event["type"] in ("response.completed", "response.failed", "error"):
            return events


async def _rows(gw: Any) -> list[Any]:
    await gw.gateway.accounts.ledger.flush()
    return await gw.gateway.store.db.fetch(
        "SELECT method, status, prompt_tokens FROM usage_records ORDER BY ts"
    )


async def test_responses_follow_one_another_on_one_socket_continuing_unstored() -> None:
    async with running_gateway() as gw:
        async with websockets.connect(_url(gw), additional_headers=AUTH) as ws:
            first = await _response(ws, model="sim-pro", input="Say hello", store=False)
            done = first[-1]["response"]
            second = await _response(
                ws, model="sim-pro", store=False, previous_response_id=done["id"],
                input=[{"type": "message", "role": "user", "content": "And again"}],
            )  # fmt: skip
        rows = await _rows(gw)
    assert [e["type"] for e in first][:2] == ["response.created", "response.in_progress"]
    assert first[-1]["type"] == second[-1]["type"] == "response.completed"
    text = "".join(e["delta"] for e in second if e["type"] == "response.output_text.delta")
    assert text and text == second[-1]["response"]["output"][0]["content"][0]["text"]
    turns = [r for r in rows if r["method"] == "StreamResponse"]
    assert [r["status"] for r in turns] == ["OK", "OK"]
    # The second carried the first's input and answer, though nothing was stored.
    assert turns[1]["prompt_tokens"] > turns[0]["prompt_tokens"] + 5


async def test_a_warm_up_generates_nothing_and_is_continued_from() -> None:
    async with running_gateway() as gw:
        async with websockets.connect(_url(gw), additional_headers=AUTH) as ws:
            warm = await _response(
                ws, model="sim-pro", generate=False, input="Remember this long sentence "
                "about gateways and sockets and responses, word after word",
            )  # fmt: skip
            after = await _response(
                ws, model="sim-pro", input="Go", previous_response_id=warm[-1]["response"]["id"]
            )
            await _response(ws, model="sim-pro", input="Go")  # nothing to continue from
        rows = await _rows(gw)
    assert [e["type"] for e in warm] == ["response.created", "response.completed"]
    assert warm[-1]["response"]["output"] == []
    assert after[-1]["type"] == "response.completed"
    turns = [r for r in rows if r["method"] == "StreamResponse"]
    assert len(turns) == 2  # the warm-up wrote no row
    assert turns[0]["prompt_tokens"] > turns[1]["prompt_tokens"] + 5


async def test_a_bad_request_is_an_error_frame_and_the_socket_stays_open() -> None:
    async with (
        running_gateway() as gw,
        websockets.connect(_url(gw), additional_headers=AUTH) as ws,
    ):
        bad = await _response(ws, model="sim-pro", input="hi", no_such_field=1)
        unknown = await _response(ws, model="no-such-model", input="hi")
        await ws.send(json.dumps({"type": "session.update"}))
        kind = json.loads(await ws.recv())
        good = await _response(ws, model="sim-pro", input="hi")
    assert bad[-1]["type"] == "error" and bad[-1]["status"] == 400
    assert bad[-1]["error"]["param"] == "no_such_field"
    assert unknown[-1]["status"] == 404
    assert kind["type"] == "error" and kind["error"]["param"] == "type"
    assert good[-1]["type"] == "response.completed"


async def _refused(url: str, headers: dict[str, str] | None = None) -> Any:
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(url, additional_headers=headers or {}):
            pass
    return refused.value.response


async def test_refusals_are_http_answers_before_the_socket_opens() -> None:
    data = default_config_dict()
    data["server"]["websockets"] = {"sessions_per_key": 1}
    async with running_gateway(data) as gw:
        missing = await _refused(_url(gw))
        wrong = await _refused(_url(gw), {"Authorization": "Bearer gw-wrong-key-000000000"})
        async with websockets.connect(_url(gw), additional_headers=AUTH):
            second = await _refused(_url(gw), AUTH)
        # Its session closed, the key may open another.
        async with websockets.connect(_url(gw), additional_headers=AUTH) as ws:
            assert (await _response(ws, model="sim-pro", input="hi"))[-1]["type"] == (
                "response.completed"
            )
    assert missing.status_code == wrong.status_code == 401
    assert json.loads(missing.body)["error"]["code"] == "unauthenticated"
    assert second.status_code == 429


async def test_turned_off_the_upgrade_is_refused_with_426() -> None:
    data = default_config_dict()
    data["server"]["websockets"] = {"responses": False}
    async with running_gateway(data) as gw:
        refused = await _refused(_url(gw), AUTH)
    assert refused.status_code == 426
    assert json.loads(refused.body)["error"]["code"] == "websocket_disabled"


async def test_bounds_close_the_session_with_a_reason() -> None:
    data = default_config_dict()
    data["server"]["websockets"] = {"idle_timeout_s": 0.3, "max_frame_bytes": 2048}
    async with running_gateway(data) as gw:
        async with websockets.connect(_url(gw), additional_headers=AUTH) as ws:
            with pytest.raises(ConnectionClosed) as idle:
                await ws.recv()
        async with websockets.connect(_url(gw), additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "response.create", "input": "x" * 4096}))
            with pytest.raises(ConnectionClosed) as big:
                await ws.recv()
    assert idle.value.rcvd is not None and "no frame for 0.3s" in idle.value.rcvd.reason
    assert big.value.rcvd is not None and big.value.rcvd.code == 1009


async def test_a_stopping_gateway_closes_its_sessions_with_1012() -> None:
    async with running_gateway() as gw:
        ws = await websockets.connect(_url(gw), additional_headers=AUTH)
        assert gw.stopping is not None
        gw.stopping.set_result(None)
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        await ws.close()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
    assert "shutting down" in closed.value.rcvd.reason


async def test_an_edge_tier_serves_the_socket_through_its_gateway() -> None:
    async with (
        running_gateway() as gw,
        running_gateway(grpc_target=f"127.0.0.1:{gw.grpc_port}") as edge,
    ):
        async with websockets.connect(_url(edge), additional_headers=AUTH) as ws:
            events = await _response(ws, model="sim-pro", input="Say hello")
        refused = await _refused(_url(edge), {"Authorization": "Bearer gw-wrong-key-000000000"})
        rows = await _rows(gw)
    assert events[-1]["type"] == "response.completed"
    assert refused.status_code == 401
    assert [r["status"] for r in rows if r["method"] == "StreamResponse"] == ["OK"]


async def test_a_client_that_reads_nothing_is_dropped_after_the_send_timeout() -> None:
    data = default_config_dict()
    data["server"]["send_timeout_s"] = 0.5
    data["server"]["websockets"] = {"frames_per_s": 1000}
    for provider in data["models"][0]["providers"]:
        provider["params"] |= {"min_reply_tokens": 2000, "max_reply_tokens": 2000}
    model = data["models"][0]["id"]
    async with running_gateway(data) as gw:
        assert gw.http is not None
        sessions = gw.http.server.config.app.state.sessions
        # max_queue=1: the client library stops reading the socket once one frame waits.
        ws = await websockets.connect(
            _url(gw), additional_headers=AUTH, max_queue=1, compression=None
        )
        request = json.dumps({"type": "response.create", "model": model, "input": "hi"})
        for _ in range(200):
            await ws.send(request)
        await wait_for(lambda: sessions.opened == 1 and sessions.open == 0, timeout_s=60)
        ws.transport.abort()
        rows = await _rows(gw)
    # The responses after the stall never ran; each that ran has its row (the one being
    # written when the reader stalled, CANCELLED unless its last event was out).
    statuses = [r["status"] for r in rows if r["method"] == "StreamResponse"]
    assert 0 < len(statuses) < 200 and set(statuses) <= {"OK", "CANCELLED"}, statuses
    assert statuses.count("CANCELLED") <= 1


async def test_frames_past_the_rate_are_refused_and_a_session_ends_at_its_length() -> None:
    data = default_config_dict()
    data["server"]["websockets"] = {"frames_per_s": 2, "max_session_s": 1.5}
    async with (
        running_gateway(data) as gw,
        websockets.connect(_url(gw), additional_headers=AUTH) as ws,
    ):
        for _ in range(3):
            await ws.send(json.dumps({"type": "response.processed", "response_id": "r"}))
        refused = json.loads(await ws.recv())
        with pytest.raises(ConnectionClosed) as ended:
            await ws.recv()
    assert refused["type"] == "error" and refused["status"] == 429
    assert "frames a second" in refused["error"]["message"]
    assert ended.value.rcvd is not None and ended.value.rcvd.code == 1008
    assert "maximum length" in ended.value.rcvd.reason


async def test_a_response_under_way_when_the_gateway_stops_ends_with_1012_and_its_row() -> None:
    data = default_config_dict()
    for provider in data["models"][0]["providers"]:
        provider["params"] = {"ttft_ms": 0, "tokens_per_second": 20,
                              "min_reply_tokens": 2000, "max_reply_tokens": 2000}  # fmt: skip
    model = data["models"][0]["id"]
    async with running_gateway(data) as gw:
        async with websockets.connect(_url(gw), additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": model, "input": "hi"}))
            while json.loads(await ws.recv())["type"] != "response.output_text.delta":
                pass
            assert gw.stopping is not None
            gw.stopping.set_result(None)
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await ws.recv()
        rows = await _rows(gw)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
    assert [r["status"] for r in rows if r["method"] == "StreamResponse"] == ["CANCELLED"]
