"""Gateway errors: one hierarchy, one table from gRPC code to HTTP status.

    GatewayError
    ├── InvalidArgument          INVALID_ARGUMENT     400  a field is missing or out of range
    ├── Unauthenticated          UNAUTHENTICATED      401  missing or wrong key
    ├── PermissionDenied         PERMISSION_DENIED    403  key valid, not allowed here
    ├── NotFound                 NOT_FOUND            404  unknown model or deployment
    ├── RateLimited              RESOURCE_EXHAUSTED   429  per-key limit spent
    ├── BudgetExhausted          RESOURCE_EXHAUSTED   429  per-key budget spent
    ├── DeadlineExceeded         DEADLINE_EXCEEDED    504  the request's deadline passed
    ├── Cancelled                CANCELLED            499  the caller went away
    ├── Internal                 INTERNAL             500  a bug; details stay in the log
    └── UpstreamError            UNAVAILABLE          503  a provider failed (retryable or not)
        ├── AllProvidersFailed   UNAVAILABLE          503  every provider tried failed
        └── UpstreamRejected     INVALID_ARGUMENT     400  an upstream refused the request itself

Each class declares its gRPC code, an UPPER_SNAKE reason and whether another provider
may succeed where this one failed. Both transports read `HTTP_STATUS` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc

DOMAIN = "gateway.v1"

# The canonical gRPC -> HTTP mapping; the facade and the edge tier both use it.
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}

# OpenAI-style `error.type` per code, so OpenAI clients raise their matching class.
ERROR_TYPE: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_request_error",
    grpc.StatusCode.FAILED_PRECONDITION: "invalid_request_error",
    grpc.StatusCode.OUT_OF_RANGE: "invalid_request_error",
    grpc.StatusCode.UNAUTHENTICATED: "authentication_error",
    grpc.StatusCode.PERMISSION_DENIED: "permission_error",
    grpc.StatusCode.NOT_FOUND: "not_found_error",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "rate_limit_error",
    grpc.StatusCode.DEADLINE_EXCEEDED: "timeout_error",
    grpc.StatusCode.CANCELLED: "cancelled",
    grpc.StatusCode.UNAVAILABLE: "upstream_error",
}


def http_status(code: grpc.StatusCode, upstream_answered: bool = False) -> int:
    """Maps a gRPC code to its HTTP status; 502 when an upstream answered badly."""
    if code == grpc.StatusCode.UNAVAILABLE and upstream_answered:
        return 502
    return HTTP_STATUS.get(code, 500)


@dataclass
class GatewayError(Exception):
    """Base of every error a caller may see. `message` is safe to show to callers."""

    message: str
    # Every dynamic value in the message (model, provider, field...), for ErrorInfo.
    metadata: dict[str, str] = field(default_factory=dict)

    code = grpc.StatusCode.INTERNAL
    reason = "INTERNAL"
    # Whether another provider (or a later attempt) may succeed where this failed.
    retryable = False

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    @property
    def http_status(self) -> int:
        return http_status(self.code)

    @property
    def param(self) -> str | None:
        """The request field at fault, when there is one."""
        return self.metadata.get("field")


class InvalidArgument(GatewayError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "INVALID_ARGUMENT"

    @classmethod
    def for_field(cls, field_name: str, description: str) -> InvalidArgument:
        return cls(f"{field_name}: {description}", {"field": field_name})


class Unauthenticated(GatewayError):
    code = grpc.StatusCode.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"


class PermissionDenied(GatewayError):
    code = grpc.StatusCode.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"


class NotFound(GatewayError):
    code = grpc.StatusCode.NOT_FOUND
    reason = "NOT_FOUND"


@dataclass
class RateLimited(GatewayError):
    retry_after_s: int = 1

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    reason = "RATE_LIMITED"


@dataclass
class BudgetExhausted(GatewayError):
    retry_after_s: int | None = None

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    reason = "BUDGET_EXHAUSTED"


class DeadlineExceeded(GatewayError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED
    reason = "DEADLINE_EXCEEDED"
    retryable = False


class Cancelled(GatewayError):
    code = grpc.StatusCode.CANCELLED
    reason = "CANCELLED"


class Internal(GatewayError):
    code = grpc.StatusCode.INTERNAL
    reason = "INTERNAL"


@dataclass
class UpstreamError(GatewayError):
    """A provider failed. `retryable` says whether another provider should be tried."""

    retryable: bool = True
    # True when the upstream answered (badly) rather than not at all: HTTP 502, not 503.
    upstream_answered: bool = False
    # Seconds the upstream asked us to wait (its Retry-After), when it said.
    retry_after_s: float | None = None

    code = grpc.StatusCode.UNAVAILABLE
    reason = "UPSTREAM_ERROR"

    @property
    def http_status(self) -> int:
        return http_status(self.code, self.upstream_answered)


@dataclass
class AllProvidersFailed(UpstreamError):
    """Every provider tried failed; `causes` keeps each provider's error, in order."""

    causes: list[tuple[str, GatewayError]] = field(default_factory=list)

    reason = "ALL_PROVIDERS_FAILED"

    @classmethod
    def of(cls, subject: str, causes: list[tuple[str, GatewayError]]) -> AllProvidersFailed:
        tried = "; ".join(f"{name}: {err.message}" for name, err in causes) or "none available"
        answered = any(getattr(err, "upstream_answered", False) for _, err in causes)
        return cls(
            f"all providers of {subject} failed ({tried})",
            {"subject": subject, "tried": ",".join(name for name, _ in causes)},
            retryable=False,
            upstream_answered=answered,
            causes=causes,
        )


@dataclass
class UpstreamRejected(UpstreamError):
    """An upstream answered that the request itself is at fault (HTTP 400, 413, 422...).

    Not retryable: every other provider would refuse it too, so no failover."""

    retryable: bool = False
    upstream_answered: bool = True

    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "UPSTREAM_REJECTED_REQUEST"
