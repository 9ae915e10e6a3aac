"""The transport-neutral view of one incoming call."""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from server.base.record import CallRecord

# A caller's x-request-id is kept only in this form (both transports); otherwise the
# gateway makes its own, so no caller can put arbitrary text into logs and the ledger.
REQUEST_ID_FORM = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id_or_new(asked: str | None) -> str:
    """The caller's request id when well-formed, else a new one."""
    return asked if asked and REQUEST_ID_FORM.match(asked) else new_request_id()


def new_request_id() -> str:
    """32 hex digits: the milliseconds since the epoch (12), then 80 random bits. Ids
    made later sort later, so the ledger's index on them grows at its end instead of
    at random places (a fifth of a row's insert into SQLite; less index churn in
    PostgreSQL), and two ids collide only by drawing the same 80 bits in one millisecond."""
    return f"{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


# The metadata entry the transport sets to the caller's network address (replacing any
# the caller sent); the audit log records it.
PEER = "x-gateway-peer"


@dataclass
class Call:
    """What the core needs from a transport: the caller's metadata (lower-case keys),
    an optional deadline on the event loop's clock, and a place for response metadata
    (rate-limit headers) that the transport sends back, and the call's record, which
    its handler fills and the accounting middleware closes."""

    metadata: Mapping[str, str]
    deadline: float | None = None
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    response_metadata: dict[str, str] = field(default_factory=dict)
    record: CallRecord = field(default_factory=CallRecord)
    # The transport writes the answer as JSON (the REST facade in this process): a
    # handler may give it events already encoded (`pipeline.Encoded`), as a relayed
    # stream's are.
    writes_json: bool = False

    @classmethod
    def with_timeout(
        cls, metadata: Mapping[str, str], timeout_s: float | None, request_id: str | None = None
    ) -> Call:
        deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
        # The caller's id when it has one: no uuid made just to be replaced.
        return cls(metadata, deadline, request_id) if request_id else cls(metadata, deadline)
