"""GatewayError -> gRPC status with google.rpc details (AIP-193).

The server sends ErrorInfo (reason, domain, metadata), BadRequest field violations and
RetryInfo; the edge tier reads them back (http_facade/remote_status.py), so both facade
modes answer with the same HTTP error.
"""

from __future__ import annotations

import math

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from server.base.errors import DOMAIN, GatewayError


def abort_args(
    error: GatewayError, extra_trailers: dict[str, str]
) -> tuple[grpc.StatusCode, str, tuple[tuple[str, str | bytes], ...]]:
    """Packs an error into code, message and trailers holding the rich status, plus
    `extra_trailers` (rate-limit headers, `retry-after`)."""
    metadata = dict(error.metadata)
    if error.upstream_answered:
        metadata["upstream_answered"] = "true"
    details: list[Message] = [
        error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=metadata)
    ]
    if error.param:
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=error.param, description=error.message
        )
        details.append(error_details_pb2.BadRequest(field_violations=[violation]))
    retry_after = error.retry_after_s
    if retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(math.ceil(retry_after * 1000))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    packed = []
    for detail in details:
        wrapper = any_pb2.Any()
        wrapper.Pack(detail)
        packed.append(wrapper)
    status = rpc_status.to_status(
        status_pb2.Status(code=int(error.code), message=error.message, details=packed)
    )
    return status.code, status.details, (*status.trailing_metadata, *extra_trailers.items())
