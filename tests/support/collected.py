"""A whole generation gathered from a provider's events, for tests of the adapters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from server.base.generation import Finished, TextDelta


@dataclass
class Collected:
    """A whole generation, gathered from its events."""

    text_parts: list[str] = field(default_factory=list)
    finished: Finished | None = None

    @property
    def text(self) -> str:
        return "".join(self.text_parts)


async def collect(events: AsyncIterator[Any]) -> Collected:
    out = Collected()
    async for event in events:
        if isinstance(event, TextDelta):
            out.text_parts.append(event.text)
        else:
            assert isinstance(event, Finished)
            assert out.finished is None, "exactly one Finished"
            out.finished = event
    return out
