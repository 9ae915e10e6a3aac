"""Prompt-cache breakpoints callers mark with `cache_control`, read alike in every
dialect (the Messages API's blocks and tools, chat completions' content parts and
tools): each mark becomes the lifetime of a breakpoint after the message or tool that
carries it (`Message.cache`, `ToolSpec.cache`), which adapters of providers that cache
on request write back in their own terms. A mark inside a message moves to the
message's end: the cached prefix is a little longer, and it is the same on every turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

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


class Markable(Protocol):
    """A contract message that may carry a mark: a content part or block, a tool."""

    cache_control: cache_pb2.CacheControl

    def HasField(self, name: str) -> bool: ...


def mark(item: Markable, where: str) -> str | None:
    """The lifetime of the item's mark, None without one; `where` names the item."""
    return (
        lifetime(item.cache_control, f"{where}.cache_control")
        if item.HasField("cache_control")
        else None
    )


def marks(items: Iterable[Markable], where: str) -> str | None:
    """The longest lifetime marked on any of the items (`where[j]`), None without any."""
    return longest(m for j, item in enumerate(items) if (m := mark(item, f"{where}[{j}]")))
