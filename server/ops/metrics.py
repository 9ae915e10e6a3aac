"""Prometheus metrics, named after the OpenTelemetry GenAI semantic conventions where one
exists (`gen_ai.client.token.usage` -> `gen_ai_client_token_usage`, durations in
seconds with the `_seconds` unit suffix), plus the gateway's own (`gateway_*`).

Several worker processes: when PROMETHEUS_MULTIPROC_DIR names an (empty, writable)
directory before the process starts, prometheus-client keeps every value in files there
and `render()` merges all workers' files, so any worker's /metrics answers for all of
them. Gauges declare how workers combine (the sum of ledger buffers, the worst breaker
state). Without it, each gateway counts in its own registry.

A call's own counts are tallied in plain dicts and moved into the metrics by `sample()`,
before every scrape and once a second: a worker's /metrics is exact for its own calls,
and another worker's are at most a second old.

Labels carry key ids, never secrets.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from server.base.record import GuardrailReport, UsageRecord
from server.ops.observe import Outcome

if TYPE_CHECKING:
    from server.accounting.ledger import Ledger
    from server.application.pipeline.catalog import Catalog

CONTENT_TYPE = CONTENT_TYPE_LATEST
# The buckets the GenAI conventions advise.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip
PER_TOKEN_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
# The gateway's own time per call: sub-millisecond when all is well.
# A guardrail's scan of one call's text: tens of microseconds to milliseconds.
GUARDRAIL_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1)
OVERHEAD_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
# MCP tool calls: from a local tool's milliseconds to a slow one's minute.
TOOL_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
BREAKER_STATE = {"healthy": 0, "half_open": 1, "open": 2}
GENAI = ("gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_response_model")


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR")


def prepare_multiprocess_dir() -> None:
    """Creates PROMETHEUS_MULTIPROC_DIR when it names a folder not there yet (an image
    sets the variable; the folder is often an empty volume's subfolder). OSError when
    it cannot be."""
    folder = multiprocess_dir()
    if folder:
        os.makedirs(folder, exist_ok=True)


def operation_of(rpc: str) -> str:
    """The GenAI operation name of an RPC."""
    if "Chat" in rpc:
        name = "chat"
    elif "Embedding" in rpc:
        name = "embeddings"
    elif other := next((o for word, o in OPERATIONS if word in rpc), None):
        name = other
    else:
        name = "text_completion"
    OPERATION[rpc] = name
    return name


OPERATION: dict[str, str] = {}
# The operations that are not generations, by a word of their RPCs' names.
OPERATIONS = (
    ("Rerank", "rerank"),
    ("Moderation", "moderation"),
    ("Transcription", "transcription"),
    ("Translation", "translation"),
    ("Speech", "speech"),
    ("Image", "image_generation"),
)


class Metrics:
    """The gateway's metrics, in their own registry (one per gateway in one process)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.tokens = Histogram(
            "gen_ai_client_token_usage",
            "Tokens used per call, by type (input, output).",
            [*GENAI, "gen_ai_token_type"], buckets=TOKEN_BUCKETS, registry=registry,
        )  # fmt: skip
        self.duration = Histogram(
            "gen_ai_client_operation_duration_seconds",
            "Duration of a generation call, first byte in to last byte out.",
            [*GENAI, "error_type"], buckets=DURATION_BUCKETS, registry=registry,
        )  # fmt: skip
        self.ttft = Histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "Time from the request to the first token from the upstream.",
            GENAI, buckets=TTFT_BUCKETS, registry=registry,
        )  # fmt: skip
        self.per_token = Histogram(
            "gen_ai_server_time_per_output_token_seconds",
            "Time per output token after the first.",
            GENAI, buckets=PER_TOKEN_BUCKETS, registry=registry,
        )  # fmt: skip
        self.requests = Counter(
            "gateway_requests", "Calls served, by RPC, model, provider, status and key id.",
            ["rpc", "model", "provider", "status", "key_id"], registry=registry,
        )  # fmt: skip
        self.errors = Counter(
            "gateway_request_errors", "Calls that failed, with the error reason.",
            ["rpc", "model", "provider", "status", "reason", "key_id"], registry=registry,
        )  # fmt: skip
        self.cost = Counter(
            "gateway_cost_usd", "Cost of the calls in USD (as the usage ledger records it).",
            ["model", "provider", "key_id"], registry=registry,
        )  # fmt: skip
        self.units = Counter(
            "gateway_billed_units",
            "What calls billed outside tokens used, by unit (seconds, characters, images, "
            "search_units).",
            ["gen_ai_operation_name", "model", "unit"], registry=registry,
        )  # fmt: skip
        self.failovers = Counter(
            "gateway_failovers", "Upstreams given up on before another answered, by cause.",
            ["provider", "cause"], registry=registry,
        )  # fmt: skip
        self.rate_limited = Counter(
            "gateway_rate_limit_rejections", "Calls refused by a key's rate limit.",
            ["key_id"], registry=registry,
        )  # fmt: skip
        self.budget_refused = Counter(
            "gateway_budget_rejections",
            "Calls refused by a key's budget.",
            ["key_id"],
            registry=registry,
        )
        self.unknown_routes = Counter(
            "gateway_unknown_routes",
            "Requests for a path (or method) the gateway does not serve, by method.",
            ["method"], registry=registry,
        )  # fmt: skip
        self.prompt_cache = Counter(
            "gateway_prompt_cache_tokens",
            "Prompt tokens by how the upstream's prompt cache served them (read, write, "
            "uncached): read / all is the cache hit rate, per model and provider.",
            ["model", "provider", "kind"], registry=registry,
        )  # fmt: skip
        self.affinity = Counter(
            "gateway_cache_affinity",
            "Cache affinity per call: hit (the remembered provider answered), moved "
            "(another did), miss (no provider remembered for the prefix).",
            ["model", "result"], registry=registry,
        )  # fmt: skip
        self.response_cache = Counter(
            "gateway_response_cache",
            "Requests the response cache took part in: hit (answered from it) or miss "
            "(answered upstream, then kept).",
            ["model", "result"], registry=registry,
        )  # fmt: skip
        self.routes = Counter(
            "gateway_routing_decisions", "Models chosen by the router, by profile.",
            ["profile", "model"], registry=registry,
        )  # fmt: skip
        self.guardrail_detections = Counter(
            "gateway_guardrail_detections",
            "What guardrails found, by guardrail, kind, phase and the action taken.",
            ["guardrail", "entity", "phase", "action"], registry=registry,
        )  # fmt: skip
        self.guardrail_seconds = Histogram(
            "gateway_guardrail_duration_seconds",
            "Time spent scanning one call's text, per phase.",
            ["phase"], buckets=GUARDRAIL_BUCKETS, registry=registry,
        )  # fmt: skip
        self.guardrail_failures = Counter(
            "gateway_guardrail_failures",
            "Guardrail engine failures let through (fail: open).",
            ["guardrail"], registry=registry,
        )  # fmt: skip
        self.overhead = Histogram(
            "gateway_overhead_seconds",
            "The gateway's own time per call: total minus time waiting on upstreams.",
            ["rpc"], buckets=OVERHEAD_BUCKETS, registry=registry,
        )  # fmt: skip
        self.in_flight = Gauge(
            "gateway_requests_in_flight", "Calls being served now.",
            multiprocess_mode="livesum", registry=registry,
        )  # fmt: skip
        self.in_flight_by_level = Gauge(
            "gateway_in_flight_by_level",
            "Calls in flight of a key, team or model with a max_in_flight, across every "
            "worker and instance (as last counted by a worker).",
            ["level", "name"], multiprocess_mode="mostrecent", registry=registry,
        )  # fmt: skip
        self.waiting = Gauge(
            "gateway_calls_waiting",
            "Calls waiting for a rate limit's room (max_wait_s) on this instance.",
            multiprocess_mode="livesum", registry=registry,
        )  # fmt: skip
        self.breaker = Gauge(
            "gateway_circuit_breaker_state",
            "Circuit breaker per provider: 0 closed, 1 half-open, 2 open (worst worker).",
            ["provider", "model"], multiprocess_mode="livemax", registry=registry,
        )  # fmt: skip
        self.enabled = Gauge(
            "gateway_provider_enabled", "1 when the provider is enabled, 0 when disabled.",
            ["provider", "model"], multiprocess_mode="livemin", registry=registry,
        )  # fmt: skip
        self.loop_lag = Gauge(
            "gateway_event_loop_lag_seconds",
            "How late the worker's event loop ran a timer, the worst of the last second "
            "(worst worker): above a few tens of milliseconds the worker is saturated.",
            multiprocess_mode="livemax", registry=registry,
        )  # fmt: skip
        self.ledger_buffered = Gauge(
            "gateway_ledger_buffered_rows", "Usage rows waiting to be written.",
            multiprocess_mode="livesum", registry=registry,
        )  # fmt: skip
        self.router_share = Gauge(
            "gateway_router_share",
            "Per routing profile, the share of calls sent past the cheapest model: the "
            "target (kind=target) and the recent decisions' (kind=recent).",
            ["profile", "kind"], multiprocess_mode="liveall", registry=registry,
        )  # fmt: skip
        self.ledger_dropped = Counter(
            "gateway_ledger_dropped_rows",
            "Usage rows dropped because the buffer was full.",
            registry=registry,
        )
        self.ledger_written = Counter(
            "gateway_ledger_written_rows", "Usage rows written to the database.", registry=registry
        )
        self.reloads = Counter(
            "gateway_config_reloads",
            "Config reloads, by result (ok, refused).",
            ["result"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "gateway_mcp_tool_calls",
            "MCP tool calls, by server, exposed tool name and outcome (ok, tool_error, "
            "denied, timeout, upstream_error, too_large, cancelled).",
            ["server", "tool", "outcome"], registry=registry,
        )  # fmt: skip
        self.tool_duration = Histogram(
            "gateway_mcp_tool_call_duration_seconds",
            "MCP tool calls' duration through the gateway, by server and outcome.",
            ["server", "outcome"], buckets=TOOL_BUCKETS,
            registry=registry,
        )  # fmt: skip
        self.tool_cost = Counter(
            "gateway_mcp_tool_cost_usd", "What MCP tool calls were charged, in USD, by server.",
            ["server"], registry=registry,
        )  # fmt: skip
        self.tool_server_up = Gauge(
            "gateway_mcp_server_up",
            "1 when the MCP server's last exchange succeeded, 0 when it failed (worst worker).",
            ["server"], multiprocess_mode="livemin", registry=registry,
        )  # fmt: skip
        self._ledger_seen = (0, 0)
        # (metric, label values) -> child: labels() validates and locks on every call,
        # a dict lookup does not (the hot path asks for the same few children).
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        # What calls counted since the last `sample()`: per (metric, label values), a
        # counter's increase, and a histogram's count per bucket and sum. A call adds to
        # plain dicts; prometheus-client's own path (a lock per value, a Python loop
        # over the buckets, a file write per value with workers) runs once per label
        # set and sample, not ten times per call.
        self._added: dict[tuple[Any, tuple[str, ...]], float] = {}
        self._observed: dict[tuple[Any, tuple[str, ...]], list[Any]] = {}

    def _of(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def report_in_flight(self, level: str, name: str, count: int) -> None:
        """The in-flight count of one level's account, just after a call entered or left."""
        self._of(self.in_flight_by_level, level, name).set(count)

    # -- per call --------------------------------------------------------------------

    def observe(self, o: Outcome) -> None:
        add, observe = self._add, self._observe
        add(self.requests, (o.rpc, o.model, o.provider, o.status, o.key_id))
        if o.status != "OK":
            add(self.errors, (o.rpc, o.model, o.provider, o.status, o.reason, o.key_id))
            if o.reason == "RATE_LIMITED":
                add(self.rate_limited, (o.key_id,))
            elif o.reason == "BUDGET_EXHAUSTED":
                add(self.budget_refused, (o.key_id,))
        for provider, cause in o.failovers:
            add(self.failovers, (provider, cause))
        if o.route is not None:
            add(self.routes, o.route)
        observe(self.overhead, (o.rpc,), o.overhead_s)
        if o.guardrails is not None:
            self._guardrails(o.guardrails)
        if not o.generated:
            return
        if o.cost_usd:
            add(self.cost, (o.model, o.provider, o.key_id), o.cost_usd)
        if o.affinity is not None:
            add(self.affinity, (o.model, o.affinity))
        if o.response_cache is not None:
            add(self.response_cache, (o.model, o.response_cache))
        uncached = o.prompt_tokens - o.cached_tokens - o.cache_write_tokens
        for kind, count in (("read", o.cached_tokens), ("write", o.cache_write_tokens),
                            ("uncached", uncached)):  # fmt: skip
            if count > 0:
                add(self.prompt_cache, (o.model, o.provider, kind), count)
        operation = OPERATION.get(o.rpc) or operation_of(o.rpc)
        if o.unit != "tokens" and o.units:
            add(self.units, (operation, o.model, o.unit), o.units)
        observe(self.tokens, (operation, o.provider, o.model, "input"), o.prompt_tokens)
        observe(self.tokens, (operation, o.provider, o.model, "output"), o.completion_tokens)
        error_type = "" if o.status == "OK" else o.reason
        observe(self.duration, (operation, o.provider, o.model, error_type), o.latency_s)
        if o.ttft_s is not None:
            observe(self.ttft, (operation, o.provider, o.model), o.ttft_s)
            if o.completion_tokens > 1 and o.status == "OK":
                per_token = (o.latency_s - o.ttft_s) / (o.completion_tokens - 1)
                observe(self.per_token, (operation, o.provider, o.model), max(0.0, per_token))

    def _add(self, counter: Counter, labels: tuple[str, ...], amount: float = 1.0) -> None:
        key = (counter, labels)
        added = self._added
        added[key] = added.get(key, 0.0) + amount

    def _observe(self, histogram: Histogram, labels: tuple[str, ...], value: float) -> None:
        key = (histogram, labels)
        seen = self._observed.get(key)
        if seen is None:
            # Each bucket's count (the last is +Inf's), then the sum.
            seen = self._observed[key] = [[0] * len(histogram._upper_bounds), 0.0]
        # The first bucket whose bound is at least `value`, as prometheus-client's own.
        seen[0][bisect.bisect_left(histogram._upper_bounds, value)] += 1
        seen[1] += value

    def _flush(self) -> None:
        """Moves what calls tallied into the metrics (and, with workers, their files)."""
        added, self._added = self._added, {}
        observed, self._observed = self._observed, {}
        for (counter, labels), amount in added.items():
            self._of(counter, *labels).inc(amount)
        for (histogram, labels), (counts, total) in observed.items():
            child = self._of(histogram, *labels)
            # The child's own values, as its observe() adds to them (one per bucket,
            # not cumulative; the sum apart): the public API takes one value at a time.
            for bucket, count in zip(child._buckets, counts, strict=True):
                if count:
                    bucket.inc(count)
            child._sum.inc(total)

    def _guardrails(self, report: GuardrailReport) -> None:
        for labels, n in report.counts.items():
            self._add(self.guardrail_detections, labels, n)
        for phase, seconds in report.seconds.items():
            if seconds:
                self._observe(self.guardrail_seconds, (phase,), seconds)
        for guardrail, n in report.failures.items():
            self._add(self.guardrail_failures, (guardrail,), n)

    def tool_called(self, row: UsageRecord) -> None:
        """Counts one MCP tool call from its ledger row."""
        tool = f"{row.mcp_server}__{row.mcp_tool}" if row.mcp_outcome != "denied" else ""
        self._of(self.tool_calls, row.mcp_server, tool, row.mcp_outcome).inc()
        self._of(self.tool_duration, row.mcp_server, row.mcp_outcome).observe(row.latency_ms / 1000)
        if row.total_cost_usd:
            self._of(self.tool_cost, row.mcp_server).inc(row.total_cost_usd)

    # -- sampled state ---------------------------------------------------------------

    def sample_tool_servers(self, health: Mapping[str, bool]) -> None:
        for server, up in health.items():
            self._of(self.tool_server_up, server).set(1 if up else 0)

    def sample(
        self,
        catalog: Catalog,
        ledger: Ledger,
        in_flight: int,
        shares: Mapping[str, tuple[float, float | None]] | None = None,
    ) -> None:
        """Sets the gauges from the gateway's state (breakers, ledger, routing shares),
        and moves the calls' tallies into their metrics."""
        self._flush()
        self.in_flight.set(in_flight)
        for profile, (target, recent) in (shares or {}).items():
            self._of(self.router_share, profile, "target").set(target)
            if recent is not None:
                self._of(self.router_share, profile, "recent").set(recent)
        for upstreams in catalog.upstreams.values():
            for u in upstreams:
                self._of(self.breaker, u.id, u.model.id).set(BREAKER_STATE[u.breaker.state.value])
                self._of(self.enabled, u.id, u.model.id).set(1 if u.config.enabled else 0)
        self.ledger_buffered.set(ledger.pending)
        written, dropped = self._ledger_seen
        if ledger.written > written:
            self.ledger_written.inc(ledger.written - written)
        if ledger.dropped > dropped:
            self.ledger_dropped.inc(ledger.dropped - dropped)
        self._ledger_seen = (ledger.written, ledger.dropped)

    @staticmethod
    async def sample_every(sample: Callable[[], None], period_s: float = 1.0) -> None:
        """Keeps the gauges fresh between scrapes: with several workers, a scrape reaches
        one of them and reads everyone's last sample."""
        while True:
            with contextlib.suppress(Exception):
                sample()
            await asyncio.sleep(period_s)

    def render(self) -> bytes:
        """The text exposition of every metric (of every worker, in multiprocess mode)."""
        if multiprocess_dir():
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)


def mark_process_dead(pid: int | None = None) -> None:
    """Drops an exited worker's live gauges (call from the parent, or at exit)."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(pid or os.getpid())
