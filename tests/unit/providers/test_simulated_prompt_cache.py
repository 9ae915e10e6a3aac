"""The simulated provider's prompt cache: a prefix it served within its TTL is read
from the cache (up to the last message boundary it saw), one it never served or that
expired is not, and the cache stays bounded."""

from __future__ import annotations

from server.base.generation import GenerationRequest, Message
from server.providers.simulated import PrefixCache


def chat(*texts: str) -> GenerationRequest:
    return GenerationRequest(messages=tuple(Message("user", t) for t in texts))


def test_a_served_prefix_is_read_back_until_it_expires():
    now = [100.0]
    cache = PrefixCache(ttl_s=300, clock=lambda: now[0])
    assert cache.read(chat("a long system prompt " * 50)) == 0
    first_turn = cache.read(chat("a long system prompt " * 50, "next"))
    assert first_turn > 200
    assert cache.read(chat("another prompt " * 50)) == 0
    # The whole first turn (both messages) is cached now, and more than its first part.
    assert cache.read(chat("a long system prompt " * 50, "next", "more")) > first_turn
    now[0] += 301
    assert cache.read(chat("a long system prompt " * 50, "next", "more")) == 0


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(PrefixCache, "MAX_ENTRIES", 10)
    cache = PrefixCache(ttl_s=300)
    for i in range(100):
        cache.read(chat(f"prompt {i}"))
    assert len(cache._expiry) <= 10
