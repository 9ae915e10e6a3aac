"""The gateway's response cache: a repeated request answered from a stored answer,
costing nothing upstream.

Which requests: those of the keys or models `response_cache` names, exactly alike in
what changes the answer (the model or profile asked for, the messages, tools and every
sampling field; not `user`, metadata or the upstream hints), and one key's answers
only serve that key unless `shared_across_keys`. A caller chooses per request with the
standard `Cache-Control` request directives: `max-age=N` opts in (an answer at most N
seconds old is served, whatever the sampling), `no-cache` asks for a fresh answer (which
is then stored), `no-store` keeps the request out of the cache both ways. Without one,
only requests with temperature 0 are cached: sampling above 0 asks for a new answer
each time, unless the caller opts in.

What is stored: the generation's events (text, tool calls, reasoning, native events,
the finish with its usage), so a hit is replayed by the same steps as an upstream's
answer and comes out in the caller's dialect, streamed or whole. A hit is marked (the
`x-gateway-cache: hit` header, `response_cached` in usage and the ledger), reports the
answer's tokens without prompt-cache reads or writes (no upstream cache took part), and
costs what `billing` says: nothing, or those tokens at the model's prices. Stores: an
LRU per process bounded in entries and bytes, or Redis when configured
(`{prefix}response:{key}`, expiring with the entry). An entry larger than
`max_entry_bytes` is not kept; one that cannot be read, or a store that fails, is a
miss, never an error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from google.protobuf.message import Message as ProtoMessage

from server.application.pipeline.catalog import Catalog, Upstream
from server.application.pipeline.expiring import Store
from server.base.caller import Principal
from server.base.config import ProviderConfig, ResponseCacheConfig
from server.base.errors import NotFound
from server.base.generation import (
    Event,
    Finished,
    GenerationRequest,
    NativeEvent,
    ReasoningDelta,
    RetryPolicy,
    TextDelta,
    TokenCounts,
    TokenLogprob,
    ToolCallDelta,
    TopLogprob,
)
from server.base.throttle import warn_throttled

log = logging.getLogger(__name__)

# The response header (and gRPC metadata) that says how the cache served a request.
HEADER = "x-gateway-cache"
# The provider a replayed answer is recorded under.
PROVIDER_ID = "response-cache"
REPLAYED = ProviderConfig(id=PROVIDER_ID, type="primary", adapter="simulated")
# What changes nothing in the answer: left out of the key.
IGNORED = frozenset({
    "user", "metadata", "prompt_cache_key", "prompt_cache_retention", "store",
    "service_tier", "safety_identifier", "relay",
})  # fmt: skip
VERSION = 2


@dataclass(frozen=True)
class Plan:
    """How the cache takes part in one request."""

    key: str
    # Whether a stored answer may be served, and the oldest one that may be.
    read: bool
    max_age_s: float
    # How long a new answer is kept, and the largest one kept.
    ttl_s: float
    max_entry_bytes: int


def directives(header: str) -> dict[str, float | None]:
    """Cache-Control's directives, names lowercased; max-age as seconds."""
    found: dict[str, float | None] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        name = name.strip().lower()
        if not name:
            continue
        try:
            found[name] = float(value.strip().strip('"')) if value else None
        except ValueError:
            continue  # a malformed value: the directive is ignored, as RFC 9111 says
    return found


def plan(
    config: ResponseCacheConfig,
    caller: Principal,
    upstreams: Sequence[Upstream],
    request: GenerationRequest,
    metadata: Mapping[str, str],
    subject: str,
) -> Plan | None:
    """The cache's part in a request; None when it takes none."""
    if not upstreams or not config.applies(caller.name, upstreams[0].model.id):
        return None
    given = directives(metadata.get("cache-control", ""))
    if "no-store" in given:
        return None
    if request.native is not None and request.native.previous is not None:
        return None  # continues a response an upstream stored: its state is there
    max_age = given.get("max-age")
    if max_age is None and request.temperature != 0:
        return None  # sampling asks for a new answer each time, unless opted in
    max_age = config.ttl_s if max_age is None else max(0.0, min(max_age, config.ttl_s))
    scope = "shared" if config.shared_across_keys else caller.key_id
    read = "no-cache" not in given
    key = _key(scope, subject, request)
    return Plan(key, read, max_age, config.ttl_s, config.max_entry_bytes)


def _key(scope: str, subject: str, request: GenerationRequest) -> str:
    fields = {
        f.name: getattr(request, f.name)
        for f in dataclasses.fields(request)
        if f.name not in IGNORED
    }
    native = request.native
    if native is not None and isinstance(native.request, Mapping):
        given = native.request
        fields["native"] = dataclasses.replace(
            native,
            request={k: v for k, v in given.items() if k not in IGNORED and k != "input"},
            # Item ids are the gateway's names for the caller's items, new each time.
            history=(*map(_anonymous, native.history), *map(_anonymous, given.get("input", ()))),
        )
    text = orjson.dumps(
        [VERSION, scope, subject, fields], default=_canonical, option=orjson.OPT_SORT_KEYS
    )
    return hashlib.sha256(text).hexdigest()


def _anonymous(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "id"}


def _canonical(value: Any) -> Any:
    if isinstance(value, ProtoMessage):
        copy = type(value)()
        copy.CopyFrom(value)
        for name in ("metadata", "stream"):  # the Messages API's metadata.user_id
            if name in copy.DESCRIPTOR.fields_by_name:
                copy.ClearField(name)
        return hashlib.sha256(copy.SerializeToString(deterministic=True)).hexdigest()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(type(value).__name__)


