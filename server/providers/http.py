"""What every HTTP adapter shares: its params, its pooled client, SSE reading, and the
one boundary where the client's exceptions and upstream statuses become gateway errors.

The client is the gateway's own (`http1.py`, one pool per provider): an upstream call
costs 0.02-0.08 ms of CPU where aiohttp's cost 0.07-0.17 ms, and httpx's 5.8 ms at 32
concurrent requests (httpcore's pool checks every idle connection's socket on each
request).

    timeout (connect, read)         -> UpstreamError          retryable, no answer
    transport error (connect,       -> UpstreamError          retryable, no answer
      read, protocol: a cut stream)                           (answered once it has)
    HTTP 429                        -> UpstreamError          retryable, Retry-After kept
                                                              (not "answered badly": the
                                                              caller gets 503 + Retry-After)
    HTTP 5xx, 408, 409              -> UpstreamError          retryable, answered
    HTTP 401, 403, 404              -> UpstreamError          retryable, answered: the
                                                              provider is misconfigured
                                                              (key, base_url or model),
                                                              not the request
    other HTTP 4xx (400, 413, 422)  -> UpstreamRejected       not retryable, caller's 400
    malformed JSON, broken SSE      -> UpstreamError          retryable, answered

The upstream key is read from the environment variable the config names; it is never
logged and never put in an error message. Every upstream text quoted to a caller goes
through `redact`: the providers' own keys and anything shaped like a credential
(`Bearer ...`, `sk-...`, Google's `AIza...`, AWS's `AKIA...`, `x-api-key: ...`,
`api_key=...`) become `[redacted]`.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from server.base import spans
from server.base.config import ConfigError
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import GenerationRequest, RetryPolicy, TokenCounts
from server.base.throttle import warn_throttled
from server.base.tokens import implausible
from server.providers.http1 import (
    PATH_SAFE,
    BadAnswer,
    ConnectFailed,
    ConnectTimeout,
    Disconnected,
    Pool,
    ReadTimeout,
)
from server.providers.http1 import Answer as Response  # what the adapters read

log = logging.getLogger(__name__)

# Upstream error bodies are read up to this size, and quoted up to MESSAGE_CHARS.
MAX_ERROR_BODY = 16 * 1024
MESSAGE_CHARS = 200
# One unary answer or one SSE event may not exceed this.
MAX_BODY_BYTES = 16 * 1024 * 1024
# One SSE line (a `data:` field without its newline) may not exceed this by default.
MAX_LINE_BYTES = 1 << 20
# HTTP statuses that say the provider (its key, URL or model name) is misconfigured.
MISCONFIGURED = frozenset({401, 403, 404})
RETRYABLE_4XX = frozenset({408, 409, 429})


class HttpParams(BaseModel):
    """Params common to every HTTP adapter (`models[i].providers[j].params`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The upstream's base URL, e.g. https://api.openai.com/v1.
    base_url: str = Field(min_length=1)
    # The name of the environment variable holding the upstream key; never the key.
    api_key_env: str | None = Field(default=None, min_length=1)
    # The model name the upstream knows.
    model: str = Field(min_length=1)
    # Seconds to open a connection.
    connect_timeout_s: float = Field(default=5, gt=0)
    # Seconds to wait for the response headers and then between two reads of the body:
    # a hung upstream fails over after this long (the request deadline still bounds all).
    read_timeout_s: float = Field(default=60, gt=0)
    # Extra attempts on this provider before failing over; 0 fails over at once.
    max_retries: int = Field(default=0, ge=0, le=5)
    # First pause between attempts on this provider, doubled each time.
    backoff_s: float = Field(default=0.25, ge=0)
    # The longest upstream Retry-After honoured on this provider; longer fails over.
    max_retry_after_s: float = Field(default=5, ge=0)
    # Pooled connections to this upstream.
    # Each open stream holds one: a gateway carrying thousands of streams needs as many.
    max_connections: int = Field(default=1000, ge=1)
    # Headers sent with every request (e.g. OpenAI-Organization). Not for secrets.
    headers: dict[str, str] = Field(default_factory=dict)
    # The longest SSE line accepted from the upstream; a longer one is a broken answer
    # (and is never buffered whole).
    max_line_bytes: int = Field(default=MAX_LINE_BYTES, ge=1024, le=MAX_BODY_BYTES)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_retries, self.backoff_s, self.max_retry_after_s)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if "@" in value.split("/", 3)[2]:
            raise ValueError("must not hold credentials (user:password@): they are not sent")
        return value.rstrip("/")

    @field_validator("headers")
    @classmethod
    def _one_line_each(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not name or ":" in name or any(c in name + text for c in "\r\n"):
                raise ValueError(
                    f"{name[:40]!r}: a header is a name without ':' and a one-line value"
                )
        return value


def read_api_key(params: HttpParams, where: str) -> str | None:
    """The key from the environment variable the config names; a ConfigError at start-up
    when that variable is unset or empty, so a bad deployment fails before serving."""
    if params.api_key_env is None:
        return None
    key = os.environ.get(params.api_key_env, "")
    if not key:
        raise ConfigError(
            f"{where}.params.api_key_env: environment variable {params.api_key_env} is not set"
        )
    remember_secret(key)
    return key


def remember_secret(secret: str) -> None:
    """Adds a credential to those never quoted back to callers."""
    _KEYS.add(secret)


# Every provider key read so far: never quoted back, whichever upstream echoes it.
_KEYS: set[str] = set()
_CREDENTIAL = re.compile(
    r"(?i)(?:(bearer|basic)\s+)[A-Za-z0-9._~+/=-]{4,}"
    r"|\b(?:sk|pk|rk|gw)-[A-Za-z0-9_-]{8,}[A-Za-z0-9_-]*"
    r"|\b(?:hf|ghp|gho|xox[abp])_[A-Za-z0-9_-]{8,}"
    r"|\bAIza[0-9A-Za-z_-]{35}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # Google API keys, AWS key ids
    r"|((?:x-)?api[-_]?key|authorization|token|secret|password)([\"']?\s*[:=]\s*[\"']?)"
    r"(?:(?:bearer|basic)\s+)?[^\s\"',;}]{4,}"
)


def _redacted(match: re.Match[str]) -> str:
    if match.group(1):
        return f"{match.group(1)} [redacted]"
    if match.group(2):
        return f"{match.group(2)}{match.group(3)}[redacted]"
    return "[redacted]"


def redact(text: str, keys: Iterable[str] = ()) -> str:
    """`text` without credentials: the given keys and every provider key verbatim,
    and whatever looks like one (see the module docstring)."""
    for key in (*keys, *_KEYS):
        if key and key in text:
            text = text.replace(key, "[redacted]")
    return _CREDENTIAL.sub(_redacted, text)


def make_client(params: HttpParams, headers: dict[str, str]) -> Client:
    """One pooled client per provider; `headers` carry the auth header and defaults."""
    return Client(params, {**params.headers, **headers})


class Lines:
    """A body's lines (ending at LF, CRLF or a lone CR, as SSE allows), fed one read at a
    time, none longer than `limit` bytes: a longer one is a ProtocolViolation as soon as
    that many bytes arrive without a line end, so an endless line is never buffered
    whole. A plain call, not a generator: it runs for every streamed token."""

    def __init__(self, limit: int = MAX_BODY_BYTES) -> None:
        self.limit = limit
        self.rest = b""

    def feed(self, chunk: bytes) -> list[str]:
        """The lines `chunk` completes; `feed(b"\\n")` ends the last one."""
        if self.rest:
            chunk = self.rest + chunk
        complete, newline, self.rest = chunk.rpartition(b"\n")
        if len(self.rest) > self.limit:
            raise ProtocolViolation(f"an event-stream line exceeds {self.limit} bytes")
        if not newline:
            return []
        if b"\r" not in complete:
            if len(complete) > self.limit:
                self._bound(complete.split(b"\n"))
            return complete.decode(errors="replace").split("\n")
        parts = [p for line in complete.split(b"\n") for p in line.removesuffix(b"\r").split(b"\r")]
        self._bound(parts)
        return [part.decode(errors="replace") for part in parts]

    def _bound(self, lines: list[bytes]) -> None:
        if any(len(line) > self.limit for line in lines):
            raise ProtocolViolation(f"an event-stream line exceeds {self.limit} bytes")


class Client:
    """A pooled HTTP/1.1 client for one upstream base URL. The pool opens on first use,
    inside the serving event loop."""

    def __init__(self, params: HttpParams, headers: dict[str, str]) -> None:
        self._params = params
        defaults = {"content-type": "application/json", "accept": "*/*",
                    "accept-encoding": "gzip, deflate"}  # fmt: skip
        self._headers = defaults | {name.lower(): value for name, value in headers.items()}
        self._head = _header_lines(self._headers.items())
        self._pool: Pool | None = None
        self._targets: dict[str, str] = {}

    def _open(self) -> Pool:
        if self._pool is None:
            params = self._params
            self._pool = Pool(params.base_url, params.max_connections,
                              params.connect_timeout_s, params.read_timeout_s)  # fmt: skip
        return self._pool

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        json: Any = None,
        extra_headers: Iterable[tuple[str, str]] = (),
        content: bytes | None = None,
    ) -> AsyncIterator[Response]:
        """Sends one request (a JSON body, or `content` already serialised, as a signed
        body must be; headers besides the client's own, replacing those of the same
        name) and yields the answer, its body unread; the connection goes back to the
        pool (or is closed, when the body was not read to its end) on the way out. A
        path holding %-escapes is sent as it is."""
        body = content if json is None else orjson.dumps(json)
        extra = {name.lower(): value for name, value in extra_headers}
        if spans.enabled():
            spans.inject(extra)  # carries the caller's trace (W3C traceparent) upstream
        head = self._head if not extra else _header_lines((self._headers | extra).items())
        target = self._targets.get(path)
        if target is None:  # escaped once per path, as the adapter wrote (and signed) it
            target = self._targets[path] = path if "%" in path else quote(path, safe=PATH_SAFE)
        answer = await self._open().request(method, target, head, body or b"")
        try:
            yield answer
        finally:
            answer.release()

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.aclose()
            self._pool = None


