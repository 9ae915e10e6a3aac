"""Prompt text as hashed word n-grams, identical at training and at serving time.

Buckets come from CRC-32, not `hash()`: Python salts string hashes per process, and a model
file must mean the same thing in every process.
"""

from __future__ import annotations

import re
import zlib

# Long prompts keep their head (the question) and their tail (choices, the final ask); the
# middle is mostly context, and hashing it would push decisions past the latency budget.
HEAD_CHARS = 1000
TAIL_CHARS = 400

_TOKEN = re.compile(r"[^\W\d_]+|\d+|[^\w\s]")


def clip(prompt: str) -> str:
    """Returns the part of `prompt` that the n-gram features look at."""
    if len(prompt) <= HEAD_CHARS + TAIL_CHARS:
        return prompt
    return prompt[:HEAD_CHARS] + "\n" + prompt[-TAIL_CHARS:]


def tokens(prompt: str) -> list[str]:
    """Lower-cased words and punctuation; a number becomes its digit count, not its value."""
    out = []
    for token in _TOKEN.findall(clip(prompt).lower()):
        out.append(f"<num{min(len(token), 4)}>" if token.isdigit() else token)
    return out


_hashes: dict[str, int] = {}
# Bounds the memo of word hashes; a prompt stream never makes it grow past this.
_MAX_MEMO = 200_000
_BIGRAM_MIX = 0x9E3779B1


def _hash(word: str) -> int:
    value = _hashes.get(word)
    if value is None:
        if len(_hashes) >= _MAX_MEMO:
            _hashes.clear()
        value = _hashes[word] = zlib.crc32(word.encode())
    return value


def buckets(prompt: str, bits: int) -> list[int]:
    """The distinct hash buckets of the prompt's word unigrams and bigrams, sorted.

    A bigram's bucket mixes its two words' CRC-32s: integer arithmetic, no string building.
    """
    mask = (1 << bits) - 1
    hashes = [_hash(word) for word in tokens(prompt)]
    seen = {h & mask for h in hashes}
    seen.update(
        ((a * _BIGRAM_MIX) ^ b) >> 7 & mask for a, b in zip(hashes, hashes[1:], strict=False)
    )
    return sorted(seen)
