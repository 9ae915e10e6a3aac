"""The gateway's configuration: one YAML file, validated whole at start-up.

A bad file stops start-up with a ConfigError naming the field (`models[0].price.input:
...`). With no file given, the default config embedded in this package is served.
"""

from __future__ import annotations

import os
import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from server.base import prices
from server.base.generation import ALL_CAPABILITIES, Capability, served_dialect
from server.base.moderation import CATEGORIES as MODERATION_CATEGORIES

# The routing profiles: named here and nowhere else.
ProfileName = Literal["economy", "balanced", "quality"]
PROFILES: tuple[ProfileName, ...] = get_args(ProfileName)
KeyKind = Literal["api", "router", "admin"]
# What a model may serve besides text generation (server/base/operation.py's kinds).
ModelCapability = Literal[
    "embeddings", "rerank", "moderation", "transcription", "speech", "image_generation"
]
# A model that declares nothing serves what models served before they declared: text
# generation and, when a provider of it can, embeddings.
DEFAULT_MODEL_CAPABILITIES: tuple[ModelCapability, ...] = ("embeddings",)
# How often a key's budget starts again from zero (UTC calendar days and months).
BudgetPeriod = Literal["none", "daily", "monthly"]


class ConfigError(Exception):
    """The config file is unreadable or invalid; the message names the field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The Price fields of the units other than tokens.
PER_UNIT = ("per_second", "per_million_characters", "per_search_unit", "per_image")


class TokenRates(Strict):
    """Per-token rates, USD per million tokens, each optional: what one leaves out is
    taken from the prices it stands beside."""

    input: float | None = Field(default=None, ge=0)
    output: float | None = Field(default=None, ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    reasoning: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    cache_write_1h: float | None = Field(default=None, ge=0)


class PriceTier(TokenRates):
    """Prices for prompts longer than `above_input_tokens` (Gemini's above 200k, say);
    what it leaves out is the base price's."""

    above_input_tokens: int = Field(ge=1)


class BatchRates(TokenRates):
    """A model's batch prices (the provider's batch price list), USD per million tokens:
    what a batch line of the model pays. A rate left out is the live one at `factor`,
    and `factor` left out is `batches.price_factor`."""

    factor: float | None = Field(default=None, ge=0)


# The Price fields that are rates a batch line pays at a share of (per unit or token).
SCALED = (
    "input", "output", "cached_input", "reasoning", "cache_write", "cache_write_1h",
    "audio_input", "audio_output", "image_input", "per_second", "per_million_characters",
    "per_search_unit",
)  # fmt: skip


class Price(Strict):
    """USD per million tokens; and, for calls billed in another unit, USD per unit.

    A model priced only in another unit (a rerank model's search units, say) may leave
    `input` and `output` out: they are then 0, and that unit is what it bills."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    # Defaults to the input price when the provider gives no cache discount.
    cached_input: float | None = Field(default=None, ge=0)
    # Defaults to the output price; reasoning tokens are output tokens.
    reasoning: float | None = Field(default=None, ge=0)
    # Input tokens written to a prompt cache (Anthropic's cache_creation_input_tokens)
    # for its default 5 minutes; defaults to the input price.
    cache_write: float | None = Field(default=None, ge=0)
    # Input tokens written to a prompt cache for an hour; defaults to cache_write.
    cache_write_1h: float | None = Field(default=None, ge=0)
    # A Realtime session's audio tokens (heard and spoken), USD per million. Without
    # one, audio is unpriced (its call has no cost, never $0) unless
    # `audio_at_text_price` says to bill audio at the text prices.
    audio_input: float | None = Field(default=None, ge=0)
    audio_output: float | None = Field(default=None, ge=0)
    audio_at_text_price: bool = False
    # Audio input tokens read from a prompt cache (a relayed Realtime session's);
    # defaults to the audio input price.
    cached_audio_input: float | None = Field(default=None, ge=0)
    # Input images' tokens (an image edit's), USD per million; defaults to `input`.
    image_input: float | None = Field(default=None, ge=0)
    # Other prices for long prompts, by prompt size.
    tiers: list[PriceTier] = Field(default_factory=list)
    # Calls billed in the provider's own unit (server/base/operation.py), each price
    # taking precedence over the token prices for the calls it applies to: USD per
    # second of audio transcribed, per million input characters spoken, per search unit
    # (a rerank query over up to 100 documents), and per image by `<quality>/<size>`
    # or `<size>` (`1024x1024`, `hd/1024x1792`) with `default` for the rest.
    per_second: float | None = Field(default=None, ge=0)
    per_million_characters: float | None = Field(default=None, ge=0)
    per_search_unit: float | None = Field(default=None, ge=0)
    per_image: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    # What a batch line pays (docs/batches.md); absent: every rate at
    # `batches.price_factor`.
    batch: BatchRates | None = None

    @model_validator(mode="before")
    @classmethod
    def _tokens_free_when_priced_per_unit(cls, given: Any) -> Any:
        if isinstance(given, dict) and any(given.get(name) not in (None, {}) for name in PER_UNIT):
            return {"input": 0, "output": 0, **given}
        return given

    def for_prompt(self, prompt_tokens: int) -> Price:
        """The prices a prompt of this many tokens pays: the highest tier it passes."""
        if not self.tiers:
            return self  # the common case, on every request
        passed = [t for t in self.tiers if prompt_tokens > t.above_input_tokens]
        if not passed:
            return self
        tier = max(passed, key=lambda t: t.above_input_tokens)
        given = tier.model_dump(exclude={"above_input_tokens"}, exclude_none=True)
        return self.model_copy(update={**given, "tiers": []})

    def for_batch(self, factor: float) -> Price:
        """The prices a batch line pays: the batch rates where given, every other rate
        (long prompts' tiers too) the live one at the batch's factor (the model's own,
        else `factor`)."""
        share = self.batch.factor if self.batch and self.batch.factor is not None else factor
        scaled: dict[str, Any] = {
            name: value * share for name in SCALED if (value := getattr(self, name)) is not None
        }
        scaled["per_image"] = {size: value * share for size, value in self.per_image.items()}
        scaled["tiers"] = [
            t.model_copy(update={
                name: value * share for name in SCALED
                if (value := getattr(t, name, None)) is not None
            })
            for t in self.tiers
        ]  # fmt: skip
        if self.batch is not None:
            scaled.update(self.batch.model_dump(exclude={"factor"}, exclude_none=True))
        return self.model_copy(update={**scaled, "batch": None})


class BreakerConfig(Strict):
    """The circuit breaker of one provider."""

    # Consecutive failures that open the circuit.
    failure_threshold: int = Field(default=5, ge=1)
    # Seconds an open circuit skips the provider before letting one probe through.
    cooldown_s: float = Field(default=30, gt=0)


class ProviderConfig(Strict):
    id: str = Field(min_length=1)
    type: Literal["primary", "backup"]
    # The adapter kind (server/providers/registry.py's table checks the name).
    adapter: str = Field(min_length=1)
    enabled: bool = True
    params: dict[str, Any] = Field(default_factory=dict)
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    # What this provider can do beyond plain text (generation.Capability: tools, images,
    # structured_output, n, logprobs, sampling_controls, logit_bias ...), and
    # `<dialect>_api` for an ingress dialect it serves itself (responses_api...). Absent:
    # its adapter's default; an OpenAI-compatible server without tools lists the rest.
    capabilities: list[str] | None = None
    # The model's providers that have a weight share its traffic in proportion (each
    # request tries them in a weighted random order, ahead of the others); absent on
    # all: the primary first, then the backups in order.
    weight: float | None = Field(default=None, gt=0)

    @field_validator("capabilities")
    @classmethod
    def _known_capabilities(cls, given: list[str] | None) -> list[str] | None:
        for name in given or ():
            if name not in ALL_CAPABILITIES and served_dialect(name) is None:
                known = ", ".join(Capability)
                raise ValueError(f"{name!r} is none of {known}, nor <dialect>_api")
        return given


class PriceSource(Strict):
    """A model's entry in the prices dataset (server/base/prices.py)."""

    # The dataset's provider id: anthropic, openai, google, aws, azure, mistral ...
    provider: str = Field(min_length=1)
    # The model's name there (its matching takes the provider's own names and dated ones).
    model: str = Field(min_length=1)


class ShadowConfig(Strict):
    """A candidate model sent a share of a model's calls as well, after the caller's
    answer started; its answer is discarded, compared and recorded."""

    model: str = Field(min_length=1)
    share: float = Field(ge=0, le=1)
    # How the two answers agree: the same text, the same tool calls (names and
    # arguments), or text at least `threshold` similar (0 to 1).
    compare: Literal["exact", "tool_calls", "similarity"] = "similarity"
    threshold: float = Field(default=0.8, ge=0, le=1)
    # The account the ledger bills the candidate's calls to (never the caller's).
    account: str = Field(default="operator:shadow", min_length=1)
    # Candidate calls under way at once on one instance; beyond it a call is not
    # shadowed.
    max_in_flight: int = Field(default=64, ge=1)


class ModelConfig(Strict):
    id: str = Field(min_length=1)
    owned_by: str = Field(min_length=1)
    created: int = Field(ge=0)
    # Absent: the dataset's price when price_from names one; else costs are reported
    # absent (never $0) and a warning is logged at start-up.
    price: Price | None = None
    # Where to take the price from when `price` is absent (`gateway prices` shows it).
    price_from: PriceSource | None = None
    # The share of prompts this model answers well enough, 0 to 1: routing's quality
    # ladder. Absent: the model's place among the others by output price.
    quality: float | None = Field(default=None, ge=0, le=1)
    # The most tokens (prompt plus completion) the model takes; absent: no limit known.
    context_window: int | None = Field(default=None, ge=1)
    # Other names callers may send for this model (a client's built-in model names,
    # say); answers name the model by its id.
    aliases: list[str] = Field(default_factory=list)
    # Guardrails applied to every call of this model (ids of `guardrails`).
    guardrails: list[str] = Field(default_factory=list)
    providers: list[ProviderConfig] = Field(min_length=1)
    # Who runs the model's batches: the gateway, line by line through the live pipeline,
    # or the first provider of the model whose adapter speaks a batch API (openai,
    # anthropic), handed the whole batch (docs/batches.md).
    batch: Literal["gateway", "provider"] = "gateway"
    # What the model serves besides text generation (embeddings, rerank, moderation,
    # transcription, speech, image_generation); a call of a kind not listed is refused
    # naming `model`. Absent: embeddings only, when a provider can embed.
    capabilities: list[ModelCapability] | None = None
    # A candidate model tried on a share of this model's calls (shadow traffic).
    shadow: ShadowConfig | None = None

    @property
    def serves(self) -> tuple[ModelCapability, ...]:
        """The kinds of call besides text generation the model serves."""
        given = self.capabilities
        return DEFAULT_MODEL_CAPABILITIES if given is None else tuple(given)

    @model_validator(mode="after")
    def _one_primary_first(self) -> ModelConfig:
        kinds = [p.type for p in self.providers]
        if kinds.count("primary") != 1 or kinds[0] != "primary":
            raise ValueError("providers: exactly one primary, listed first, then backups")
        return self


class DeploymentConfig(Strict):
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    model: str
    description: str = ""


class RoutingConfig(Strict):
    # Each profile lists its models; after a failure the next is tried in this order.
    profiles: dict[ProfileName, list[str]]
    default_profile: ProfileName = "balanced"
    # `scored`: each prompt goes to the cheapest model of the profile expected to meet
    # the profile's bar (see docs/routing.md); `ordered`: the first model that answers.
    policy: Literal["scored", "ordered"] = "scored"
    # How the scored policy estimates a prompt's difficulty: `learned` (the scorer file
    # at scorer_path, or the embedded one) or `features` (no training needed).
    scorer: Literal["learned", "features"] = "learned"
    scorer_path: str | None = None
    # Per profile, the most difficulty the cheapest model may face (0 to 1); absent:
    # the scorer's calibrated threshold for that profile.
    thresholds: dict[ProfileName, float] = Field(default_factory=dict)
    # Stores the prompt of each routed request beside its ledger row, so that
    # `gateway router train --from-ledger` can learn from feedback. Off by default:
    # prompts are never stored unless the operator turns this on.
    record_prompts: bool = False
    # Refits the learned scorer on the ledger's feedback on the weakest model's answers
    # every so many seconds, once at least retrain_min_feedback new rated prompts are in
    # (needs record_prompts and storage); 0: only `gateway router train` retrains.
    retrain_every_s: float = Field(default=0, ge=0)
    retrain_min_feedback: int = Field(default=100, ge=1)
    # The share of routed calls sent to another candidate of the profile at random, so
    # that feedback rates every rung and not only the one the router picks: one share,
    # or one per profile (absent: 0). Never past the key's budget, never on deployments.
    explore_share: float | dict[ProfileName, float] = 0.0

    @model_validator(mode="after")
    def _every_profile(self) -> RoutingConfig:
        missing = set(PROFILES) - set(self.profiles)
        if missing:
            raise ValueError(f"profiles: missing {', '.join(sorted(missing))}")
        if any(not models for models in self.profiles.values()):
            raise ValueError("profiles: every profile needs at least one model")
        for name, value in self.thresholds.items():
            if not 0 <= value <= 1:
                raise ValueError(f"thresholds.{name}: must be between 0 and 1")
        shares = self.explore_share
        named = shares.items() if isinstance(shares, dict) else [("", shares)]
        for profile, value in named:
            if not 0 <= value <= 1:
                where = f"explore_share.{profile}" if profile else "explore_share"
                raise ValueError(f"{where}: must be between 0 and 1")
        return self


class KeyConfig(Strict):
    name: str = Field(min_length=1)
    kind: KeyKind
    secret: str = Field(min_length=16)
    owner: str = ""
    # Requests per minute; absent means unlimited.
    requests_per_minute: int | None = Field(default=None, ge=1)
    # Tokens (prompt + completion) per minute; absent means unlimited.
    tokens_per_minute: int | None = Field(default=None, ge=1)
    # Spend allowed per budget period, in USD; absent means no budget.
    budget_usd: float | None = Field(default=None, ge=0)
    budget_period: BudgetPeriod = "monthly"
    # Guardrails applied to this key's calls (ids of `guardrails`), besides the model's
    # and the default ones.
    guardrails: list[str] = Field(default_factory=list)
    # Whether a call of this key may ask to skip guardrails (x-gateway-guardrails: off).
    may_skip_guardrails: bool = False

    # The MCP tools the key may list and call: globs over exposed names
    # (`{server}__{tool}`, `files__*`, `*`). Absent or empty: none.
    mcp_tools: list[str] = Field(default_factory=list)

    @field_validator("mcp_tools")
    @classmethod
    def _globs(cls, globs: list[str]) -> list[str]:
        return check_tool_globs(globs)


# An MCP server's id; with `__` and the tool's name it makes the name a model sees.
MCP_SERVER_ID = re.compile(r"[a-z0-9-]{1,24}")
# A function name that OpenAI, Anthropic and Gemini all accept.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What a grant glob may hold: a tool name's characters and the glob's own.
TOOL_GLOB = re.compile(r"[A-Za-z0-9_*?\[\]!-]{1,128}")
# Characters of the secret that signs MCP handshake sessions, at least.
MIN_SESSION_SECRET = 32
# An environment variable's name.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_tool_globs(globs: list[str]) -> list[str]:
    """Grant globs as they came; ValueError naming the first one that is not a glob
    over tool names."""
    for i, glob in enumerate(globs):
        if not TOOL_GLOB.fullmatch(glob):
            raise ValueError(f"[{i}]: {glob!r} is not a glob over tool names ({TOOL_GLOB.pattern})")
    return globs


def exposed_tool_name(server: str, tool: str) -> str:
    """The name a caller sees for `tool` of `server`."""
    return f"{server}__{tool}"


def _env_names(values: dict[str, str], what: str) -> dict[str, str]:
    """Values that name environment variables, each set; ValueError otherwise."""
    for name, env in values.items():
        if not ENV_NAME.fullmatch(env):
            raise ValueError(f"{what}.{name}: {env!r} is not an environment variable's name")
        if env not in os.environ:
            raise ValueError(f"{what}.{name}: environment variable {env} is not set")
    return values


class McpToolFilter(Strict):
    """Which of a server's tools the gateway exposes: those `allow` matches (all when
    empty), less those `deny` matches; globs over the server's own tool names."""

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @field_validator("allow", "deny")
    @classmethod
    def _globs(cls, globs: list[str]) -> list[str]:
        return check_tool_globs(globs)


class McpServerConfig(Strict):
    """One upstream MCP server: over streamable HTTP (`url`) or a child process speaking
    on its stdin and stdout (`command`). Credentials never appear here: `headers` and
    `env` map a name to the environment variable that holds its value."""

    id: str
    transport: Literal["http", "stdio"]
    url: str | None = None
    # Header name -> environment variable holding its value (`Authorization: MY_TOKEN`).
    headers: dict[str, str] = Field(default_factory=dict)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    # The child's variable -> the gateway's environment variable whose value it gets.
    # The child sees only these, PATH, HOME and the locale: none of the gateway's own.
    env: dict[str, str] = Field(default_factory=dict)
    # Seconds one call may take, the upstream's part of it.
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    tools: McpToolFilter = Field(default_factory=McpToolFilter)
    # USD charged per call that reached the server (reserved against the key's budget).
    price_per_call: float = Field(default=0.0, ge=0)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not MCP_SERVER_ID.fullmatch(value):
            raise ValueError(f"{value!r} must match {MCP_SERVER_ID.pattern}")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        return _env_names(value, "headers")

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return _env_names(value, "env")

    @model_validator(mode="after")
    def _transport(self) -> McpServerConfig:
        if self.transport == "http":
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ValueError("url: an http or https URL is required for transport http")
            if self.command is not None or self.args or self.env:
                raise ValueError("command, args and env are for transport stdio")
        else:
            if not self.command:
                raise ValueError("command: required for transport stdio")
            if shutil.which(self.command) is None:
                raise ValueError(f"command: {self.command!r} is not found")
            if self.url is not None or self.headers:
                raise ValueError("url and headers are for transport http")
        for glob in self.tools.allow:
            if not any(c in glob for c in "*?[") and not TOOL_NAME.fullmatch(
                exposed_tool_name(self.id, glob)
            ):
                raise ValueError(
                    f"tools.allow: {exposed_tool_name(self.id, glob)!r} is not a valid tool "
                    f"name for every model API ({TOOL_NAME.pattern})"
                )
        _unique("tools.allow", self.tools.allow)
        return self


class McpOAuthConfig(Strict):
    """OAuth 2.1 resource-server mode: Bearer JWTs from `issuer`, checked against the
    keys at `jwks_uri`, for `audience` (the MCP URL the client was given). The token's
    `key_claim` names the gateway key, by its id (`cfg-<name>` for a key of the config
    file), whose grants, limits and budget apply: a name could be taken by a newer key."""

    issuer: str = Field(min_length=1)
    jwks_uri: str = Field(min_length=1)
    audience: str = Field(min_length=1)
    key_claim: str = "sub"
    # Scopes a token needs (each in its `scope` or `scp` claim, else 403
    # insufficient_scope), advertised in the resource metadata.
    scopes: list[str] = Field(default_factory=list)


class McpConfig(Strict):
    """The MCP gateway: `/mcp` over the configured servers."""

    servers: list[McpServerConfig] = Field(default_factory=list)
    # Bytes of one tool result the gateway relays; a larger one is refused.
    max_result_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=15 * 1024 * 1024)
    # Origins a browser page may call /mcp from; a request with another Origin is 403.
    allowed_origins: list[str] = Field(default_factory=list)
    # The environment variable holding the secret that signs handshake sessions (at
    # least MIN_SESSION_SECRET characters); every replica behind one load balancer needs
    # the same. Absent: one per gateway (its workers share it).
    session_secret_env: str | None = None
    # Seconds a handshake session stays valid after it opens.
    session_ttl_s: float = Field(default=24 * 3600, gt=0)
    oauth: McpOAuthConfig | None = None
    # Model rounds of one response whose calls of MCP tools the gateway runs; a chain
    # still calling tools after the last ends incomplete.
    max_rounds: int = Field(default=8, ge=1, le=64)
    # MCP servers outside the config a request's tool may name by URL (with its own
    # headers); any other URL a caller names is refused.
    remote_urls: list[str] = Field(default_factory=list)

    @field_validator("remote_urls")
    @classmethod
    def _remote_urls(cls, value: list[str]) -> list[str]:
        for i, url in enumerate(value):
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"[{i}] {url!r} must be an http(s) URL")
        return value

    @model_validator(mode="after")
    def _unique_ids(self) -> McpConfig:
        _unique("servers", [s.id for s in self.servers])
        if self.session_secret_env is not None:
            name = self.session_secret_env
            _env_names({"session_secret_env": name}, "mcp")
            # Workers and replicas must share it: a short or empty one is never made up.
            if len(os.environ[name]) < MIN_SESSION_SECRET:
                raise ValueError(
                    f"mcp.session_secret_env: environment variable {name} holds "
                    f"{'nothing' if not os.environ[name] else 'too short a secret'}; "
                    f"it needs at least {MIN_SESSION_SECRET} characters"
                )
        return self

    def server(self, server_id: str) -> McpServerConfig | None:
        return next((s for s in self.servers if s.id == server_id), None)