def _header_lines(headers: Iterable[tuple[str, str]]) -> bytes:
    """`name: value` lines, each ended by CRLF. A line break inside one is refused: it
    would smuggle a header (or a request) in."""
    lines = [f"{name}: {value}\r\n" for name, value in headers]
    if any(line.count("\n") > 1 or line.count("\r") > 1 for line in lines):
        raise ValueError("a header holds a line break")
    return "".join(lines).encode("latin-1")


class ProtocolViolation(Exception):
    """The upstream answered something its wire format does not allow."""


@contextmanager
def upstream_errors(provider: str) -> Iterator[None]:
    """The one boundary: client exceptions, bad statuses and malformed answers raised
    inside become UpstreamError; caller cancellation passes through untouched."""
    meta = {"provider": provider}
    try:
        yield
    except UpstreamError:
        raise
    except ConnectTimeout:
        raise UpstreamError(f"{provider}: connect timed out", meta) from None
    except (TimeoutError, ReadTimeout):
        raise UpstreamError(f"{provider}: upstream timed out", meta) from None
    except ConnectFailed as exc:
        raise UpstreamError(f"{provider}: {exc}", meta) from None
    except (Disconnected, BadAnswer) as exc:
        raise UpstreamError(f"{provider}: {exc}", meta, upstream_answered=True) from None
    except (
        ProtocolViolation, ValueError, LookupError, TypeError, AttributeError, ArithmeticError,
    ) as exc:  # fmt: skip
        # json.JSONDecodeError is a ValueError; missing or mistyped fields raise the rest
        # (int(1e309) an OverflowError).
        detail = str(exc)[:MESSAGE_CHARS] if isinstance(exc, ProtocolViolation) else "malformed"
        raise UpstreamError(
            f"{provider}: malformed answer ({detail})", meta, upstream_answered=True
        ) from None


