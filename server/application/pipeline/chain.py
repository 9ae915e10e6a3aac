"""A model call whose MCP tools the gateway runs, for every model: the model is offered
the servers' tools as functions, and each round's calls of them are run here and their
results fed back, until the model answers, calls one of the caller's own functions,
asks for a call the caller must approve first, or `mcp.max_rounds` rounds have run.

Every round is accounted as a call of its own: its budget reserved before it runs
(the run does that), its ledger row written when the next round starts (the last one
when the call ends), every row carrying the response id. Every tool call reserves and
writes its own row too (`Tools.call_tool`). A refusal of the budget or rate limit,
before a round or a call, stops the chain with that error; a tool's failure, a
timeout or a server that fails is a result the model reads, and the chain goes on.

The chain yields the model's fragments as they come, except its calls of MCP tools,
which become the events below, for each dialect to write in its own words.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.v1 import usage_pb2

from server.accounting.accounts import Accounts
from server.application.pipeline.engine import Fragment, Run
from server.application.pipeline.generations import Admitted, Generations
from server.base import spans
from server.base.call import Call
from server.base.caller import Principal
from server.base.config import McpServerConfig
from server.base.errors import (
    BudgetExhausted,
    DeadlineExceeded,
    GatewayError,
    NotFound,
    RateLimited,
)
from server.base.generation import GenerationRequest, Message, ToolCall, ToolCallDelta, ToolSpec
from server.base.tools import ExposedTool, Tool, ToolAnswer


class ToolServers(Protocol):
    """The MCP servers a chain lists and calls tools on (server/application/mcp/tools.py):
    `Server` is a client of one, configured or made for one request."""

    def upstream(self, server_id: str) -> Any | None: ...

    def transient(self, config: McpServerConfig, headers: dict[str, str]) -> Any: ...

    async def refuse_keys(self, headers: dict[str, str], fields: dict[str, str]) -> None: ...

    def retire(self, upstream: Any) -> None: ...

    async def listing(self, principal: Principal, upstream: Any) -> list[ExposedTool]: ...

    async def call_tool(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        *,
        request_id: str,
        response_metadata: dict[str, str],
        server: str | None = None,
        response_id: str = "",
        via: Any = None,
    ) -> ToolAnswer: ...


# The ledger's and the metrics' hook for a round that ended before the call did.
RoundReport = Callable[[Call], None]
# The finish reason of a chain cut by mcp.max_rounds.
MAX_ROUNDS = "max_rounds"


@dataclass(frozen=True, slots=True)
class ChainTool:
    """One MCP tool offered to the model: its function as the model sees it (named by
    its exposed name), the server as the caller named it, the tool's name there, and
    whether a call of it waits for the caller's approval."""

    spec: ToolSpec
    label: str
    name: str
    approval: bool
    exposed: ExposedTool


@dataclass(frozen=True, slots=True)
class Listed:
    """A server's tools as the caller may use them, or why they could not be listed."""

    label: str
    tools: tuple[Tool, ...]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CallOpened:
    """The model started a call of an MCP tool."""

    call_id: str
    tool: ChainTool


@dataclass(frozen=True, slots=True)
class CallArguments:
    """A fragment of the call's arguments, as the model writes them."""

    call_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class ToolError:
    """Why a call has no result: the tool's own failure (`tool`, its content kept), the
    server's (`protocol`), or its transport's (`http`)."""

    kind: str
    message: str
    code: int = 0
    content: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class CallEnded:
    """A call the model made, ended: run (`output` or `error`), waiting for approval
    (`pending`), or not run because the chain stopped (`incomplete`)."""

    call_id: str
    tool: ChainTool
    arguments: str
    status: str  # completed, failed, pending, incomplete
    output: str | None = None
    error: ToolError | None = None
    # The approval this call ran on, when it waited for one.
    approval_request_id: str | None = None


ChainEvent = Listed | CallOpened | CallArguments | CallEnded
CHAIN_EVENTS = (Listed, CallOpened, CallArguments, CallEnded)


@dataclass(frozen=True, slots=True)
class Approval:
    """The caller's answer to a call that waited for approval."""

    request_id: str
    call: ToolCall
    tool: ChainTool
    approve: bool


@dataclass
class Toolset:
    """A request's MCP tools: by the name the model calls them, the listings to report,
    and the clients made for this request alone (closed when it ends)."""

    tools: dict[str, ChainTool] = field(default_factory=dict)
    listed: list[Listed] = field(default_factory=list)
    own: dict[str, Any] = field(default_factory=dict)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self.tools.values())


def spec_of(tool: ExposedTool) -> ToolSpec:
    """A listed tool as a function the model may call."""
    schema = tool.definition.get("inputSchema")
    parameters = schema if isinstance(schema, dict) else {"type": "object", "properties": {}}
    description = tool.definition.get("description")
    return ToolSpec(tool.name, description if isinstance(description, str) else None, parameters)


