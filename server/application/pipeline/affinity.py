"""Cache affinity: a conversation goes back to the provider that served its prompt
prefix while that provider's prompt cache may still hold it.

Agents resend the same long prefix (system prompt, tools, history) every turn, and a
provider's prompt cache makes that prefix 50-90% cheaper, but only on the provider
(and key) that cached it. So the gateway remembers which provider served a prefix and
tries it first next time, for `ttl_s` after its last use (each use renews it, as the
providers' caches do).

The prefix's key: the caller's `prompt_cache_key`; else a session header
(`session_headers`); else a hash of what agents resend unchanged on every turn: the
system prompt, the tools and the first user message. With the subject (model or
profile) it names the provider that served it last. That provider moves ahead only
among the providers of the model that is first in line, so the router's and the
caller's choice of model holds; a disabled or failing provider is passed over as
dispatch always does (an open circuit is skipped, an error fails over), and the
provider that answers instead is remembered.

Outcomes, for metrics: `hit` (the remembered provider answered), `moved` (another one
did), `miss` (nothing remembered). The memory store is per process; with
`storage.redis_url` every instance and worker shares one (`{prefix}affinity:{key}`).
A store that fails or stalls is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from server.application.pipeline.catalog import Upstream
from server.application.pipeline.expiring import Store
from server.base.config import AffinityConfig
from server.base.generation import GenerationRequest


class Affinity:
    def __init__(self, store: Store) -> None:
        self._store = store

    def key(
        self,
        config: AffinityConfig,
        request: GenerationRequest,
        metadata: Mapping[str, str],
        subject: str,
    ) -> str | None:
        """The prefix's key (see the module doc); None when affinity is off or the
        request has no prefix to share (a text completion without a cache key)."""
        if not config.enabled:
            return None
        basis = _basis(config, request, metadata)
        if basis is None:
            return None
        return hashlib.sha256(f"{subject}\0{basis}".encode()).hexdigest()[:32]

    async def ordered(
        self, key: str | None, upstreams: Sequence[Upstream]
    ) -> tuple[list[Upstream], str | None]:
        """The upstreams with the remembered one first (among its model's), and its id."""
        if key is None or not upstreams:
            return list(upstreams), None
        found = await self._store.get(key)
        remembered = found.decode() if found is not None else None
        first_model = upstreams[0].model.id
        for i, upstream in enumerate(upstreams):
            if upstream.id == remembered and upstream.model.id == first_model:
                return [upstream, *upstreams[:i], *upstreams[i + 1 :]], remembered
        return list(upstreams), None

    async def remember(self, key: str | None, provider: str, ttl_s: float) -> None:
        if key is not None and provider:
            await self._store.put(key, provider.encode(), ttl_s)


def outcome(remembered: str | None, answered: str) -> str:
    if remembered is None:
        return "miss"
    return "hit" if remembered == answered else "moved"


def _basis(
    config: AffinityConfig, request: GenerationRequest, metadata: Mapping[str, str]
) -> str | None:
    if request.prompt_cache_key:
        return f"key:{request.prompt_cache_key}"
    for header in config.session_headers:
        session = metadata.get(header)
        if session:
            return f"session:{header}:{session}"
    if not request.is_chat:
        return None
    system = [m.content for m in request.messages if m.role in ("system", "developer")]
    first = next((m.content for m in request.messages if m.role == "user"), "")
    tools = [[t.name, t.description, t.parameters] for t in request.tools]
    return "prefix:" + json.dumps([system, tools, first], sort_keys=True, default=str)