# -- entries ---------------------------------------------------------------------------

_TYPES: dict[str, type] = {
    t.__name__: t for t in (TextDelta, ToolCallDelta, ReasoningDelta, NativeEvent, Finished)
}


def encode(model: str, events: Sequence[Event], now: float) -> bytes:
    return orjson.dumps(
        {"v": VERSION, "at": now, "model": model,
         "events": [[type(e).__name__, dataclasses.asdict(e)] for e in events]}
    )  # fmt: skip


@dataclass(frozen=True)
class Entry:
    at: float
    model: str
    events: tuple[Event, ...]


def decode(data: bytes) -> Entry | None:
    """An entry; None for anything unreadable (another version, a damaged value)."""
    try:
        raw = orjson.loads(data)
        if raw["v"] != VERSION:
            return None
        events = tuple(_event(name, fields) for name, fields in raw["events"])
        if not events or not isinstance(events[-1], Finished):
            return None
        return Entry(float(raw["at"]), str(raw["model"]), events)
    except Exception as exc:  # unreadable: a miss, never an error
        warn_throttled(log, "response-cache", f"unreadable response cache entry ({exc!r})")
        return None


_OPTIONAL = (str, type(None))
# What each event's fields hold in a readable entry: one of another type (a damaged
# or forged value, `text` as a number) makes the entry unreadable, a miss, rather than
# an answer that fails on its way out.
_FIELD_TYPES: dict[type, dict[str, Any]] = {
    TextDelta: {"text": str, "choice": int},
    ToolCallDelta: {"index": int, "id": _OPTIONAL, "name": _OPTIONAL, "arguments": str,
                    "choice": int, "signature": _OPTIONAL},
    ReasoningDelta: {"text": str, "summary_index": int, "signature": _OPTIONAL},
    NativeEvent: {"dialect": str, "data": dict},
    Finished: {"finish_reason": str, "response_id": _OPTIONAL, "stop_sequence": _OPTIONAL},
}  # fmt: skip


def _checked(event: Event) -> Event:
    for name, kind in _FIELD_TYPES[type(event)].items():
        value = getattr(event, name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"{type(event).__name__}.{name} holds a {type(value).__name__}")
    if isinstance(event, Finished):
        counts = event.counts
        if counts is not None and not all(
            type(getattr(counts, f.name)) is int for f in dataclasses.fields(counts)
        ):
            raise TypeError("Finished.counts holds a count that is not an integer")
        if not all(isinstance(r, str) for r in event.finish_reasons):
            raise TypeError("Finished.finish_reasons holds a reason that is not a string")
    elif isinstance(event, TextDelta):
        pairs = [(t.token, t.logprob) for t in event.logprobs]
        pairs += [(p.token, p.logprob) for t in event.logprobs for p in t.top]
        if not all(isinstance(a, str) and type(b) in (int, float) for a, b in pairs):
            raise TypeError("TextDelta.logprobs holds a malformed log probability")
    return event


def _event(name: str, fields: dict[str, Any]) -> Event:
    kind = _TYPES[name]
    if kind is TextDelta:
        fields["logprobs"] = tuple(
            TokenLogprob(p["token"], p["logprob"], tuple(TopLogprob(**t) for t in p["top"]))
            for p in fields["logprobs"]
        )
    elif kind is Finished:
        counts = fields["counts"]
        fields["counts"] = TokenCounts(**counts) if counts is not None else None
        fields["finish_reasons"] = tuple(fields["finish_reasons"])
    event: Event = kind(**fields)
    return _checked(event)


def _uncached(event: Event) -> Event:
    """A replayed answer's end: its tokens without the upstream prompt cache's reads and
    writes, and without the upstream's id of a response it stored (no upstream took
    part in the replay; a continuation goes through the gateway's own storage)."""
    if not isinstance(event, Finished):
        return event
    counts = event.counts and dataclasses.replace(
        event.counts, cached_tokens=0, cache_write_tokens=0, cache_write_1h_tokens=0
    )
    return dataclasses.replace(event, counts=counts, response_id=None)


# -- replay ----------------------------------------------------------------------------


class Replay:
    """A provider that answers with a stored answer's events; it has what the request
    it answers needs, having answered it before."""

    retry_policy = RetryPolicy()

    def __init__(self, events: Sequence[Event], capabilities: frozenset[str]) -> None:
        self._events = events
        self.capabilities = capabilities

    async def generate(self, request: GenerationRequest) -> Any:
        for event in self._events:
            yield event

    async def aclose(self) -> None:
        return None


class ResponseCache:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._writes: set[asyncio.Task[None]] = set()

    async def stored(
        self, plan: Plan, catalog: Catalog, request: GenerationRequest
    ) -> Upstream | None:
        """The stored answer as an upstream to run, when there is one young enough."""
        if not plan.read:
            return None
        data = await self._store.get(plan.key)
        entry = decode(data) if data is not None else None
        if entry is None or time.time() - entry.at > plan.max_age_s:
            return None
        try:
            model = catalog.model(entry.model)
        except NotFound:
            return None  # the model is gone from the config
        replay = Replay([_uncached(e) for e in entry.events], frozenset(request.needs()))
        return Upstream(REPLAYED, replay, model)

    def keep(self, plan: Plan, model: str, events: Sequence[Event]) -> None:
        """Stores a finished answer (in the background: the caller has it already)."""
        data = encode(model, events, time.time())
        if len(data) > plan.max_entry_bytes:
            return
        task = asyncio.create_task(self._store.put(plan.key, data, plan.ttl_s))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