async def check_status(response: Response, provider: str) -> None:
    """Raises the gateway error for a non-2xx response (reading its bounded body)."""
    status = response.status_code
    if status < 300:
        return
    body = await _read_bounded(response, MAX_ERROR_BODY)
    meta = {"provider": provider, "upstream_status": str(status)}
    if status in MISCONFIGURED:
        # Upstream auth messages may echo part of the key: never quoted.
        raise UpstreamError(
            f"{provider}: upstream refused the gateway's configuration (HTTP {status}); "
            "check its api_key_env, base_url and model",
            meta,
            upstream_answered=True,
        )
    said = redact(_error_message(body))
    text = f"{provider}: upstream answered HTTP {status}" + (f": {said}" if said else "")
    if status == 429:
        raise UpstreamError(text, meta, retry_after_s=retry_after(response.headers))
    if status >= 500 or status in RETRYABLE_4XX:
        raise UpstreamError(text, meta, upstream_answered=True)
    if _error_code(body) == "content_filter":
        # Azure's content filter refused the prompt: said as such, never as a vague 400.
        raise UpstreamRejected(
            f"{provider}: the upstream's content filter refused the prompt (content_filter)"
            + (f": {said}" if said else ""),
            {**meta, "code": "content_filter"},
        )
    raise UpstreamRejected(text, meta)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date), or
    retry-after-ms; None when absent or unreadable."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(body: bytes) -> str:
    """The upstream's own error message (OpenAI, Anthropic and TGI shapes), shortened."""
    try:
        data = loads(body)
    except ValueError:
        return body.decode(errors="replace").strip()[:MESSAGE_CHARS]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    if not isinstance(error, str) and isinstance(data, dict):
        error = data.get("message") or data.get("detail")
    return str(error)[:MESSAGE_CHARS] if error else ""


