"""A Realtime session's audio as the gateway counts and simulates it: PCM16 mono at
24 kHz (the Realtime API's `audio/pcm`), counted in tokens as OpenAI counts them (an
input token per 100 ms heard, an output token per 50 ms spoken), and the simulated
provider's voice: a tone per word, the same for the same words."""

from __future__ import annotations

import hashlib
import math
import struct

RATE = 24_000
BYTES_PER_SECOND = RATE * 2
MS_PER_INPUT_TOKEN = 100
MS_PER_OUTPUT_TOKEN = 50
# How long the simulated voice says one piece of text.
MS_PER_WORD = 100
_TONE_HZ = 440.0
_AMPLITUDE = 8_000


def duration_ms(pcm: bytes | int) -> int:
    size = pcm if isinstance(pcm, int) else len(pcm)
    return size * 1000 // BYTES_PER_SECOND


def input_tokens(pcm_bytes: int) -> int:
    """The tokens `pcm_bytes` of heard audio count for (at least one for any audio)."""
    return math.ceil(duration_ms(pcm_bytes) / MS_PER_INPUT_TOKEN) if pcm_bytes else 0


def output_tokens(spoken_ms: int) -> int:
    return math.ceil(spoken_ms / MS_PER_OUTPUT_TOKEN)


def words(text: str) -> int:
    return len(text.split())


def spoken_ms(text: str) -> int:
    """How long the simulated voice takes to say `text`."""
    return words(text) * MS_PER_WORD


def _word_tone() -> bytes:
    # 100 ms of 440 Hz is 44 whole periods: words joined make one continuous tone.
    samples = MS_PER_WORD * RATE // 1000
    step = 2 * math.pi * _TONE_HZ / RATE
    return struct.pack(
        f"<{samples}h", *(int(_AMPLITUDE * math.sin(step * n)) for n in range(samples))
    )


_WORD_TONE = _word_tone()


def tone(text: str) -> bytes:
    """The simulated voice saying `text`: a 440 Hz tone of `spoken_ms(text)`, built
    once per word's length (computing each sample per answer took 55 ms for 50 words)."""
    return _WORD_TONE * words(text)


def heard(pcm: bytes) -> str:
    """What the simulated ear hears in `pcm`: the same words for the same audio."""
    digest = hashlib.blake2b(pcm, digest_size=4).hexdigest()
    return f"Audio {digest} of {duration_ms(pcm)} milliseconds."
