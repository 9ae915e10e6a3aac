"""Prompt-cache breakpoints callers mark with `cache_control`, read alike in every
dialect (the Messages API's blocks and tools, chat completions' content parts and
tools): each mark becomes the lifetime of a breakpoint after the message or tool that
carries it (`Message.cache`, `ToolSpec.cache`), which adapters of providers that cache
on request write back in their own terms. A mark inside a message moves to the
message's end: the cached prefix is a little longer, and it is the same on every turn.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.v1 import cache_pb2

from server.base.errors import InvalidArgument

LIFETIMES = ("5m", "1h")


def lifetime(control: cache_pb2.CacheControl, where: str) -> str:
    """The lifetime one mark asks for, checked; `where` names its cache_control."""
    if control.type != "ephemeral":
        raise InvalidArgument.for_field(f"{where}.type", "must be `ephemeral`")
    if not control.HasField("ttl"):
        return "5m"
    if control.ttl not in LIFETIMES:
        raise InvalidArgument.for_field(f"{where}.ttl", "must be 5m or 1h")
    return control.ttl


def longest(marks: Iterable[str]) -> str | None:
    """The longest lifetime of several marks on one message; None without any."""
    found = set(marks)
    return "1h" if "1h" in found else ("5m" if found else None)