def result_text(result: dict[str, Any]) -> str:
    """A tool result as text for the model and the caller: its text parts joined, other
    parts (images, resources) as their JSON; the structured content when it has no
    parts."""
    parts = result.get("content")
    if not isinstance(parts, list) or not parts:
        structured = result.get("structuredContent")
        return json.dumps(structured) if structured is not None else ""
    out = []
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "text":
            out.append(str(part.get("text", "")))
        else:
            out.append(json.dumps(part))
    return "\n".join(out)


def new_call_id() -> str:
    return f"mcp_{secrets.token_hex(24)}"


@dataclass
class Chains:
    """What every chain runs on, built once (`report` set once the observer is)."""

    generations: Generations
    tools: ToolServers
    accounts: Accounts
    report: RoundReport = lambda call: None

    def chain(
        self,
        admitted: Admitted,
        model: str,
        generation: GenerationRequest,
        toolset: Toolset,
        response_id: str,
        approvals: Sequence[Approval] = (),
    ) -> Chain:
        return Chain(self, admitted, model, generation, toolset, response_id, approvals)


class Chain:
    """One response's rounds and tool calls. `open()` runs the calls the caller has just
    approved and opens the first round (failover stays possible until it answers);
    `events()` then yields everything up to the end; `usage()` sums every round."""

    def __init__(
        self,
        chains: Chains,
        admitted: Admitted,
        model: str,
        generation: GenerationRequest,
        toolset: Toolset,
        response_id: str,
        approvals: Sequence[Approval] = (),
    ) -> None:
        self.generations = chains.generations
        self.tools = chains.tools
        self.accounts = chains.accounts
        self.report = chains.report
        self.admitted = admitted
        self.model = model
        self.toolset = toolset
        self.response_id = response_id
        self.approvals = approvals
        self.max_rounds = admitted.state.config.mcp.max_rounds
        specs = (*generation.tools, *toolset.specs)
        self.generation = dataclasses.replace(generation, tools=specs)
        self.rounds: list[Run] = []
        self.finish_reason = "stop"
        self._before: list[ChainEvent] = []
        self._span: Any = None

    @property
    def run(self) -> Run:
        """The latest round."""
        return self.rounds[-1]

    async def open(self) -> Run:
        call = self.admitted.call
        call.record.response_id = self.response_id
        if self.approvals:
            approved = [a for a in self.approvals if a.approve]
            ended = await self._calls([(a.call, a.tool, a.request_id) for a in approved])
            self._before.extend(ended)
            self._fed([a.call for a in approved], ended, "")
        await self._round()
        return self.run

    async def _round(self) -> None:
        """Opens the next round, on the call's record."""
        tracer = spans.tracer()
        if tracer is not None:
            self._span = tracer.start_span(
                "gateway.mcp.round",
                attributes={
                    "gateway.round": len(self.rounds) + 1,
                    "gateway.response_id": self.response_id,
                },
            )
        self.rounds.append(await self.generations.run(self.admitted, self.model, self.generation))

    def _round_ended(self) -> None:
        """Writes the ended round's row now (its time without the calls after it), and
        gives the call a new record for the rest."""
        call = self.admitted.call
        self._end_span()
        self.accounts.close(call, None)
        self.report(call)
        call.record = call.record.next_round()

    def _end_span(self) -> None:
        if self._span is not None:
            self._span.end()
            self._span = None

    async def events(self) -> AsyncIterator[Fragment | ChainEvent]:
        for listed in self.toolset.listed:
            yield listed
        for event in self._before:
            yield event
        try:
            while True:
                run = self.run
                opened: dict[int, str] = {}  # MCP calls of this round by their index
                plain: set[int] = set()  # the caller's own functions' calls
                async for fragment in run.stream():
                    if isinstance(fragment, ToolCallDelta):
                        index = fragment.index
                        call_id = opened.get(index)
                        if call_id is None and index not in plain:
                            # Its first fragment names it: an MCP tool's, or the caller's.
                            tool = self.toolset.tools.get(fragment.name or "")
                            if tool is None:
                                plain.add(index)
                            else:
                                call_id = opened[index] = new_call_id()
                                yield CallOpened(call_id, tool)
                        if call_id is not None:
                            if fragment.arguments:
                                yield CallArguments(call_id, fragment.arguments)
                            continue
                    yield fragment
                choice = run.choices[0]
                calls = list(zip(sorted(choice.calls), choice.tool_calls, strict=True))
                mcp = [(c, self.toolset.tools[c.name], opened[i]) for i, c in calls if i in opened]
                if not mcp:
                    self.finish_reason = run.finish_reason
                    return
                own_calls = len(calls) > len(mcp)
                if len(self.rounds) >= self.max_rounds:
                    for call, tool, call_id in mcp:
                        yield CallEnded(call_id, tool, call.arguments, "incomplete")
                    self.finish_reason = MAX_ROUNDS
                    return
                waiting = [(c, t, i) for c, t, i in mcp if t.approval]
                ready = [(c, t, i) for c, t, i in mcp if not t.approval]
                # The caller answers next when it has approvals or its own functions'
                # results to give: the calls run, no round follows.
                last = bool(waiting or own_calls)
                if not last:
                    self._round_ended()
                ended = await self._calls(
                    [(c, t, None) for c, t, _ in ready], ids=[i for *_, i in ready]
                )
                for event in ended:
                    yield event
                for call, tool, call_id in waiting:
                    yield CallEnded(call_id, tool, call.arguments, "pending")
                if last:
                    self.finish_reason = "tool_calls" if own_calls else "stop"
                    return
                text = "".join(run.choices[0].text)
                self._fed([c for c, _, _ in ready], ended, text)
                await self._round()
        finally:
            self._end_span()

    async def _calls(
        self,
        calls: Sequence[tuple[ToolCall, ChainTool, str | None]],
        ids: Sequence[str] | None = None,
    ) -> list[CallEnded]:
        """Runs `calls` at once; each one's end in their order. A refusal of the budget
        or the rate limit stops the chain."""
        call_ids = ids if ids is not None else [new_call_id() for _ in calls]
        work = [self._call(made, tool, approval) for made, tool, approval in calls]
        ended = await asyncio.gather(*work)
        return [
            dataclasses.replace(end, call_id=call_id)
            for end, call_id in zip(ended, call_ids, strict=True)
        ]

    async def _call(self, made: ToolCall, tool: ChainTool, approval: str | None) -> CallEnded:
        call = self.admitted.call
        try:
            arguments = json.loads(made.arguments or "{}")
        except json.JSONDecodeError as exc:
            error = ToolError("protocol", f"the arguments are not JSON: {exc}", -32602)
            return CallEnded(
                "", tool, made.arguments, "failed", error=error, approval_request_id=approval
            )
        if not isinstance(arguments, dict):
            error = ToolError("protocol", "the arguments are not a JSON object", -32602)
            return CallEnded(
                "", tool, made.arguments, "failed", error=error, approval_request_id=approval
            )
        try:
            answer = await self.tools.call_tool(
                self.admitted.principal, tool.exposed.name, arguments,
                request_id=call.request_id, response_metadata=call.response_metadata,
                response_id=self.response_id, via=self.toolset.own.get(tool.exposed.server),
            )  # fmt: skip
        except (BudgetExhausted, RateLimited):
            raise
        except DeadlineExceeded as exc:  # no answer in the server's time
            error = ToolError("http", exc.message, 504)
            return CallEnded(
                "", tool, made.arguments, "failed", error=error, approval_request_id=approval
            )
        except GatewayError as exc:  # the server failed or no longer lists the tool
            code = -32602 if isinstance(exc, NotFound) else -32603
            error = ToolError("protocol", exc.message, code)
            return CallEnded(
                "", tool, made.arguments, "failed", error=error, approval_request_id=approval
            )
        text = result_text(answer.result)
        if answer.is_error:
            content = tuple(p for p in answer.result.get("content") or () if isinstance(p, dict))
            error = ToolError("tool", text, content=content)
            return CallEnded(
                "", tool, made.arguments, "failed", error=error, approval_request_id=approval
            )
        return CallEnded(
            "", tool, made.arguments, "completed", output=text, approval_request_id=approval
        )

    def _fed(self, calls: list[ToolCall], ended: list[CallEnded], text: str) -> None:
        """The next round's prompt: this round's calls and what they gave."""
        if not calls:
            return
        messages = [Message("assistant", text, (), None, tuple(calls))]
        for made, end in zip(calls, ended, strict=True):
            messages.append(Message("tool", fed_text(end), tool_call_id=made.id))
        generation = self.generation
        self.generation = dataclasses.replace(
            generation, messages=(*generation.messages, *messages)
        )

    def usage(self) -> usage_pb2.Usage:
        """Every round's usage, summed."""
        return sum_usage([run.usage() for run in self.rounds if run.started])

    async def aclose(self) -> None:
        """Closes this request's own clients."""
        for upstream in self.toolset.own.values():
            self.tools.retire(upstream)


def fed_text(end: CallEnded) -> str:
    """What the model reads of a call's end."""
    if end.error is None:
        return end.output or ""
    return f"Error: {end.error.message}"


def sum_usage(usages: Sequence[usage_pb2.Usage]) -> usage_pb2.Usage:
    """Usages added field by field (tokens, costs, their details); the first round's
    time to first token, the latency of all."""
    out = usage_pb2.Usage()
    if not usages:
        return out
    out.CopyFrom(usages[0])
    for usage in usages[1:]:
        _add(out, usage)
    return out


def _add(out: Any, more: Any) -> None:
    for descriptor, value in more.ListFields():
        name = descriptor.name
        if name == "ttft_ms":
            continue
        if descriptor.message_type is not None:
            _add(getattr(out, name), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            setattr(out, name, getattr(out, name) + value)
