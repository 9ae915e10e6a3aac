"""What the load generators cannot see: one sample request per target checked by hand
(a real gRPC stub for the gRPC API, whose errors travel in trailers), and the gateway's
usage ledger, which records the status of every request it served."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import chat_service_pb2_grpc

from bench import payloads
from bench.load_servers import KEY, STREAM_CHUNKS, STREAM_MODEL, UNARY_MODEL
from http_facade import codec

PROMPT = [{"role": "user", "content": "Say hello"}]


def rest_body(stream: bool, payload: str) -> bytes:
    """The request (bench/payloads.py: a hello, or a coding agent's turn)."""
    model = STREAM_MODEL if stream else UNARY_MODEL
    return json.dumps({**payloads.chat(payload, model, stream), "stream": stream}).encode()


def grpc_message(stream: bool, payload: str) -> bytes:
    """The request as one gRPC frame: no compression flag, 4-byte length, protobuf."""
    kind = chat.StreamChatCompletionRequest if stream else chat.CreateChatCompletionRequest
    body = payloads.chat(payload, STREAM_MODEL if stream else UNARY_MODEL, False)
    data = codec.from_dict(body, kind()).SerializeToString()
    return b"\x00" + len(data).to_bytes(4, "big") + data


def check_http(url: str, body: bytes, headers: dict[str, str], stream: bool) -> str | None:
    """Sends one request; returns why the answer is wrong, or None when it is right."""
    request = urllib.request.Request(
        url, data=body, headers={"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        answer = exc.read().decode(errors="replace")[:200]
        return f"{url}: HTTP {exc.code} {answer}"
    except OSError as exc:
        return f"{url}: {exc}"
    if stream:
        events = [line for line in text.splitlines() if line.startswith("data: ")]
        if not events or events[-1] != "data: [DONE]":
            return f"{url}: the stream did not end with data: [DONE]"
        return None
    if json.loads(text).get("object") != "chat.completion":
        return f"{url}: not a chat.completion: {text[:200]}"
    return None


def check_grpc(port: int) -> dict[str, object]:
    """Both RPCs once through a real stub: the status h2load cannot read."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = chat_service_pb2_grpc.ChatServiceStub(channel)
        metadata = (("x-api-key", KEY),)
        try:
            reply = stub.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model=UNARY_MODEL, messages=PROMPT),
                metadata=metadata,
                timeout=30,
            )
            chunks = list(
                stub.StreamChatCompletion(
                    chat.StreamChatCompletionRequest(model=STREAM_MODEL, messages=PROMPT),
                    metadata=metadata,
                    timeout=30,
                )
            )
        except grpc.RpcError as exc:
            return {"ok": False, "error": f"{exc.code().name}: {exc.details()}"}
    text = "".join(c.choices[0].delta.content for c in chunks if c.choices)
    return {
        "ok": reply.choices[0].message.content != "" and text.count("word") == STREAM_CHUNKS,
        "unary_reply": reply.choices[0].message.content,
        "stream_messages": len(chunks),
        "stream_text": text,
    }


def ledger_counts(db: Path | None) -> dict[str, int]:
    """Requests recorded so far, by status (`OK` or a gRPC code name)."""
    if db is None or not db.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            rows = conn.execute("SELECT status, COUNT(*) FROM usage_records GROUP BY status")
            return dict(rows.fetchall())
    except sqlite3.Error:
        return {}  # the schema moved on: the ledger check is best effort


def settled_ledger(db: Path | None, timeout_s: float = 10) -> dict[str, int]:
    """The counts once the gateway's batched writer has caught up (unchanged for 1 s)."""
    counts = ledger_counts(db)
    deadline = time.monotonic() + timeout_s
    while db is not None and time.monotonic() < deadline:
        time.sleep(1)
        latest = ledger_counts(db)
        if latest == counts:
            break
        counts = latest
    return counts


def ledger_errors(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Statuses recorded during a run, without OK and CANCELLED (the requests still in
    flight when the load generator stops and drops its connections)."""
    diff = {status: after.get(status, 0) - before.get(status, 0) for status in after}
    return {s: n for s, n in diff.items() if n and s not in ("OK", "CANCELLED")}


def ledger_ok(before: dict[str, int], after: dict[str, int]) -> int:
    return after.get("OK", 0) - before.get("OK", 0)
