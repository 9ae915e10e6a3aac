"""MessagesService: Anthropic's Messages format over the gateway's one generation.

The request is translated (`request.py`) and run as every generation is
(keys, limits, budget reserved on max_tokens, routing, failover, ledger); the reply is
written back as Anthropic writes it (`reply.py`). A stream's `message_start`
waits for the first event of the upstream, so failover stays possible until then and
the start reports the input usage.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncGenerator, AsyncIterator

from gateway.v1 import messages_pb2 as pb
from gateway.v1 import messages_service_pb2 as service

from server.accounting.accounts import Accounts
from server.application.dialects.messages import mcp
from server.application.dialects.messages import reply as replies
from server.application.dialects.messages import request as translation
from server.application.dialects.messages.reply import Reply, summed_usage
from server.application.pipeline.chain import (
    Chain,
    ChainEvent,
    Chains,
)
from server.application.pipeline.engine import Fragment, Run
from server.application.pipeline.generations import Generations
from server.application.pipeline.offer import offered
from server.application.pipeline.state import Live
from server.base import tokens
from server.base.call import Call
from server.base.errors import InvalidArgument, UpstreamError
from server.base.generation import Relayed, TokenCounter
from server.base.pipeline import Encoded
from server.base.throttle import warn_throttled

log = logging.getLogger(__name__)

Event = service.StreamMessageResponse


class MessagesService:
    def __init__(
        self,
        generations: Generations,
        live: Live,
        accounts: Accounts,
        chains: Chains | None = None,
    ) -> None:
        self.generations = generations
        self.live = live
        self.accounts = accounts
        # The rounds of a request with `mcp_servers`, which the gateway runs.
        self.chains = chains

    async def create_message(
        self, request: service.CreateMessageRequest, call: Call
    ) -> service.CreateMessageResponse:
        run, chain = await self._run(request, call)
        reply = Reply(emit=False)
        async for fragment in _fragments(run, chain):
            reply.take(fragment)
        reason, sequence = reply.stop(run, chain.finish_reason if chain else None)
        response = service.CreateMessageResponse(
            id=f"msg_{call.request_id}",
            type="message",
            role="assistant",
            content=reply.content(),
            model=run.model.id,
            stop_reason=reason,
            stop_sequence=sequence,
            usage=reply.usage(run) if chain is None else summed_usage(chain.usage()),
        )
        if extra := reply.extra():
            response.other.update(extra)
        return response

    async def stream_message(
        self, request: service.StreamMessageRequest, call: Call
    ) -> AsyncGenerator[Event | Encoded, None]:
        run, chain = await self._run(request, call, relay=call.writes_json)
        reply = Reply(emit=True)
        fragments = _fragments(run, chain)
        # Already read by the failover: an Anthropic upstream's start, with its usage.
        first = await anext(fragments, None)
        pending = _written(reply, first) if first is not None else []
        start = Event(
            type="message_start",
            message=pb.Message(
                id=f"msg_{call.request_id}",
                type="message",
                role="assistant",
                model=run.model.id,
                usage=reply.start_usage(run),
            ),
        )
        if reply.start_extra:
            start.message.other.update(reply.start_extra)
        yield start
        for event in pending:
            yield event
        async for fragment in fragments:
            for event in _written(reply, fragment):
                yield event
        for event in reply.close():
            yield event
        reason, sequence = reply.stop(run, chain.finish_reason if chain else None)
        end = Event(
            type="message_delta",
            message_delta=pb.MessageDelta(stop_reason=reason, stop_sequence=sequence),
            usage=reply.usage(run) if chain is None else summed_usage(chain.usage()),
        )
        if reply.delta_extra:
            end.message_delta.other.update(reply.delta_extra)
        yield end
        yield Event(type="message_stop")

    async def _run(
        self, request: translation.GenerateRequest, call: Call, relay: bool = False
    ) -> tuple[Run, Chain | None]:
        admitted = await self.generations.admit(call, "api", request.model)
        headers = translation.native_headers(call.metadata)
        generation = translation.generation(request, headers)
        if not request.mcp_servers or self.chains is None:
            if relay:  # an upstream of this format may stream its blocks as they are
                generation = generation.relayed_as(translation.DIALECT)
            return await self.generations.run(admitted, request.model, generation), None
        if generation.native is not None and generation.native.required_by is not None:
            raise InvalidArgument.for_field(
                generation.native.required_by, "cannot be combined with mcp_servers"
            )
        servers = mcp.uses(request, call.metadata, admitted.state.config.mcp)
        toolset = await offered(self.chains.tools, admitted.principal, servers)
        # Each round is a chat of its own: no upstream gets the request as it came.
        generation = dataclasses.replace(generation, native=None)
        chain = self.chains.chain(
            admitted, request.model, generation, toolset, f"msg_{call.request_id}"
        )
        try:
            return await chain.open(), chain
        except BaseException:
            await chain.aclose()
            raise

    async def count_message_tokens(
        self, request: service.CountMessageTokensRequest, call: Call
    ) -> service.CountMessageTokensResponse:
        """The first Anthropic provider of the model counts; when none can (or it
        fails), the gateway estimates as it does for rate limits."""
        state = self.live.current
        await self.accounts.admit(call, "api", state.keys)
        generation = translation.generation(request, translation.native_headers(call.metadata))
        model = state.catalog.model(request.model)
        for upstream in state.catalog.upstreams[model.id]:
            provider = upstream.provider
            if upstream.usable and isinstance(provider, TokenCounter):
                try:
                    counted = await provider.count_tokens(generation)
                except UpstreamError as exc:
                    # The caller still gets a count; the operator learns it is estimated.
                    warn_throttled(log, f"count:{upstream.id}",
                                   f"{exc.message}; the token count is estimated")  # fmt: skip
                    break
                return service.CountMessageTokensResponse(input_tokens=counted, method="provider")
        estimate = tokens.estimate_prompt(generation)
        return service.CountMessageTokensResponse(input_tokens=estimate, method="estimate")

    async def list_model_infos(
        self, request: service.ListModelInfosRequest, call: Call
    ) -> service.ListModelInfosResponse:
        state = self.live.current
        await self.accounts.admit(call, "api", state.keys)
        return replies.page(state.config.models, request)

    async def get_model_info(
        self, request: service.GetModelInfoRequest, call: Call
    ) -> service.GetModelInfoResponse:
        state = self.live.current
        await self.accounts.admit(call, "api", state.keys)
        one = replies.info(state.catalog.model(request.model))
        return service.GetModelInfoResponse(
            type=one.type, id=one.id, display_name=one.display_name, created_at=one.created_at
        )


def _written(reply: Reply, fragment: Fragment | ChainEvent) -> list[Event] | list[Encoded]:
    """The events a fragment becomes: an Anthropic upstream's blocks relayed as it wrote
    them, or the reply's own."""
    if isinstance(fragment, Relayed):
        events = fragment.events
        return [Encoded([_one_line(e.data) for e in events], [e.event for e in events])]
    return reply.take(fragment)


def _one_line(data: str) -> bytes:
    """An event's JSON on one line, as one `data:` line carries it: the line breaks of
    JSON split over several lines are whitespace between its tokens (a string holds
    none unescaped)."""
    return (data.replace("\n", " ") if "\n" in data else data).encode()


async def _fragments(run: Run, chain: Chain | None) -> AsyncIterator[Fragment | ChainEvent]:
    """A run's fragments, or a chain's events and fragments (its clients closed at the
    end)."""
    if chain is None:
        async for fragment in run.stream():
            yield fragment
        return
    try:
        async for event in chain.events():
            yield event
    finally:
        await chain.aclose()
