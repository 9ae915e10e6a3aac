"""What a call cost and how long it took: Cost for the ledger, Usage for callers. A
generation is priced by its tokens; an operation (server/base/operation.py) in the unit
its model's price names (`billed`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.v1 import usage_pb2

from server.base import tokens
from server.base.config import Price
from server.base.generation import GenerationRequest, TokenCounts
from server.base.operation import Measure, Unit

PER_MILLION = 1_000_000
# Costs are rounded to a billionth of a cent: exact enough, free of float noise.
COST_DIGITS = 11


@dataclass(frozen=True, slots=True)
class Cost:
    """What one generation cost, in USD: input neither read from nor written to a
    prompt cache, output, cache reads (None without any) and cache writes (None
    without any); the total is their sum."""

    input_usd: float
    output_usd: float
    cache_input_usd: float | None
    total_usd: float
    cache_write_usd: float | None = None
    # The audio tokens' share of input_usd and of output_usd (None without any).
    audio_input_usd: float | None = None
    audio_output_usd: float | None = None


def batch_price(price: Price | None, factor: float | None) -> Price | None:
    """What a batch line pays (`factor` given): the model's batch rates; else `price`."""
    if price is None or factor is None:
        return price
    return price.for_batch(factor)


def cost(counts: TokenCounts, price: Price | None) -> Cost | None:
    """Each kind of token at its own price: plain input, cache reads, cache writes
    (5-minute and 1-hour apart), visible output and reasoning; a long prompt at its
    tier's prices. None without a price: an unpriced model has no cost, not a zero one."""
    if price is None:
        return None
    price = price.for_prompt(counts.prompt_tokens)
    heard, spoken = counts.audio_input_tokens, counts.audio_output_tokens
    audio_in = _audio_rate(price.audio_input, price.input, price, heard)
    audio_out = _audio_rate(price.audio_output, price.output, price, spoken)
    if audio_in is None or audio_out is None:
        return None  # audio without a price: the call is unpriced, not half priced
    seen = counts.image_input_tokens
    # Cached audio is among both the cached tokens and the audio heard: the rest of
    # each is priced apart (cached text, audio heard afresh).
    cached_audio = counts.cached_audio_tokens
    uncached = (
        counts.prompt_tokens - counts.cached_tokens - counts.cache_write_tokens
        - (heard - cached_audio) - seen
    )  # fmt: skip
    visible_output = counts.completion_tokens - counts.reasoning_tokens - spoken
    write_5m = _or(price.cache_write, price.input)
    write_1h = _or(price.cache_write_1h, write_5m)
    heard_cost = (heard - cached_audio) * audio_in / PER_MILLION
    spoken_cost = spoken * audio_out / PER_MILLION
    seen_cost = seen * _or(price.image_input, price.input) / PER_MILLION
    input_cost = uncached * price.input / PER_MILLION + heard_cost + seen_cost
    cached_cost = (
        (counts.cached_tokens - cached_audio) * _or(price.cached_input, price.input)
        + cached_audio * _or(price.cached_audio_input, audio_in)
    ) / PER_MILLION
    write_cost = (
        (counts.cache_write_tokens - counts.cache_write_1h_tokens) * write_5m
        + counts.cache_write_1h_tokens * write_1h
    ) / PER_MILLION
    output_cost = (
        visible_output * price.output + counts.reasoning_tokens * _or(price.reasoning, price.output)
    ) / PER_MILLION + spoken_cost
    return Cost(
        input_usd=round(input_cost, COST_DIGITS),
        output_usd=round(output_cost, COST_DIGITS),
        cache_input_usd=round(cached_cost, COST_DIGITS) if counts.cached_tokens else None,
        total_usd=round(input_cost + cached_cost + write_cost + output_cost, COST_DIGITS),
        cache_write_usd=round(write_cost, COST_DIGITS) if counts.cache_write_tokens else None,
        audio_input_usd=round(heard_cost, COST_DIGITS) if heard else None,
        audio_output_usd=round(spoken_cost, COST_DIGITS) if spoken else None,
    )


def _audio_rate(audio: float | None, text: float, price: Price, tokens: int) -> float | None:
    """USD per million audio tokens: the audio price, else the text price where the
    config says so; None when audio is there and unpriced (0 when there is none)."""
    if not tokens:
        return 0.0
    if audio is not None:
        return audio
    return text if price.audio_at_text_price else None


@dataclass(frozen=True, slots=True)
class Billed:
    """An operation's bill: the unit it is billed in, how many, and what they cost
    (None: the model has no price for them, which is absent, never $0)."""

    unit: Unit
    quantity: float
    cost: Cost | None


def billed(measure: Measure, price: Price | None) -> Billed:
    """Bills an operation in the first of its units its model prices, else by its
    tokens at the token prices. Audio seconds and characters are input; images output."""
    counts = measure.counts
    tokens_bill = Billed("tokens", counts.total_tokens, cost(counts, price))
    if price is None:
        return tokens_bill
    for unit, quantity in measure.units.items():
        rate = _unit_price(price, unit, measure.variant)
        if rate is None:
            continue
        total = round(quantity * rate, COST_DIGITS)
        spent = Cost(
            input_usd=0.0 if unit == "images" else total,
            output_usd=total if unit == "images" else 0.0,
            cache_input_usd=None,
            total_usd=total,
        )
        return Billed(unit, quantity, spent)
    return tokens_bill


