"""The guardrail engine's cost: CPU per 5 kB of text, how it grows up to 1 MiB, and
what holding a stream back costs per relayed event, against the same stream passed on
untouched, in one run.

The text is prose with a finding every few hundred characters (addresses, cards,
keys...), as a support conversation has; every built-in detector is on, redacting.

Run: python -m bench.guardrails
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from server.base.config import GuardrailConfig
from server.base.generation import Event, Finished, TextDelta
from server.guardrails.answer import guarded
from server.guardrails.guard import Guard, Rail

SENTENCE = (
    "The customer wrote about the late delivery and asked us to call back tomorrow. "
    "Their order number is 58213 and the parcel left the depot on Monday afternoon. "
)
FINDINGS = ("alice@example.com", "4111 1111 1111 1111", "+44 20 7946 0958",
            "GB82 WEST 1234 5698 7654 32", "sk-proj-abcdefghijklmnopqrstuvwx")  # fmt: skip


def text(size: int) -> str:
    out, i = [], 0
    while sum(map(len, out)) < size:
        out += [SENTENCE, FINDINGS[i % len(FINDINGS)], ". "]
        i += 1
    return "".join(out)[:size]


def cpu_ms(work, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for _ in range(repeat):
            work()
        best = min(best, (time.process_time() - started) / repeat)
    return best * 1000


async def events(body: str, piece: int) -> AsyncIterator[Event]:
    for i in range(0, len(body), piece):
        yield TextDelta(body[i : i + piece])
    yield Finished("stop")


def stream_us(body: str, piece: int, held: bool) -> float:
    """CPU per relayed event of a stream of `piece`-char deltas."""
    count = len(body) // piece + 1

    async def drain() -> None:
        source = events(body, piece)
        if held:
            source = guarded(Guard([Rail.of(GuardrailConfig(id="pii"))], unary=False), source)
        async for _ in source:
            pass

    def once() -> None:
        asyncio.run(drain())

    return cpu_ms(once, 5) * 1000 / count


def main() -> None:
    print("| text | CPU ms per call | CPU ms per 5 kB |")
    print("|---|---|---|")
    for size in (5_000, 50_000, 500_000, 1_048_576):
        sample = text(size)
        repeat = max(1, 200_000 // size)

        def scan(sample: str = sample) -> None:
            Guard([Rail.of(GuardrailConfig(id="pii"))], unary=True).text(sample, "input")

        ms = cpu_ms(scan, repeat)
        print(f"| {size / 1000:g} kB | {ms:.3f} | {ms * 5000 / size:.3f} |")
    body = text(20_000)
    plain, guarded = stream_us(body, 4, False), stream_us(body, 4, True)
    print("\n| stream of 4-char deltas | CPU us per event |")
    print("|---|---|")
    print(f"| passed on untouched | {plain:.1f} |")
    print(f"| held back and scanned | {guarded:.1f} ({guarded / plain:.2f}x) |")


if __name__ == "__main__":
    main()
