"""Gateway errors: one hierarchy, one table from gRPC code to HTTP status.

    GatewayError
    ├── InvalidArgument          INVALID_ARGUMENT     400  a field is missing or out of range
    │   ├── UnknownParameter     INVALID_ARGUMENT     400  a field the API does not have
    │   ├── TooLarge             INVALID_ARGUMENT     413  a request or an upload past its bound
    │   └── Unsupported          INVALID_ARGUMENT     400  no provider of the model can do it
    ├── Unauthenticated          UNAUTHENTICATED      401  missing or wrong key
    ├── PermissionDenied         PERMISSION_DENIED    403  key valid, not allowed here
    ├── NotFound                 NOT_FOUND            404  unknown deployment, key or path
    │   ├── ModelNotFound        NOT_FOUND            404  unknown model
    │   └── ToolNotFound         NOT_FOUND            404  unknown MCP tool, or one not granted
    ├── Conflict                 ABORTED              409  a name taken, a team with live keys
    ├── PreconditionFailed       FAILED_PRECONDITION  412  a stale If-Match
    ├── RateLimited              RESOURCE_EXHAUSTED   429  per-key limit spent
    ├── BudgetExhausted          RESOURCE_EXHAUSTED   429  per-key budget spent
    ├── DeadlineExceeded         DEADLINE_EXCEEDED    504  the request's deadline passed
    ├── Cancelled                CANCELLED            499  the caller went away
    ├── Internal                 INTERNAL             500  a bug; details stay in the log
    ├── StorageUnavailable       UNAVAILABLE          503  the database or Redis is slow or away
    ├── AuditUnavailable         UNAVAILABLE          503  the audit log could not record a change
    ├── ChangeNotEverywhere      UNAVAILABLE          503  a worker did not confirm an admin change
    ├── ShuttingDown             UNAVAILABLE          503  the gateway is stopping (retry elsewhere)
    └── UpstreamError            UNAVAILABLE          503  a provider failed (retryable or not)
        ├── AllProvidersFailed   UNAVAILABLE          503  every provider tried failed
        └── UpstreamRejected     INVALID_ARGUMENT     400  an upstream refused the request itself

Each class declares its gRPC code, an UPPER_SNAKE reason and whether another provider
may succeed where this one failed. Both transports read `HTTP_STATUS` and nothing else
(through `http_status`, which TooLarge and PreconditionFailed override: 413, 412).
"""

from __future__ import annotations

import asyncio
from dataclasses import KW_ONLY, dataclass, field
from enum import IntEnum

DOMAIN = "gateway.v1"


