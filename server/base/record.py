"""A call's record: what the handlers say of it as it runs (who called, what it reserved,
what it ran) and, once it is closed, the usage ledger's row for it.

The accounting middleware opens the record and closes it; in between only the explicit
steps fill it: admission and reservations (server/accounting/accounts.py) and the
application's `ran` and `routed`.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from server.base.caller import Principal, Reservation
from server.base.config import ModelConfig
from server.base.costs import Cost
from server.base.generation import TokenCounts

# Rate-limit tickets: unique across processes (sharing one limiter) without a uuid each.
_TICKET_PREFIX = os.urandom(8).hex() + "-"
_tickets = itertools.count()


def new_ticket() -> str:
    """A rate-limit ticket no other call of any process holds."""
    return f"{_TICKET_PREFIX}{next(_tickets):x}"


@dataclass(frozen=True, slots=True)
class UsageRecord:
    ts: float
    request_id: str
    key_id: str
    key_name: str
    method: str
    model: str
    provider: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    input_cost_usd: float | None
    output_cost_usd: float | None
    cache_input_cost_usd: float | None
    total_cost_usd: float | None
    latency_ms: float
    ttft_ms: float | None
    # `OK` or the gRPC code name (RESOURCE_EXHAUSTED...), with the error reason beside it.
    status: str
    error_reason: str = ""
    # For routed requests: the profile, the prompt's estimated difficulty and, when the
    # operator records prompts, the prompt itself.
    route_profile: str = ""
    difficulty: float | None = None
    prompt: str | None = None
    # The routed request's tags, comma-separated (none: empty).
    tags: str = ""
    # The prompt tokens read from and written to the upstream's prompt cache (the
    # hour-long writes among them), the reasoning tokens among the completion tokens,
    # and what the writes cost.
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_cost_usd: float | None = None
    # Whether the answer came from the gateway's response cache.
    response_cached: bool = False
    # For an MCP tool call: the server, the tool's name there, how the call ended
    # (ok, tool_error, denied, timeout, upstream_error, too_large, cancelled) and the
    # bytes of the result relayed.
    mcp_server: str = ""
    mcp_tool: str = ""
    mcp_outcome: str = ""
    result_bytes: int = 0
    # The response a row belongs to when one response is several rows: each model round
    # and each tool call of a chain the gateway runs (an MCP tool inside a model call).
    response_id: str = ""
    # Where the key sits when the row is written: its team, the team's organisation
    # and its owner as a user (empty outside any team), so each level's spend is the
    # sum of its rows.
    team_id: str = ""
    org_id: str = ""
    user_id: str = ""
    # What the call is billed in (tokens, seconds, characters, images, search_units:
    # server/base/operation.py) and how many; None for a call that billed nothing.
    unit: str = "tokens"
    units: float | None = None
    # Milliseconds the call waited for a rate limit's room (`max_wait_s`), part of its
    # latency; 0 when it did not wait.
    queue_ms: float = 0.0
    # On a candidate model's row (shadow traffic): the request id of the call it
    # shadowed, whether the two answers agreed and their similarity (0 to 1).
    shadow_of: str = ""
    shadow_agrees: bool | None = None
    shadow_score: float | None = None
    # For a line of a batch: the batch and the line's custom_id (the database holds at
    # most one row per pair, so a line is billed once).
    batch_id: str = ""
    custom_id: str = ""
    # A Realtime session's audio: the prompt tokens heard and the completion tokens
    # spoken (among prompt_tokens and completion_tokens), and what each cost at the
    # audio prices (among input_cost_usd and output_cost_usd; None without any).
    audio_input_tokens: int = 0
    audio_output_tokens: int = 0
    audio_input_cost_usd: float | None = None
    audio_output_cost_usd: float | None = None
    # Of the audio tokens heard, those read from the upstream's prompt cache (among
    # cached_tokens too; their cost is among cache_input_cost_usd).
    cached_audio_tokens: int = 0


class Metered(Protocol):
    """What the ledger reads from the work a call ran: a generation or an operation
    (embeddings, rerank...)."""

    # Seconds spent waiting on upstreams; the rest of a call's time is the gateway's own.
    upstream_s: float

    @property
    def started(self) -> bool:
        """Whether an upstream answered (so there are counts and a cost to account)."""
        ...

    @property
    def model(self) -> ModelConfig: ...

    @property
    def provider_id(self) -> str: ...

    @property
    def response_cached(self) -> bool:
        """Whether the answer came from the gateway's response cache."""
        ...

    def counts(self) -> TokenCounts: ...

    def cost(self, batch_factor: float | None = None) -> Cost | None:
        """What the call cost: at the model's live prices, or a batch line's at its batch
        prices (`batch_factor` the configured share of a live rate the model gives none
        for)."""
        ...

    def billed(self) -> tuple[str, float]:
        """The unit the call is billed in and how many of it it used."""
        ...

    def ttft_ms(self) -> float | None: ...

    async def aclose(self) -> None:
        """Stops whatever still runs upstream."""
        ...