def _error_code(body: bytes) -> str:
    """The upstream's error code (OpenAI's and Azure's `error.code`), or ''."""
    try:
        data = loads(body)
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else ""


async def _read_bounded(response: Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def loads(data: bytes | str) -> Any:
    """JSON from an upstream: the fast parser, then the standard one for what it refuses
    but JSON allows (a number beyond float range such as 1e309, which the count checks
    then reject as implausible rather than as a malformed answer)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


async def read_json(response: Response) -> Any:
    """The whole body as JSON, bounded by MAX_BODY_BYTES."""
    body = await _read_bounded(response, MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolViolation("answer too large")
    return loads(body)


@dataclass(slots=True)  # not frozen: one per streamed event (see TextDelta)
class SseEvent:
    event: str
    data: str


class SseParser:
    """A text/event-stream body's events (WHATWG rules: `event:`, multi-line `data:`,
    comments ignored), fed one read at a time; an event is dispatched at each blank
    line. Lines are bounded by `max_line_bytes`, events by MAX_BODY_BYTES. A plain
    call, no generator per line: it runs for every streamed token."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._lines = Lines(max_line_bytes).feed
        self._event = ""
        self._data: list[str] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events `chunk` completes."""
        out = []
        for line in self._lines(chunk):
            if not line:
                if self._data:
                    out.append(SseEvent(self._event or "message", "\n".join(self._data)))
                self._event, self._data, self._size = "", [], 0
            elif line[0] != ":":
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data":
                    self._data.append(value)
                    self._size += len(value)
                    if self._size > MAX_BODY_BYTES:
                        raise ProtocolViolation("stream event too large")
                elif name == "event":
                    self._event = value
        return out

    def end(self) -> list[SseEvent]:
        """The events the body's end completes: its last line ends with the body, and a
        final event without its blank line is still dispatched (servers differ)."""
        return self.feed(b"\n\n")


async def sse_reads(
    response: Response, max_line_bytes: int = MAX_LINE_BYTES
) -> AsyncIterator[list[SseEvent]]:
    """The events of a text/event-stream body, as many at a time as one read brings
    (never none), so what comes together can be relayed together."""
    parser = SseParser(max_line_bytes)
    async for chunk in response.aiter_bytes():
        if events := parser.feed(chunk):
            yield events
    if events := parser.end():
        yield events


async def sse_events(
    response: Response, max_line_bytes: int = MAX_LINE_BYTES
) -> AsyncIterator[SseEvent]:
    """The events of a text/event-stream body, one at a time (see SseParser)."""
    parser = SseParser(max_line_bytes)
    feed = parser.feed
    async for chunk in response.aiter_bytes():
        for event in feed(chunk):
            yield event
    for event in parser.end():
        yield event


def count(value: Any, what: str) -> int:
    """A token count as the upstream sent it: a JSON integer (or an integral float such
    as 12.0) from 0 to 2**31 - 1; anything else (1e309, -5, "12", true) is malformed."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        raise ProtocolViolation(f"{what} is not a token count: {str(value)[:40]}")
    return value


def plausible(counts: TokenCounts | None, request: GenerationRequest) -> TokenCounts | None:
    """`counts` of a whole (unary) answer, checked before any of its text is passed on:
    an impossible report is a broken answer, so the next provider is tried."""
    if counts is not None and (why := implausible(counts, request)) is not None:
        raise ProtocolViolation(f"implausible usage: {why}")
    return counts


def streamed_counts(parse: Callable[[], TokenCounts | None], provider: str) -> TokenCounts | None:
    """Counts reported at the end of a stream, after its text went out: malformed
    numbers can no longer fail over, so they are dropped (logged) and the gateway
    counts the tokens itself."""
    try:
        return parse()
    except (ProtocolViolation, ValueError, TypeError, LookupError, ArithmeticError) as exc:
        warn_throttled(
            log, provider, f"{provider}: unusable usage report ({exc}); counting tokens instead"
        )
        return None


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}