class Code(IntEnum):
    """The canonical status codes (google.rpc.Code): gRPC's, without importing gRPC."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


# The canonical gRPC -> HTTP mapping; the facade and the edge tier both use it.
HTTP_STATUS: dict[Code, int] = {
    Code.OK: 200,
    Code.INVALID_ARGUMENT: 400,
    Code.FAILED_PRECONDITION: 400,
    Code.OUT_OF_RANGE: 400,
    Code.UNAUTHENTICATED: 401,
    Code.PERMISSION_DENIED: 403,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.ABORTED: 409,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.CANCELLED: 499,
    Code.UNKNOWN: 500,
    Code.INTERNAL: 500,
    Code.DATA_LOSS: 500,
    Code.UNIMPLEMENTED: 501,
    Code.UNAVAILABLE: 503,
    Code.DEADLINE_EXCEEDED: 504,
}


def http_status(code: Code, upstream_answered: bool = False) -> int:
    """Maps a gRPC code to its HTTP status; 502 when an upstream answered badly."""
    if code == Code.UNAVAILABLE and upstream_answered:
        return 502
    return HTTP_STATUS.get(code, 500)


@dataclass
class GatewayError(Exception):
    """Base of every error a caller may see. `message` is safe to show to callers."""

    message: str
    # Every dynamic value in the message (model, provider, field...), for ErrorInfo.
    metadata: dict[str, str] = field(default_factory=dict)
    _: KW_ONLY
    # Seconds the caller (or the gateway, for an upstream) should wait before retrying.
    retry_after_s: float | None = None
    # True when an upstream answered (badly) rather than not at all: HTTP 502, not 503.
    upstream_answered: bool = False

    code = Code.INTERNAL
    reason = "INTERNAL"
    # Whether another provider (or a later attempt) may succeed where this failed.
    retryable = False

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    @property
    def http_status(self) -> int:
        return http_status(self.code, self.upstream_answered)

    @property
    def param(self) -> str | None:
        """The request field at fault, when there is one."""
        return self.metadata.get("field")


class InvalidArgument(GatewayError):
    code = Code.INVALID_ARGUMENT
    reason = "INVALID_ARGUMENT"

    @classmethod
    def for_field(cls, field_name: str, description: str) -> InvalidArgument:
        return cls(f"{field_name}: {description}", {"field": field_name})


class UnknownParameter(InvalidArgument):
    reason = "UNKNOWN_PARAMETER"


class TooLarge(InvalidArgument):
    """A request, or a file in it, past its bound: HTTP 413, not the 400
    INVALID_ARGUMENT otherwise maps to."""

    reason = "REQUEST_TOO_LARGE"

    @property
    def http_status(self) -> int:
        return 413


class Unsupported(InvalidArgument):
    """The request needs a capability (tools, images...) none of the model's providers
    has."""

    reason = "UNSUPPORTED_CAPABILITY"


class Unauthenticated(GatewayError):
    code = Code.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"


class PermissionDenied(GatewayError):
    code = Code.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"


class NotFound(GatewayError):
    code = Code.NOT_FOUND
    reason = "NOT_FOUND"


class ModelNotFound(NotFound):
    reason = "MODEL_NOT_FOUND"


class ToolNotFound(NotFound):
    """An MCP tool that does not exist and one the key is not granted: one answer."""

    reason = "TOOL_NOT_FOUND"


class Conflict(GatewayError):
    """The change conflicts with what exists (a name taken, a team with live keys)."""

    code = Code.ABORTED
    reason = "CONFLICT"


class PreconditionFailed(GatewayError):
    """An `If-Match` names a version that is not the current one: HTTP 412, not the
    400 FAILED_PRECONDITION otherwise maps to."""

    code = Code.FAILED_PRECONDITION
    reason = "PRECONDITION_FAILED"

    @property
    def http_status(self) -> int:
        return 412


class RateLimited(GatewayError):
    code = Code.RESOURCE_EXHAUSTED
    reason = "RATE_LIMITED"


class ConcurrencyLimited(GatewayError):
    """A key, team or model already has its `max_in_flight` calls running."""

    code = Code.RESOURCE_EXHAUSTED
    reason = "CONCURRENCY_LIMITED"


class BudgetExhausted(GatewayError):
    code = Code.RESOURCE_EXHAUSTED
    reason = "BUDGET_EXHAUSTED"


class DeadlineExceeded(GatewayError):
    code = Code.DEADLINE_EXCEEDED
    reason = "DEADLINE_EXCEEDED"
    retryable = False


class Cancelled(GatewayError):
    code = Code.CANCELLED
    reason = "CANCELLED"


class Internal(GatewayError):
    code = Code.INTERNAL
    reason = "INTERNAL"


class StorageUnavailable(GatewayError):
    """The key store, the ledger's database or Redis did not answer in time (or at all)
    on the request path; the request is refused rather than left waiting."""

    code = Code.UNAVAILABLE
    reason = "STORAGE_UNAVAILABLE"


class AuditUnavailable(GatewayError):
    """The audit log could not record a change, so the change was not made."""

    code = Code.UNAVAILABLE
    reason = "AUDIT_UNAVAILABLE"
    retryable = False


class ChangeNotEverywhere(GatewayError):
    """An administrative change was made here but not confirmed by every worker of
    `--workers N` in time; making it again is safe."""

    code = Code.UNAVAILABLE
    reason = "CHANGE_NOT_EVERYWHERE"
    retryable = False


class ShuttingDown(GatewayError):
    """The gateway is shutting down and ended a call its grace period could not cover;
    the caller may retry at once (on another instance)."""

    code = Code.UNAVAILABLE
    reason = "SHUTTING_DOWN"


@dataclass
class UpstreamError(GatewayError):
    """A provider failed. `retryable` says whether another provider should be tried."""

    _: KW_ONLY
    retryable: bool = True

    code = Code.UNAVAILABLE
    reason = "UPSTREAM_ERROR"


@dataclass
class AllProvidersFailed(UpstreamError):
    """Every provider tried failed; `causes` keeps each provider's error, in order."""

    _: KW_ONLY
    causes: list[tuple[str, GatewayError]] = field(default_factory=list)

    reason = "ALL_PROVIDERS_FAILED"

    @classmethod
    def of(cls, subject: str, causes: list[tuple[str, GatewayError]]) -> AllProvidersFailed:
        # A provider's own errors already start with its name: not twice.
        tried = "; ".join(
            err.message if err.message.startswith(f"{name}: ") else f"{name}: {err.message}"
            for name, err in causes
        ) or "none available"  # fmt: skip
        answered = any(err.upstream_answered for _, err in causes)
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

    _: KW_ONLY
    retryable: bool = False
    upstream_answered: bool = True

    code = Code.INVALID_ARGUMENT
    reason = "UPSTREAM_REJECTED_REQUEST"


def status_of(error: BaseException | None) -> tuple[str, str]:
    """The status and reason a call ended with (as the ledger writes them)."""
    if error is None:
        return "OK", ""
    if isinstance(error, GatewayError):
        return error.code.name, error.reason
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return Code.CANCELLED.name, "CANCELLED"
    return Code.INTERNAL.name, "INTERNAL"