def _unit_price(price: Price, unit: Unit, variant: str) -> float | None:
    """USD per one `unit` under `price`; None when it does not price that unit."""
    if unit == "seconds":
        return price.per_second
    if unit == "characters":
        per_million = price.per_million_characters
        return None if per_million is None else per_million / PER_MILLION
    if unit == "search_units":
        return price.per_search_unit
    if unit == "images":
        sizes = price.per_image
        size = variant.rpartition("/")[2]
        for key in (variant, size, "default"):
            if key in sizes:
                return sizes[key]
    return None


def max_cost(prices: Iterable[Price | None], request: GenerationRequest, default_max: int) -> float:
    """The most a request can cost on any of the models it may be routed to, in USD."""
    prompt = tokens.estimate_prompt(request)
    # Every choice (and every best_of candidate) may generate up to max_tokens.
    completion = (
        (request.max_tokens or default_max)
        * max(request.n, request.best_of or 1)
        * max(1, len(request.prompts))
    )
    worst = 0.0
    for price in prices:
        if price is None:
            continue
        # The prompt's tier (it may grow past one with the estimate's error: take the
        # dearer), and every prompt token may be a cache write of either lifetime.
        for tier in (price.for_prompt(prompt), price.for_prompt(prompt * 2)):
            input_price = max(tier.input, tier.cache_write or 0, tier.cache_write_1h or 0)
            output = max(tier.output, tier.reasoning or 0)
            if request.output_audio:
                # Each word written is also spoken: 2 audio tokens (server/base/realtime_audio.py).
                output += 2 * _or(tier.audio_output, tier.output)
            heard = request.input_audio_tokens * _or(tier.audio_input, tier.input)
            worst = max(worst, (prompt * input_price + heard + completion * output) / PER_MILLION)
    return worst


def input_cost(price: Price | None, prompt_tokens: int) -> float:
    """What `prompt_tokens` input tokens cost, in USD (an embedding's whole cost)."""
    return (
        0.0
        if price is None
        else prompt_tokens * price.for_prompt(prompt_tokens).input / PER_MILLION
    )


def usage(
    counts: TokenCounts,
    spent: Cost | None,
    latency_ms: float,
    ttft_ms: float | None,
) -> usage_pb2.Usage:
    """Builds Usage: token counts, timing, and what they cost (`spent`: `cost()` of
    them, which the caller keeps for its ledger row; None when unpriced)."""
    result = usage_pb2.Usage(
        prompt_tokens=counts.prompt_tokens,
        completion_tokens=counts.completion_tokens,
        total_tokens=counts.total_tokens,
        latency_ms=round(latency_ms, 3),
    )
    if ttft_ms is not None:
        result.ttft_ms = round(ttft_ms, 3)
    # Both breakdowns are always there, zeros included, as OpenAI sends them.
    result.prompt_tokens_details.cached_tokens = counts.cached_tokens
    if counts.cache_write_tokens:
        result.prompt_tokens_details.cache_write_tokens = counts.cache_write_tokens
    if counts.cache_write_1h_tokens:
        result.prompt_tokens_details.cache_write_1h_tokens = counts.cache_write_1h_tokens
    result.completion_tokens_details.reasoning_tokens = counts.reasoning_tokens
    result.prompt_tokens_details.audio_tokens = counts.audio_input_tokens
    result.completion_tokens_details.audio_tokens = counts.audio_output_tokens
    result.prompt_tokens_details.SetInParent()
    result.completion_tokens_details.SetInParent()
    if spent is None:
        return result
    result.input_cost_usd = spent.input_usd
    result.output_cost_usd = spent.output_usd
    if spent.cache_input_usd is not None:
        result.cache_input_cost_usd = spent.cache_input_usd
    if spent.cache_write_usd is not None:
        result.cache_write_cost_usd = spent.cache_write_usd
    result.total_cost_usd = spent.total_usd
    return result


def operation_usage(measure: Measure, price: Price | None, latency_ms: float) -> usage_pb2.Usage:
    """Usage of an operation: its tokens, its timing, and its cost in the unit billed."""
    result = usage(measure.counts, None, latency_ms, None)
    spent = billed(measure, price).cost
    if spent is not None:
        result.input_cost_usd = spent.input_usd
        result.output_cost_usd = spent.output_usd
        result.total_cost_usd = spent.total_usd
    return result


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


class Stopwatch:
    """Measures latency and time to first token on a monotonic clock."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_token: float | None = None

    def mark_first_token(self) -> None:
        if self.first_token is None:
            self.first_token = time.perf_counter()

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def ttft_ms(self) -> float | None:
        return None if self.first_token is None else (self.first_token - self.started) * 1000
