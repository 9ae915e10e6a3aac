"""The transport-neutral view of one incoming call."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from server.base.record import CallRecord

# A caller's x-request-id is kept only in this form (both transports); otherwise the
# gateway makes its own, so no caller can put arbitrary text into logs and the ledger.
REQUEST_ID_FORM = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id_or_new(asked: str | None) -> str:
    """The caller's request id when well-formed, else a new one."""
    return asked if asked and REQUEST_ID_FORM.match(asked) else os.urandom(16).hex()


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
