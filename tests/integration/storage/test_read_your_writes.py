"""Read your own writes: a request id a caller got an answer for is found the moment the
answer was sent, by feedback and by the usage API, whether its ledger row is buffered,
being written, on another worker's spool or in the database; on SQLite and PostgreSQL,
with and without a spool, one worker or two."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateways import (
    API_KEY,
    ROUTER_KEY,
    default_config_dict,
    running_gateway,
    start_process,
    stop_process,
    write_config,
)

# Answers each rated at once; the flusher writes one row at a time without pause, so
# most ratings arrive while the row they name is somewhere between buffer and table
# (2,500 ratings over the six cases).
ROUNDS = 500
CONSTANT_FLUSH = {"flush_interval_s": 0.001, "batch_size": 1}
# A router key without the development key's rate limit.
RATER = "gw-test-rater-key-000000000"


def _config(storage: dict[str, Any], ledger: dict[str, Any]) -> dict[str, Any]:
    data = default_config_dict()
    data["storage"] |= storage
    data["ledger"] = ledger
    data["keys"].append({"name": "rater", "kind": "router", "secret": RATER})
    return data


def _storage(kind: str, tmp_path: Path, pg_url: str) -> dict[str, Any]:
    if kind == "sqlite":
        return {"sqlite_path": str(tmp_path / "gateway.db")}
    return {"database_url": pg_url}


async def _answer_then_rate(c: httpx.AsyncClient, rounds: int) -> list[str]:
    """Asks and rates `rounds` times; returns the ratings refused, with their answers."""
    refused = []
    for i in range(rounds):
        request_id = f"ryw-{uuid.uuid4().hex}"
        answer = await c.post(
            "/v1/infer",
            headers={"x-router-key": RATER, "x-request-id": request_id},
            json={"prompt": f"question {i}", "profile": "economy"},
        )
        assert answer.status_code == 200, answer.text
        rated = await c.post(
            "/v1/feedback",
            headers={"x-router-key": RATER},
            json={"request_id": request_id, "score": 1.0},
        )
        if rated.status_code != 200:
            refused.append(f"{i}: {rated.status_code} {rated.text}")
    return refused


@pytest.mark.slow
@pytest.mark.parametrize("spooled", [False, True], ids=["memory", "spool"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_rating_right_after_the_answer_finds_its_request(
    kind: str, spooled: bool, tmp_path: Path, pg_url: str
) -> None:
    ledger = dict(CONSTANT_FLUSH)
    if spooled:
        ledger["spool_dir"] = str(tmp_path / "spool")
    data = _config(_storage(kind, tmp_path, pg_url), ledger)
    async with running_gateway(data) as gw:
        # One connection: the rating follows the answer's last byte on the same socket.
        limits = httpx.Limits(max_connections=1)
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base, limits=limits) as c:
            refused = await _answer_then_rate(c, ROUNDS)
        assert gw.gateway is not None
        assert gw.gateway.accounts.ledger.written > 0  # the flusher did run meanwhile
    assert refused == []


async def test_an_unknown_request_id_is_still_not_found(tmp_path: Path) -> None:
    data = _config(_storage("sqlite", tmp_path, ""), {"spool_dir": str(tmp_path / "spool")})
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        mine = await c.post(
            "/v1/infer",
            headers={"x-router-key": ROUTER_KEY, "x-request-id": "ryw-known"},
            json={"prompt": "hello", "profile": "economy"},
        )
        assert mine.status_code == 200
        # Another key's request with the same id, still in the spool, is not this key's.
        data_keys = {"x-api-key": API_KEY, "x-request-id": "ryw-api"}
        body = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}
        assert (await c.post("/v1/chat/completions", headers=data_keys, json=body)).is_success
        for unknown in ("ryw-unknown", "ryw-api", "ryw-know"):
            rated = await c.post(
                "/v1/feedback",
                headers={"x-router-key": ROUTER_KEY},
                json={"request_id": unknown, "score": 1.0},
            )
            assert rated.status_code == 404, (unknown, rated.text)
            assert unknown in rated.json()["error"]["message"]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "flush"), [("postgres", "constant"), ("sqlite", "never")])
async def test_two_workers_find_each_others_requests(
    kind: str, flush: str, tmp_path: Path, pg_url: str
) -> None:
    # "never": a row stays on its worker's spool (and in its memory) until shutdown.
    ledger = CONSTANT_FLUSH if flush == "constant" else {"flush_interval_s": 600}
    data = _config(_storage(kind, tmp_path, pg_url), ledger)
    gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2")
    try:
        assert gw.http_port, "".join(gw.output)
        # A connection per request: the kernel spreads them over both workers, so about
        # half the ratings reach the worker that did not answer.
        limits = httpx.Limits(max_keepalive_connections=0)
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base, limits=limits) as c:
            refused = await _answer_then_rate(c, ROUNDS // 2)
    finally:
        output = stop_process(gw)
    assert refused == [], output


async def test_the_usage_api_counts_every_workers_answers(tmp_path: Path) -> None:
    data = _config(_storage("sqlite", tmp_path, ""), {"flush_interval_s": 0.05})
    gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2")
    try:
        limits = httpx.Limits(max_keepalive_connections=0)
        base = f"http://127.0.0.1:{gw.http_port}"
        headers = {"x-api-key": API_KEY}
        body = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient(base_url=base, limits=limits, headers=headers) as c:
            for asked in range(1, 41):
                assert (await c.post("/v1/chat/completions", json=body)).is_success
                usage = await c.get("/v1/usage")
                assert usage.status_code == 200, usage.text
                assert usage.json()["total"]["requests"] == asked
    finally:
        stop_process(gw)