# What a guardrail does with what it finds, per phase.
GuardrailAction = Literal["redact", "block", "log", "off"]
# The built-in detectors (server/guardrails/detectors.py).
BuiltinDetector = Literal["email", "phone", "credit_card", "iban", "us_ssn", "ipv4", "ipv6",
                          "api_key", "jwt", "private_key"]  # fmt: skip
BUILTIN_DETECTORS: tuple[str, ...] = get_args(BuiltinDetector)


class CustomDetectorConfig(Strict):
    """A pattern of the operator's: compiled with RE2 (linear time) or refused."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    regex: str = Field(min_length=1)
    # The longest text a match may be: streams hold back at least this much.
    max_len: int = Field(default=64, ge=1, le=4096)

    @field_validator("regex")
    @classmethod
    def _linear(cls, regex: str) -> str:
        import re2

        try:
            re2.compile(regex)
        except re2.error as exc:
            raise ValueError(f"not a pattern RE2 can run in linear time: {exc}") from None
        return regex


class GuardrailConfig(Strict):
    """Personal data and secrets found in what models read and write: redacted,
    blocked, or logged (docs/guardrails.md)."""

    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    # `patterns`: the built-in engine; `presidio`: Microsoft Presidio's analyzer (an extra);
    # `moderation`: a moderation model of this gateway's, asked whether a text is harmful.
    kind: Literal["patterns", "presidio", "moderation"] = "patterns"
    # `kind: moderation`: the model (it must declare `moderation`), and the categories
    # that catch a text (OpenAI's names; empty: any the model flags).
    model: str | None = Field(default=None, min_length=1)
    categories: list[str] = Field(default_factory=list)
    detectors: list[BuiltinDetector] = Field(
        default_factory=lambda: cast(list[BuiltinDetector], list(BUILTIN_DETECTORS))
    )
    custom: list[CustomDetectorConfig] = Field(default_factory=list)
    # Presidio's own entities besides the detectors' kinds (`kind: presidio` only), and
    # the least confidence of a find it acts on.
    entities: list[str] = Field(default_factory=list)
    min_score: float = Field(default=0.5, ge=0, le=1)
    # Text the caller sends, the model's answer, tool-call arguments (either way), and
    # tool results given back to the model.
    on_input: GuardrailAction = "redact"
    on_output: GuardrailAction = "redact"
    on_tool_calls: GuardrailAction = "redact"
    on_tool_results: GuardrailAction = "redact"
    # `[EMAIL]`, or `[EMAIL_1]` numbered per distinct value within a request.
    placeholder: Literal["type", "numbered"] = "numbered"
    # Restores this request's own placeholders in its answer (numbered placeholders only).
    reversible: bool = False
    # How far a stream's released text stays behind its head; at least every enabled
    # detector's longest match. Absent: that longest match.
    stream_holdback_chars: int | None = Field(default=None, ge=1, le=65536)
    # An engine failure: `closed` refuses the call (503), `open` lets it pass (counted).
    fail: Literal["closed", "open"] = "closed"

    @model_validator(mode="before")
    @classmethod
    def _moderation_defaults(cls, data: Any) -> Any:
        """A moderation guardrail blocks what the caller sends unless told otherwise, and
        looks at nothing else: a classification of the whole text cannot redact."""
        if isinstance(data, dict) and data.get("kind") == "moderation":
            defaults = {"on_input": "block", "on_output": "off", "on_tool_calls": "off",
                        "on_tool_results": "off", "detectors": []}  # fmt: skip
            data = {**defaults, **data}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> GuardrailConfig:
        if self.kind == "moderation":
            self._moderation_consistent()
        elif self.model is not None or self.categories:
            raise ValueError("model, categories: only a `moderation` guardrail has them")
        if self.reversible and self.placeholder != "numbered":
            raise ValueError("reversible: needs placeholder `numbered`")
        if self.entities and self.kind != "presidio":
            raise ValueError("entities: only a `presidio` guardrail has them")
        if self.custom and self.kind != "patterns":
            raise ValueError("custom: only a `patterns` guardrail has them")
        for i, entity in enumerate(self.entities):
            if not re.fullmatch(r"[A-Z][A-Z0-9_]{0,39}", entity):
                raise ValueError(f"entities[{i}]: must be an upper-case entity name")
        _unique("custom", [c.name for c in self.custom])
        return self

    def _moderation_consistent(self) -> None:
        if self.model is None:
            raise ValueError("model: a `moderation` guardrail names its moderation model")
        if self.detectors or self.custom:
            raise ValueError("detectors, custom: a `moderation` guardrail has none")
        for phase in ("input", "output", "tool_calls", "tool_results"):
            if getattr(self, f"on_{phase}") == "redact":
                raise ValueError(
                    f"on_{phase}: a `moderation` guardrail blocks or logs, never redacts"
                )
        if self.on_output != "off" or self.on_tool_calls != "off" or self.on_tool_results != "off":
            raise ValueError("on_output, on_tool_calls, on_tool_results: a `moderation` "
                             "guardrail reads what the caller sends (on_input) only")  # fmt: skip
        for i, category in enumerate(self.categories):
            if category not in MODERATION_CATEGORIES:
                raise ValueError(f"categories[{i}]: {category!r} is not one of OpenAI's categories")


# Response headers a browser page may read: the request id, whether and when to retry,
# the rate-limit headers, and what guardrails did.
EXPOSED_HEADERS = [
    "x-request-id", "x-should-retry", "retry-after", "retry-after-ms", "x-gateway-guardrails",
    "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
]  # fmt: skip


class CorsConfig(Strict):
    """Cross-origin access for browser pages (CORS) to the REST API; off while
    `allow_origins` is empty. Keys travel in headers, never cookies, so credentials are
    not allowed."""

    # Origins a page may call from (`https://app.example.com`), or `*` for any.
    allow_origins: list[str] = Field(default_factory=list)
    allow_methods: list[str] = Field(default_factory=lambda: ["GET", "POST", "DELETE"])
    # Request headers a page may send; `*` allows any (the SDKs send their own).
    allow_headers: list[str] = Field(default_factory=lambda: ["*"])
    expose_headers: list[str] = Field(default_factory=lambda: list(EXPOSED_HEADERS))
    # Seconds a browser may keep a preflight's answer.
    max_age_s: int = Field(default=600, ge=0)

    @field_validator("allow_origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if origin != "*" and (
                "://" not in origin or origin.endswith("/") or origin.count("/") > 2
            ):
                raise ValueError(
                    f"{origin!r} is not an origin (scheme://host[:port], no path) or *"
                )
        return origins


class WebSocketsConfig(Strict):
    """Sessions held open over WebSocket: the Responses API's WebSocket mode (`GET
    /v1/responses`) and OpenAI's Realtime API (`GET /v1/realtime`). An upgrade to a
    mode turned off is refused with 426, so a client falls back to HTTP at once."""

    responses: bool = True
    realtime: bool = True
    # The largest frame a client may send; a larger one closes the session (1009).
    max_frame_bytes: int = Field(default=1 << 20, ge=1024)
    # Frames a session may send per second (averaged over a second); past it the
    # session gets an error event and the frame is dropped.
    frames_per_s: float = Field(default=50, gt=0)
    # Frames all of a key's sessions on this instance may send per second together
    # (absent: each session has only its own bound); past it, as past frames_per_s.
    frames_per_s_per_key: float | None = Field(default=None, gt=0)
    # Sessions open at once, per key and on this instance; past either the upgrade
    # is refused with 429.
    sessions_per_key: int = Field(default=100, ge=1)
    sessions_per_instance: int = Field(default=10000, ge=1)
    # Seconds a session may last, and may go without a frame from its client.
    max_session_s: float = Field(default=3600, gt=0)
    idle_timeout_s: float = Field(default=600, gt=0)


class ServerConfig(Strict):
    host: str = "127.0.0.1"
    grpc_port: int = Field(default=50051, ge=0, le=65535)
    http_port: int = Field(default=8080, ge=0, le=65535)
    # Bounds all attempts of one request together, in seconds.
    request_timeout_s: float = Field(default=120, gt=0)
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    # Seconds between SSE keep-alive comments while a stream waits on its upstream.
    keepalive_s: float = Field(default=15, gt=0)
    # HTTP: seconds a connection has to send a whole request head (after opening, or
    # after its previous response); slower ones get 408 and are closed.
    header_timeout_s: float = Field(default=10, gt=0)
    # HTTP: seconds a kept-alive connection may wait for its next request; longer than
    # clients keep idle connections (5 s for httpx and Node) and than a load balancer's
    # idle bound (60 s for most), so neither sends on a connection being closed.
    idle_timeout_s: float = Field(default=75, gt=0)
    # HTTP: seconds to receive a whole request body once its head is in (408 after).
    body_timeout_s: float = Field(default=30, gt=0)
    # HTTP: seconds a client may leave sent data unread before its connection is closed
    # (a stream nobody reads ends, and its upstream is released).
    send_timeout_s: float = Field(default=30, gt=0)
    # gRPC: seconds a client connection lives before the server asks the client to
    # reconnect (GOAWAY, ±10%), so long-lived channels spread over replicas added
    # since; 0 keeps connections for ever.
    grpc_max_connection_age_s: float = Field(default=300, ge=0)
    # gRPC: seconds the calls still running on such a connection get to finish before
    # it closes; absent: request_timeout_s, so no call in time is cut.
    grpc_max_connection_age_grace_s: float | None = Field(default=None, gt=0)
    # Browser access from other origins; off by default.
    cors: CorsConfig = Field(default_factory=CorsConfig)
    websockets: WebSocketsConfig = Field(default_factory=WebSocketsConfig)


class StorageConfig(Strict):
    """Where keys, the usage ledger and shared counters live.

    Neither URL set: the embedded single-node default, an SQLite file and in-memory
    counters. Several instances share state through PostgreSQL and Redis."""

    # PostgreSQL URL (postgresql://user:password@host:5432/db); absent: SQLite.
    database_url: str | None = None
    # PostgreSQL is reached through pgbouncer in transaction (or statement) mode: no
    # prepared statements are kept on a connection, since the next transaction may
    # run on another server connection. Session mode needs nothing.
    pgbouncer: bool = False
    # The SQLite file, created on first start; `:memory:` keeps nothing. A relative
    # path is under `state_dir` when that is set.
    sqlite_path: str = "gateway.db"
    # The folder of what the gateway keeps on disk (the SQLite file, the ledger's
    # default spool), created when missing; GATEWAY_STATE_DIR sets it too (an image
    # points it at its writable volume). Absent: the working directory for the
    # database, $XDG_STATE_HOME (~/.local/state)/model-gateway for the spool.
    state_dir: str | None = None
    # Redis URL (redis://host:6379/0); absent: rate limits and budgets held in memory.
    redis_url: str | None = None
    # Prefixes every Redis key, so several gateways (or test runs) can share one Redis.
    redis_prefix: str = "gateway:"
    # Connections to Redis each process keeps at most; a request finding them all busy
    # waits for one (within timeout_s), so a burst is back-pressure, never a 503.
    redis_max_connections: int = Field(default=64, ge=1)
    # Seconds a key lookup is cached; a revoked key stops working within this time.
    key_cache_ttl_s: float = Field(default=1.0, ge=0)
    # Seconds one storage call on the request path (key lookup, spend lookup, Redis
    # counters) may take before the request fails with STORAGE_UNAVAILABLE (503). Held
    # to at most half of server.request_timeout_s.
    timeout_s: float = Field(default=2.0, gt=0)

    @property
    def sqlite_file(self) -> str:
        """The SQLite file to open: `sqlite_path`, under `state_dir` when relative."""
        if not self.state_dir or self.sqlite_path == ":memory:":
            return self.sqlite_path
        return str(Path(self.state_dir).expanduser() / Path(self.sqlite_path).expanduser())


class LimitsConfig(Strict):
    # The rate-limit window in seconds: requests_per_minute and tokens_per_minute are
    # counted over it. 60 in production; tests shorten it.
    window_s: float = Field(default=60, gt=0)
    # Completion tokens assumed for a request without max_tokens, when reserving its
    # tokens (tokens_per_minute) and its maximum cost (budgets).
    default_max_tokens: int = Field(default=1024, ge=1)
    # The most prompt tokens (estimated) one request may hold on a model without a
    # `context_window`, as expanded (a Responses continuation's stored conversation and
    # references included): beyond it, or beyond the model's window, the request is a
    # 400 before any upstream is asked, anything is billed or stored.
    max_prompt_tokens: int = Field(default=262_144, ge=1)
    # When Redis (shared rate limits) is unavailable: false refuses requests with
    # STORAGE_UNAVAILABLE, true lets them through unlimited (and logs it).
    fail_open: bool = False
    # Whether listing models and providers (GET /v1/models, /v1/providers) takes a
    # request from the key's requests_per_minute; by default only what generates does.
    count_listings: bool = False


class TrafficRule(Strict):
    """What one key, team or model may hold at once and how long its calls may wait."""

    # Calls (and open streams) at once, across every worker and instance; beyond it a
    # call is refused (429, CONCURRENCY_LIMITED) naming the level. Absent: no cap.
    max_in_flight: int | None = Field(default=None, ge=1)
    # Seconds a call a rate limit would refuse waits for room instead, in order;
    # absent or 0: refused at once.
    max_wait_s: float | None = Field(default=None, ge=0, le=600)
    # Calls of this key, team or model waiting at once on one instance; beyond it a
    # call is refused at once.
    max_waiting: int = Field(default=100, ge=1)
    # For a key or team: the class its calls wait in when a capped level is full
    # (`interactive` first, `batch` last; absent: the team's, else `default`), and its
    # weight within the class (a key of weight 2 gets twice the slots of one of 1).
    priority: Literal["interactive", "default", "batch"] | None = None
    weight: float = Field(default=1.0, gt=0, le=1000)


class TrafficConfig(Strict):
    """Concurrency caps and waiting instead of refusing, per key, team and model."""

    # By key (its id, or its name), by team (id or name), by model (id).
    keys: dict[str, TrafficRule] = Field(default_factory=dict)
    teams: dict[str, TrafficRule] = Field(default_factory=dict)
    models: dict[str, TrafficRule] = Field(default_factory=dict)
    # Calls waiting at once on one instance, whoever they are; beyond it a call that
    # would wait is refused at once.
    max_waiting: int = Field(default=1000, ge=1)
    # An in-flight entry a dead instance never removed lapses after this long.
    lease_s: float = Field(default=900, gt=0)


class BudgetAlertsConfig(Strict):
    """Alerts as a level's spend crosses shares of its period's budget."""

    # Shares of the budget that raise an alert, each once per period (1.0: spent).
    thresholds: list[float] = Field(default_factory=lambda: [0.5, 0.8, 1.0])
    # Per level (`key`, `member`, `team`, `org`): its own thresholds instead.
    by_level: dict[Literal["key", "member", "team", "org"], list[float]] = Field(
        default_factory=dict
    )
    # Where each alert is POSTed as JSON, signed with `secret` (HMAC-SHA256 of the
    # body, hex, in `x-gateway-signature: sha256=...`). Absent: the audit log only.
    webhook_url: str | None = None
    secret: str | None = Field(default=None, min_length=16)
    # One delivery attempt's time limit, attempts in all, and the first retry's delay
    # (doubled after each failure).
    timeout_s: float = Field(default=5, gt=0)
    max_attempts: int = Field(default=5, ge=1)
    backoff_s: float = Field(default=1, gt=0)
    # Alerts waiting for delivery; beyond it the newest are dropped (and logged).
    max_queued: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _valid(self) -> BudgetAlertsConfig:
        for where, shares in [("thresholds", self.thresholds)] + [
            (f"by_level.{level}", shares) for level, shares in self.by_level.items()
        ]:
            for i, share in enumerate(shares):
                if not 0 < share <= 10:
                    raise ValueError(f"{where}[{i}]: a share of the budget, above 0")
        if self.webhook_url and not self.secret:
            raise ValueError("secret: needed to sign what webhook_url receives")
        return self


class LedgerConfig(Strict):
    # Rows written per database round trip.
    batch_size: int = Field(default=500, ge=1)
    # Seconds between flushes of the buffer.
    flush_interval_s: float = Field(default=0.5, gt=0)
    # Rows held while the database is slow or away; beyond this the oldest are dropped
    # (and counted in the log) rather than slowing requests.
    max_buffered: int = Field(default=100_000, ge=1)
    # Seconds a graceful shutdown waits for the buffer to reach the database.
    drain_timeout_s: float = Field(default=15, gt=0)
    # A folder where each row waits on disk until it is in the database, so a process
    # that dies loses none (the next start writes them). `--workers N` always spools,
    # here or in a folder of its own.
    spool_dir: str | None = None


class BatchesConfig(Strict):
    """Batch jobs and the files they read (docs/batches.md)."""

    # The folder uploaded files and batch results are kept in; relative: under
    # `storage.state_dir` (absent: the working directory). Instances sharing one
    # database must share this folder too (a network volume).
    files_dir: str = "files"
    # The largest file one upload may hold (413 past it), and the most lines and the
    # largest line a batch's input may have (400 naming the line past them).
    max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1)
    max_lines: int = Field(default=50_000, ge=1)
    max_line_bytes: int = Field(default=1024 * 1024, ge=1)
    # Tokens (lines' prompts and max_tokens) the running batches of one key may hold in
    # the queue; a batch past it is refused with 429 (absent: no limit). The per-minute
    # rate limits are not charged for the queue, only for the lines as they run.
    max_enqueued_tokens_per_key: int | None = Field(default=None, ge=1)
    # Days an uploaded file of purpose `batch` (and a batch's results) is kept.
    file_expiry_days: float = Field(default=30, gt=0)
    # Lines of one batch, and of all the batches of one key, run at once by one
    # instance; and lines every batch of an instance runs at once.
    concurrency_per_batch: int = Field(default=4, ge=1)
    concurrency_per_key: int = Field(default=8, ge=1)
    concurrency: int = Field(default=16, ge=1)
    # A batch line yields to live calls: it starts only while fewer than this many
    # live calls are in flight on the instance.
    yield_above_in_flight: int = Field(default=64, ge=1)
    # Seconds an instance holds a batch it runs without renewing its lease; another
    # instance takes the batch over once the lease has run out (after a crash).
    lease_s: float = Field(default=30, gt=0)
    # Seconds between two looks for batches to run.
    poll_s: float = Field(default=1.0, gt=0)
    # What a batch line pays, as a share of the live price (the providers' batch
    # discount is half).
    price_factor: float = Field(default=0.5, ge=0)
    # Seconds between two looks at a batch handed to a provider's own batch API.
    provider_poll_s: float = Field(default=30, gt=0)
    # Seconds a batch's `24h` completion window lasts (shorter for tests and drills);
    # past it the batch ends `expired`, its lines not run yet never run.
    completion_window_s: float = Field(default=86_400, gt=0)
    # Attempts of one line whose failure is passing (a rate limit, an upstream away)
    # before it is written to the error file.
    line_attempts: int = Field(default=5, ge=1)
    # Whether this instance runs batch lines at all (every instance still accepts them).
    run: bool = True


class ResponsesConfig(Strict):
    """Stored responses of the Responses API (`store: true`, the API's default)."""

    # Days a stored response is kept; after that it is gone (404) and the cleanup
    # deletes it.
    retention_days: float = Field(default=30, gt=0)
    # Seconds between two cleanups of expired responses.
    cleanup_interval_s: float = Field(default=3600, gt=0)


# Headers that name a session: a generic one, Claude Code's and Codex's.
SESSION_HEADERS = ("x-session-id", "x-claude-code-session-id", "session_id")


class AffinityConfig(Strict):
    """Cache affinity (server/application/pipeline/affinity.py): requests sharing a
    prompt prefix go back to the provider that served it while its prompt cache lives."""

    enabled: bool = False
    # Seconds a provider stays remembered after the prefix's last use: about as long as
    # the providers' prompt caches live (Anthropic's 5 minutes, OpenAI's 5 to 10).
    ttl_s: float = Field(default=300, gt=0)
    # Request headers naming a session, tried in order when the request has no
    # prompt_cache_key (Claude Code's and Codex's, and a generic one).
    # Over REST only these defaults cross the façade; gRPC callers may send any.
    session_headers: list[str] = Field(default_factory=lambda: list(SESSION_HEADERS))
    # Prefixes remembered per process without Redis; the least recently used go first.
    max_entries: int = Field(default=100_000, ge=1)

    @field_validator("session_headers")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [h.lower() for h in value]


class ResponseCacheConfig(Strict):
    """The gateway's response cache (server/application/pipeline/response_cache.py): a
    repeated request answered from a stored answer instead of an upstream. Off while
    neither `keys` nor `models` names anything."""

    # Key names whose requests may be cached, or ["*"] for every key.
    keys: list[str] = Field(default_factory=list)
    # Model ids (a request's first model) whose requests may be cached, or ["*"].
    models: list[str] = Field(default_factory=list)
    # Seconds an answer is kept; a request's `Cache-Control: max-age` may ask for less.
    ttl_s: float = Field(default=3600, gt=0)
    # Answers kept per process without Redis, and the bytes they may hold together;
    # the least recently used go first.
    max_entries: int = Field(default=10_000, ge=1)
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    # An answer larger than this (encoded) is not kept.
    max_entry_bytes: int = Field(default=256 * 1024, ge=1024)
    # Whether one key's stored answers may serve another key's requests.
    shared_across_keys: bool = False
    # What a cached answer costs its caller: `free` (nothing was asked upstream) or
    # `full` (its tokens at the model's prices, without prompt-cache discounts).
    billing: Literal["free", "full"] = "free"

    def applies(self, key_name: str, model: str) -> bool:
        return bool({"*", key_name} & set(self.keys) or {"*", model} & set(self.models))


class OperationsConfig(Strict):
    """Request logs, metrics and shutdown: how operators watch and stop the gateway."""

    # One JSON line per request on the `gateway.requests` logger.
    request_log: bool = True
    # Per-request metrics (requests, errors, tokens, cost, durations by model and key)
    # on /metrics. Off: /metrics keeps the sampled state (in flight, ledger, MCP
    # servers) only; each request then costs about 6% fewer instructions (docs/operations.md).
    request_metrics: bool = True
    # Adds prompt and completion text to the request log line. Off by default: request
    # text is the callers' data and stays out of logs unless the operator asks.
    log_text: bool = False
    # Serves /metrics, /healthz and /readyz on this port of server.host besides the REST
    # port (for a gRPC-only gateway, `--no-http`); 0 picks a free port; absent: none.
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    # Seconds between readiness turning NOT_SERVING on SIGTERM and the listeners
    # closing, so load balancers stop sending new calls first.
    readiness_delay_s: float = Field(default=0, ge=0)
    # Seconds calls and streams in flight get to finish on SIGTERM before they are cut.
    drain_s: float = Field(default=30, gt=0)


# Roles a group may give: across the whole gateway (no team, no org), in an
# organisation, in a team.
GATEWAY_ROLES = ("admin", "viewer")
ORG_ROLES = ("org_admin", "viewer")
TEAM_ROLES = ("team_admin", "member", "viewer")


class RoleGrant(Strict):
    """What one identity-provider group gives: a role in a team (`team`: its id), in an
    organisation (`org`: its id or name), or, with neither, across the whole gateway
    (`admin` or `viewer`)."""

    role: str
    team: str | None = None
    org: str | None = None

    @model_validator(mode="after")
    def _role_fits(self) -> RoleGrant:
        if self.team and self.org:
            raise ValueError("a grant names a team or an org, not both")
        roles = TEAM_ROLES if self.team else ORG_ROLES if self.org else GATEWAY_ROLES
        if self.role not in roles:
            raise ValueError(f"role {self.role!r}: must be one of {', '.join(roles)} here")
        return self


class OidcConfig(Strict):
    """Sign-in to the admin page with the company's OpenID provider (authorization code
    with PKCE), and its JWT access tokens as Bearer on the admin API."""

    issuer: str = Field(min_length=1)
    client_id: str = Field(min_length=1)
    # The environment variable holding the client secret (none: a public client, PKCE).
    client_secret_env: str | None = None
    scopes: list[str] = Field(default_factory=lambda: ["openid", "email", "profile"])
    # The claim (of the ID token, else of userinfo) listing the user's groups.
    groups_claim: str = "groups"
    # Group -> the roles it gives; synchronised at every sign-in, removals too.
    role_map: dict[str, list[RoleGrant]] = Field(default_factory=dict)
    # A gateway-wide role for every signed-in user: none (the default) or `viewer`.
    default_role: str = ""
    # The callback URL the provider redirects to; absent: this gateway's own
    # `/admin/signin/callback` as the browser reached it, on a loopback address only
    # (elsewhere sign-in asks for it: the Host header never chooses the callback).
    redirect_url: str | None = None
    # The audience a Bearer access token must name; absent: `client_id`.
    audience: str | None = None
    # Seconds a sign-in session lasts.
    session_ttl_s: float = Field(default=8 * 3600, gt=0)

    @model_validator(mode="after")
    def _default_role(self) -> OidcConfig:
        if self.default_role not in ("", "viewer"):
            raise ValueError("default_role: must be empty (no role) or viewer")
        if "openid" not in self.scopes:
            raise ValueError("scopes: must include openid")
        return self


class AuthConfig(Strict):
    oidc: OidcConfig | None = None


class Config(Strict):
    server: ServerConfig = Field(default_factory=ServerConfig)
    operations: OperationsConfig = Field(default_factory=OperationsConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    traffic: TrafficConfig = Field(default_factory=TrafficConfig)
    budget_alerts: BudgetAlertsConfig = Field(default_factory=BudgetAlertsConfig)
    ledger: LedgerConfig = Field(default_factory=LedgerConfig)
    responses: ResponsesConfig = Field(default_factory=ResponsesConfig)
    batches: BatchesConfig = Field(default_factory=BatchesConfig)
    affinity: AffinityConfig = Field(default_factory=AffinityConfig)
    response_cache: ResponseCacheConfig = Field(default_factory=ResponseCacheConfig)
    models: list[ModelConfig] = Field(min_length=1)
    deployments: list[DeploymentConfig] = Field(default_factory=list)
    routing: RoutingConfig
    keys: list[KeyConfig] = Field(default_factory=list)
    guardrails: list[GuardrailConfig] = Field(default_factory=list)
    # Guardrails applied to every call (ids of `guardrails`).
    default_guardrails: list[str] = Field(default_factory=list)
    mcp: McpConfig = Field(default_factory=McpConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    # The model that answers a request naming the placeholders of clients that talk to
    # one endpoint (Hugging Face's InferenceClient sends `dummy` to a URL it is given).
    default_model: str | None = None

    @model_validator(mode="after")
    def _references(self) -> Config:
        _unique("models", [m.id for m in self.models])
        _unique("models and aliases", [n for m in self.models for n in (m.id, *m.aliases)])
        for m in self.models:
            for name in (m.id, *m.aliases):
                if name in PROFILES:
                    raise ValueError(f"models: {name!r} is a routing profile's name")
        _unique("providers", [p.id for m in self.models for p in m.providers])
        _unique("deployments", [d.id for d in self.deployments])
        _unique("keys", [k.name for k in self.keys])
        _unique("keys (secret)", [k.secret for k in self.keys])
        known = {m.id for m in self.models}
        if self.default_model is not None and self.default_model not in known:
            raise ValueError(f"default_model: unknown model {self.default_model!r}")
        for i, d in enumerate(self.deployments):
            if d.model not in known:
                raise ValueError(f"deployments[{i}].model: unknown model {d.model!r}")
        for name, models in self.routing.profiles.items():
            for i, model in enumerate(models):
                if model not in known:
                    raise ValueError(f"routing.profiles.{name}[{i}]: unknown model {model!r}")
        for i, m in enumerate(self.models):
            if m.shadow is not None and (m.shadow.model not in known or m.shadow.model == m.id):
                raise ValueError(
                    f"models[{i}].shadow.model: {m.shadow.model!r} is not another known model"
                )
        for model in self.traffic.models:
            if model not in known:
                raise ValueError(f"traffic.models.{model}: unknown model {model!r}")
        _unique("guardrails", [g.id for g in self.guardrails])
        guards = {g.id for g in self.guardrails}
        attached = [("default_guardrails", self.default_guardrails)]
        attached += [(f"keys[{i}].guardrails", k.guardrails) for i, k in enumerate(self.keys)]
        attached += [(f"models[{i}].guardrails", m.guardrails) for i, m in enumerate(self.models)]
        for where, ids in attached:
            for j, guard in enumerate(ids):
                if guard not in guards:
                    raise ValueError(f"{where}[{j}]: unknown guardrail {guard!r}")
        by_id = {m.id: m for m in self.models}
        for i, g in enumerate(self.guardrails):
            if g.kind == "moderation":
                judge = by_id.get(g.model or "")
                if judge is None:
                    raise ValueError(f"guardrails[{i}].model: unknown model {g.model!r}")
                if "moderation" not in judge.serves:
                    raise ValueError(
                        f"guardrails[{i}].model: {g.model!r} does not declare `moderation`"
                    )
        return self

    @property
    def files_folder(self) -> Path:
        """The folder of uploaded files: `batches.files_dir`, under `storage.state_dir`
        when relative."""
        folder = Path(self.batches.files_dir).expanduser()
        if folder.is_absolute() or not self.storage.state_dir:
            return folder
        return Path(self.storage.state_dir).expanduser() / folder

    @property
    def storage_timeout_s(self) -> float:
        """The bound on one storage call on the request path, inside its deadline."""
        return min(self.storage.timeout_s, self.server.request_timeout_s / 2)

    def model(self, name: str) -> ModelConfig | None:
        """The model of an id or alias."""
        return next((m for m in self.models if name == m.id or name in m.aliases), None)


def _unique(what: str, ids: list[str]) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise ValueError(f"{what}: duplicate {i!r}")
        seen.add(i)


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def parse(data: Any, source: str, dataset: bool = True) -> Config:
    """Validates parsed YAML; raises ConfigError naming the source and the field. With
    `dataset`, models without a price of their own take the dataset's (`price_from`)."""
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            path = _field_path(tuple(p for p in err["loc"] if not str(p).startswith("function-")))
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{path}: {message}" if path else message)
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None
    return with_dataset_prices(config) if dataset else config


def with_dataset_prices(config: Config) -> Config:
    """The config with each model that names a dataset entry and has no price of its own
    priced from the dataset (a model the dataset cannot price stays unpriced)."""
    if not any(m.price is None and m.price_from for m in config.models):
        return config
    models = []
    for m in config.models:
        found = prices.lookup(m.price_from.provider, m.price_from.model) if m.price_from else None
        priced = m.price is None and found is not None
        models.append(m.model_copy(update={"price": Price.model_validate(found)}) if priced else m)
    return config.model_copy(update={"models": models})


def load(path: str | Path | None = None, dataset: bool = True) -> tuple[Config, str]:
    """Loads the config at `path`, or the embedded default; returns it and its source."""
    if path is None:
        source = "embedded default config"
        text = resources.files("server.base").joinpath("default_config.yaml").read_text()
    else:
        source = str(path)
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    return parse(data, source, dataset), source