class GuardrailReport(Protocol):
    """What a call's guardrails found and did, for the metrics and the request log."""

    # (guardrail, entity, phase, action) -> findings
    counts: Counter[tuple[str, str, str, str]]
    # phase -> seconds spent scanning
    seconds: dict[str, float]
    # guardrail -> engine failures let through (fail: open)
    failures: Counter[str]


class CallRecord:
    """One call's account, from admission to its ledger row."""

    __slots__ = (
        "method", "started", "ticket", "principal", "model", "run", "limited_tokens",
        "request_counted", "reservations", "route_profile", "difficulty", "prompt", "tags",
        "usage", "closed", "failure", "streaming", "guardrails", "response_id", "holds",
        "queue_s", "after_close",
        "usage", "closed", "failure", "streaming", "guardrails", "response_id",
        "batch_id", "custom_id", "price_factor",
    )  # fmt: skip

    def __init__(self) -> None:
        self.method = ""
        self.started = time.time()
        self.ticket = new_ticket()
        self.principal: Principal | None = None
        # The model asked for, until a run says which one answered.
        self.model = ""
        self.run: Metered | None = None
        # Whether tokens were counted against the key's per-minute limit (to settle).
        self.limited_tokens = False
        # Whether the request was counted already (before reading stored state), so
        # its reservation counts only its tokens.
        self.request_counted = False
        # What the call holds against each level's budget until it settles.
        self.reservations: list[Reservation] = []
        # Set for routed requests; `prompt` only when the operator records prompts.
        self.route_profile = ""
        self.difficulty: float | None = None
        self.prompt: str | None = None
        self.tags: tuple[str, ...] = ()
        # The ledger row, once closed (None for a call never admitted): what the
        # metrics and the request log report, so they agree with the ledger.
        self.usage: UsageRecord | None = None
        self.closed = False
        # A failure the handler reported in its own answer instead of raising it (a
        # dialect whose stream ends with a failed event): the ledger records it.
        self.failure: BaseException | None = None
        # Whether the call streams its answer (a whole answer is gathered first).
        self.streaming = False
        # What the call's guardrails did (server/guardrails), when any applied.
        self.guardrails: GuardrailReport | None = None
        # The response this call's row belongs to, when the call is one of its rounds.
        self.response_id = ""
        # The in-flight caps the call counts against (server/accounting/traffic.py),
        # and the seconds it waited for a rate limit's room.
        self.holds: list[Any] = []
        self.queue_s = 0.0
        # Called once the call's row is written (a shadow call compares answers then).
        self.after_close: list[Callable[[], None]] = []
        # A batch line's batch and custom_id, and the share of a live rate it pays where
        # the model gives no batch rate (Price.for_batch).
        self.batch_id = ""
        self.custom_id = ""
        self.price_factor = 1.0

    def next_round(self) -> CallRecord:
        """A new account for the next model round of the same call (a chain of rounds
        with tool calls between them): the same caller, method and response, its request
        already counted, a ticket and reservation of its own."""
        after = CallRecord()
        after.method, after.streaming = self.method, self.streaming
        after.principal, after.model = self.principal, self.model
        after.request_counted = True
        after.response_id = self.response_id
        return after

    def open(self, method: str, streaming: bool = False) -> None:
        """Starts the account of a call of `method` (the accounting middleware)."""
        self.method = method
        self.streaming = streaming
        self.started = time.time()

    def asked_for(self, model: str) -> None:
        """The model the caller named, recorded before anything ran."""
        self.model = model

    def ran(self, run: Metered) -> None:
        """The work this call runs: what the ledger meters when the call ends."""
        self.run = run

    def routed(
        self,
        profile: str,
        difficulty: float | None,
        prompt: str | None,
        tags: tuple[str, ...] = (),
    ) -> None:
        """The router's decision (and the prompt, when the operator records prompts),
        with the request's tags."""
        self.route_profile, self.difficulty, self.prompt = profile, difficulty, prompt
        self.tags = tags

    def failed(self, error: BaseException) -> None:
        """The call failed although its handler ends normally, having told the caller
        in its own words (a `response.failed` event)."""
        self.failure = error

    @property
    def answered(self) -> Metered | None:
        """The run, once an upstream answered; None before (nothing to meter)."""
        run = self.run
        return run if run is not None and run.started else None
