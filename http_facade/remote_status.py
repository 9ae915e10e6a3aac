"""gRPC status with google.rpc details -> GatewayError, for the edge tier.

A remote gateway sends ErrorInfo (reason, domain, metadata) and RetryInfo with its
errors (server/grpc_api/status.py); reading them back here lets the edge tier answer
with the same HTTP error as a gateway serving in-process.
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from server.base.errors import Code, GatewayError, PreconditionFailed, TooLarge

# The errors whose HTTP status is not their code's: told apart by their reason.
REASON_HTTP_STATUS = {error.reason: status for error, status in
                      ((TooLarge, 413), (PreconditionFailed, 412))}  # fmt: skip


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

    @property
    def http_status(self) -> int:
        return REASON_HTTP_STATUS.get(self.reason) or super().http_status


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
                retry_after = retry.retry_delay.ToMilliseconds() / 1000
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
