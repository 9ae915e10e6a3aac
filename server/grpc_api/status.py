"""GatewayError <-> gRPC status with google.rpc details (AIP-193), both directions.

The server sends ErrorInfo (reason, domain, metadata), BadRequest field violations and
RetryInfo; the edge tier reads them back into a GatewayError, so both facade modes
answer with the same HTTP error.
"""

from __future__ import annotations

import math

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from server.base.errors import DOMAIN, Code, GatewayError


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
        delay = duration_pb2.Duration(seconds=math.ceil(retry_after))
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


class RemoteError(GatewayError):
    """An error a remote gateway sent over gRPC, rebuilt for the edge tier."""

    def __init__(
        self,
        code: Code,
        message: str,
        reason: str,
        metadata: dict[str, str],
        retry_after_s: int | None,
        upstream_answered: bool,
    ) -> None:
        super().__init__(
            message, metadata, retry_after_s=retry_after_s, upstream_answered=upstream_answered
        )
        self.code = code
        self.reason = reason


def from_rpc_error(error: grpc.aio.AioRpcError) -> RemoteError:
    """Rebuilds a GatewayError from a gRPC error and its status details."""
    reason, metadata, retry_after = "UNKNOWN", {}, None
    status = _rich_status(error)
    if status is not None:
        for packed in status.details:
            if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                packed.Unpack(info)
                reason, metadata = info.reason, dict(info.metadata)
            elif packed.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                retry = error_details_pb2.RetryInfo()
                packed.Unpack(retry)
                retry_after = retry.retry_delay.seconds
    code = Code(error.code().value[0])
    # An upstream that answered badly maps to 502 on the server; keep that on the edge.
    answered = metadata.get("upstream_answered") == "true"
    return RemoteError(code, error.details() or code.name, reason, metadata, retry_after, answered)


def _rich_status(error: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    """The google.rpc.Status a gateway sent with the error; None from anything else
    (a proxy, a gRPC library error) or when it does not match the call's status."""
    try:
        return rpc_status.from_call(error)
    except ValueError:
        return None
