"""What the ratings of a kind of traffic say, per tag: how often the cheapest rung fell
short on it, and how often the rungs above it answered well enough.

Each tag's two rates are shrunk toward the global ones by how many ratings they rest on
(`SHRINK` pseudo-ratings of the global rate), and enter a prompt's difficulty as log-odds
offsets from the global rates: a tag rated often moves the estimate as far as its ratings
say, a tag rated a few times barely, an unseen tag not at all. The offsets of a prompt's
tags add up, as independent evidence does.

    offset(tags) = sum over tags t of  [logit(fail_t) - logit(fail)]
                                     + [logit(success_t) - logit(success)]

`fail` because a prompt of a kind the cheapest rung often fails needs the stronger one
more; `success` because going up only pays where the stronger rungs do better.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# Pseudo-ratings of the global rate each tag's estimate starts from.
SHRINK = 20.0
# A request carries at most this many tags, each at most TAG_CHARS characters.
MAX_TAGS = 16
TAG_CHARS = 64
# The key that counts every rating, whatever its tags.
EVERY = ""
NOTHING = (0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Rated:
    """One rated answer: the prompt, its tags, whether the cheapest rung answered it,
    and the rating (1: good enough)."""

    prompt: str
    tags: tuple[str, ...]
    cheapest: bool
    score: float


@dataclass(frozen=True, slots=True)
class Rate:
    """A share estimated from ratings: its sum and count."""

    total: float = 0.0
    count: int = 0

    def add(self, value: float) -> Rate:
        return Rate(self.total + value, self.count + 1)

    def shrunk(self, toward: float) -> float:
        return (self.total + SHRINK * toward) / (self.count + SHRINK)

    def mean(self, default: float) -> float:
        return self.total / self.count if self.count else default


def offsets(rated: Iterable[Rated]) -> dict[str, tuple[float, float]]:
    """Each rated tag's two log-odds offsets, (failure, success): see the module
    docstring. An answer of the cheapest rung counts toward its tags' failure rates (a
    rating below 1 is that much of a failure), an answer of a rung above toward their
    success rates."""
    fails: dict[str, Rate] = {}
    successes: dict[str, Rate] = {}
    for row in rated:
        into, value = (fails, 1.0 - row.score) if row.cheapest else (successes, row.score)
        for tag in (EVERY, *row.tags):
            into[tag] = into.get(tag, Rate()).add(value)
    fail = fails.get(EVERY, Rate()).mean(0.5)
    success = successes.get(EVERY, Rate()).mean(0.5)
    return {
        tag: (
            round(_logit(fails.get(tag, Rate()).shrunk(fail)) - _logit(fail), 6),
            round(_logit(successes.get(tag, Rate()).shrunk(success)) - _logit(success), 6),
        )
        for tag in sorted((fails.keys() | successes.keys()) - {EVERY})
    }


def offset(known: Mapping[str, tuple[float, float]], tags: Sequence[str]) -> float:
    """The log-odds a prompt's tags add to its difficulty; 0 for an unseen tag."""
    return sum(sum(known.get(tag, NOTHING)) for tag in tags)


def failure_offset(known: Mapping[str, tuple[float, float]], tags: Sequence[str]) -> float:
    """The part of `offset` that the cheapest rung's ratings say."""
    return sum(known.get(tag, NOTHING)[0] for tag in tags)


def _logit(p: float) -> float:
    p = min(1 - 1e-6, max(1e-6, p))
    return math.log(p / (1 - p))
