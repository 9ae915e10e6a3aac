"""A Realtime session's audio tokens, each priced at its own rate: the audio prices,
the text prices only where the config says so, and no cost at all where audio is
unpriced; and the simulated voice and ear, the same for the same input."""

from __future__ import annotations

import pytest

from server.base import costs
from server.base import realtime_audio as audio
from server.base.config import Price
from server.base.generation import GenerationRequest, Message, TokenCounts

# 100 prompt tokens of which 30 heard (10 of the text cached), 50 completion tokens of
# which 40 spoken.
SPOKEN_TURN = TokenCounts(100, 50, cached_tokens=10, audio_input_tokens=30, audio_output_tokens=40)


def test_audio_tokens_are_priced_at_the_audio_prices_apart_from_text() -> None:
    price = Price(input=5, output=20, cached_input=2.5, audio_input=32, audio_output=64)
    spent = costs.cost(SPOKEN_TURN, price)
    assert spent is not None
    assert spent.audio_input_usd == pytest.approx(30 * 32 / 1e6)
    assert spent.audio_output_usd == pytest.approx(40 * 64 / 1e6)
    assert spent.input_usd == pytest.approx((60 * 5 + 30 * 32) / 1e6)
    assert spent.output_usd == pytest.approx((10 * 20 + 40 * 64) / 1e6)
    assert spent.total_usd == pytest.approx(spent.input_usd + spent.output_usd + 10 * 2.5 / 1e6)


def test_unpriced_audio_leaves_the_call_unpriced_unless_the_config_bills_it_as_text() -> None:
    assert costs.cost(SPOKEN_TURN, Price(input=5, output=20)) is None
    as_text = costs.cost(SPOKEN_TURN, Price(input=5, output=20, audio_at_text_price=True))
    assert as_text is not None
    # No cached-input price: the cached text is input as well.
    assert as_text.total_usd == pytest.approx((100 * 5 + 50 * 20) / 1e6)
    # Text alone needs no audio price.
    text_only = costs.cost(TokenCounts(100, 50), Price(input=5, output=20))
    assert text_only is not None and text_only.audio_input_usd is None


def test_the_reservation_of_a_spoken_turn_covers_its_audio() -> None:
    price = Price(input=5, output=20, audio_input=32, audio_output=64)
    written = GenerationRequest(messages=(Message("user", "hi"),), max_tokens=100)
    spoken = GenerationRequest(
        messages=(Message("user", "hi"),), max_tokens=100, output_audio=True, input_audio_tokens=50
    )
    worst = costs.max_cost([price], spoken, 100)
    assert worst >= costs.max_cost([price], written, 100) + (50 * 32 + 100 * 2 * 64) / 1e6


def test_the_simulated_voice_and_ear_are_deterministic() -> None:
    pcm = audio.tone("two words")
    assert len(pcm) == 2 * audio.MS_PER_WORD * audio.BYTES_PER_SECOND // 1000
    assert pcm == audio.tone("other pair") and any(pcm)
    heard = audio.heard(b"\x01\x00" * 12_000)
    assert heard == audio.heard(b"\x01\x00" * 12_000) != audio.heard(b"\x02\x00" * 12_000)
    assert "500 milliseconds" in heard
    assert audio.input_tokens(24_000) == 5 and audio.output_tokens(200) == 4


def test_a_spoken_turn_needs_a_provider_that_speaks() -> None:
    spoken = GenerationRequest(messages=(Message("user", "hi"),), output_audio=True)
    heard = GenerationRequest(messages=(Message("user", "hi"),), input_audio_tokens=5)
    assert spoken.needs() == heard.needs() == {"spoken_audio": "realtime_audio"}
    assert GenerationRequest(messages=(Message("user", "hi"),)).needs() == {}
