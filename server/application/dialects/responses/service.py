"""ResponsesService: OpenAI's Responses API on every model (create, stream, retrieve,
delete, list input items).

A request is translated to the one generation request the core runs
(`request.py`), so keys, limits, budgets, routing, failover and the
ledger apply as to a chat completion; the generation's events become the response and
its stream (`reply.py`). With `store` (the default) the response, its input
items and the conversation it ends are kept, owned by the caller's key, for
`previous_response_id`, GET, DELETE and input_items. A request naming a `conversation`
(conversations.py) continues its items and adds its own input and output items to it.
A failure after the stream started ends it with `response.failed`, and the call's
record carries the failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

from gateway.v1 import responses_pb2 as rpb
from gateway.v1 import responses_service_pb2 as rs
from google.protobuf import struct_pb2

from server.accounting.accounts import Accounts
from server.accounting.guard import bounded
from server.application.dialects.responses import at_rest, mcp
from server.application.dialects.responses.reply import Builder
from server.application.dialects.responses.request import (
    DIALECT,
    Previous,
    ResponsesRequest,
    Translated,
    missing_previous,
    new_id,
    resolve,
    translate,
)
from server.application.pipeline.chain import Chain, Chains
from server.application.pipeline.engine import Run
from server.application.pipeline.generations import Admitted, Generations
from server.application.pipeline.offer import offered
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.config import Config
from server.base.costs import max_cost
from server.base.errors import GatewayError, InvalidArgument, NotFound
from server.base.generation import GenerationRequest, Relayed, TextDelta, ToolCallDelta
from server.base.pipeline import Encoded
from server.guardrails.guard import Guard
from server.storage.conversations import ConversationStore
from server.storage.responses import ResponseStore, StoredResponse

log = logging.getLogger(__name__)
T = TypeVar("T")

# The generation request's field names, as the Responses API calls them.
FIELD_NAMES = {
    "messages": "input",
    "tools": "tools",
    "response_format": "text.format",
    "reasoning_effort": "reasoning.effort",
    "logprobs": "top_logprobs",
}
# The response's fields before the request's own: OpenAI's defaults.
TEXT = rpb.TextConfig(format=rpb.TextFormat(type="text"), verbosity="medium")
DEFAULTS: dict[str, Any] = dict(
    object="response", status="in_progress", parallel_tool_calls=True, store=True,
    truncation="disabled", service_tier="default", tool_choice="auto",
    reasoning=rpb.ReasoningConfig(), text=TEXT,
)  # fmt: skip
# Request fields the response echoes as they are.
ECHOED = frozenset(
    {"instructions", "max_output_tokens", "previous_response_id", "temperature", "top_p",
     "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
     "parallel_tool_calls", "store",
     "truncation", "service_tier", "tool_choice"}
)  # fmt: skip
# Request fields the response takes as they are: the echoed ones, and these objects.
TAKEN = ECHOED | {"reasoning", "tool_choice_object", "metadata"}
MAX_PAGE = 100
DEFAULT_PAGE = 20


class ResponsesService:
    def __init__(
        self,
        live: Live,
        accounts: Accounts,
        generations: Generations,
        store: ResponseStore,
        conversations: ConversationStore,
        chains: Chains | None = None,
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.generations = generations
        self.store = store
        self.conversations = conversations
        # The rounds of a request with `mcp` tools, which the gateway runs.
        self.chains = chains

    # -- creating ------------------------------------------------------------------

    async def create_response(
        self, request: rs.CreateResponseRequest, call: Call
    ) -> rs.CreateResponseResponse:
        admitted, translated, run, chain = await self._run(request, call)
        answer = rs.CreateResponseResponse(response=_head(request, run, chain))  # filled in place
        builder = Builder(answer.response, run.provider_id, translated.include_encrypted,
                          emit=False, keep=_kept(request),
                          namespaces=translated.namespaces)  # fmt: skip
        if chain is not None:
            try:
                async for event in chain.events():
                    builder.take(event)
            finally:
                await chain.aclose()
            builder.finish(chain.finish_reason, chain.usage())
            await self._keep(request, translated, chain.run, builder, admitted)
            return answer
        async for fragment in run.stream():
            # The run gathers text and calls itself: only whole items go through here.
            if type(fragment) is not TextDelta and type(fragment) is not ToolCallDelta:
                builder.add(fragment)
        builder.gathered(run.choices[0])
        builder.finish(run.finish_reason, run.usage())
        await self._keep(request, translated, run, builder, admitted)
        return answer

    async def stream_response(
        self, request: rs.StreamResponseRequest, call: Call
    ) -> AsyncGenerator[rs.StreamResponseResponse | Encoded, None]:
        admitted, translated, run, chain = await self._run(request, call, call.writes_json)
        builder = Builder(_head(request, run, chain), run.provider_id,
                          translated.include_encrypted, emit=True,
                          keep=_kept(request),
                          namespaces=translated.namespaces)  # fmt: skip
        for event in builder.start():
            yield event
        if chain is not None:
            async for event in self._chained(request, translated, chain, builder, admitted):
                yield event
            return
        text = builder.text_delta
        try:
            async for fragment in run.stream():
                if type(fragment) is Relayed:
                    for relayed in builder.relayed(fragment.events):
                        yield relayed
                    continue
                if type(fragment) is TextDelta and not fragment.logprobs:
                    delta = text(fragment.text)  # the common case, without a list
                    if delta is not None:
                        yield delta
                        continue
                for event in builder.add(fragment):
                    yield event
            ending = builder.finish(run.finish_reason, run.usage())
            await self._keep(request, translated, run, builder, admitted)
        except GatewayError as error:
            # After the first event the caller hears of a failure as OpenAI says it:
            # one `response.failed`, never a completed response with what was cut.
            call.record.failed(error)
            ending = builder.fail(error, run.usage() if run.started else None)
            if not isinstance(error, StorageFailed):
                await self._keep(request, translated, run, builder, admitted, quietly=True)
        for event in ending:
            yield event

    async def _chained(
        self,
        request: ResponsesRequest,
        translated: Translated,
        chain: Chain,
        builder: Builder,
        admitted: Admitted,
    ) -> AsyncGenerator[rs.StreamResponseResponse, None]:
        """A stream of rounds and MCP calls; a failure (a budget running out between
        two of them) ends it with `response.failed`, the items so far kept."""
        call = admitted.call
        try:
            async for event in chain.events():
                for out in builder.take(event):
                    yield out
            ending = builder.finish(chain.finish_reason, chain.usage())
            await self._keep(request, translated, chain.run, builder, admitted)
        except GatewayError as error:
            call.record.failed(error)
            ending = builder.fail(error, chain.usage())
            if not isinstance(error, StorageFailed):
                await self._keep(request, translated, chain.run, builder, admitted, quietly=True)
        finally:
            await chain.aclose()
        for out in ending:
            yield out

    async def _run(
        self, request: ResponsesRequest, call: Call, relay: bool = False
    ) -> tuple[Admitted, Translated, Run, Chain | None]:
        """The caller admitted, the conversation it continues read, the request
        translated and run (as a chain of rounds when it has `mcp` tools; a stream of
        an upstream of this API relayed as it comes when `relay`)."""
        admitted = await self.generations.admit(call, "api", request.model)
        previous = None
        conversation = conversation_of(request)
        continues = request.HasField("previous_response_id")
        if conversation is not None and continues:
            raise InvalidArgument.for_field(
                "conversation", "cannot be used with previous_response_id"
            )
        if conversation is not None or continues:
            # A key refused by its limits or budget costs no read of stored state.
            await self.accounts.count_request(call, _least_cost(admitted, request))
        if conversation is not None:
            previous = await self._conversation(conversation, admitted)
        elif continues:
            previous = await self._previous(request.previous_response_id, admitted)
        translated = translate(request, previous)
        chain = await self._chain(admitted, request, translated)
        try:
            if chain is not None:
                run = await chain.open()
            else:
                generation = translated.generation
                if relay:
                    generation = generation.relayed_as(DIALECT)
                run = await self.generations.run(admitted, request.model, generation)
        except InvalidArgument as exc:
            if chain is not None:
                await chain.aclose()
            raise _renamed(exc) from None
        except BaseException:
            if chain is not None:
                await chain.aclose()
            raise
        return admitted, translated, run, chain

    async def _chain(
        self, admitted: Admitted, request: ResponsesRequest, translated: Translated
    ) -> Chain | None:
        """The chain of rounds a request with `mcp` tools runs; None without them."""
        if not translated.mcp_tools or self.chains is None:
            return None
        config = admitted.state.config.mcp
        servers = mcp.uses(translated.mcp_tools, config)
        toolset = await offered(self.chains.tools, admitted.principal, servers)
        try:
            approvals = mcp.approvals(translated.history, translated.input_items, toolset)
        except BaseException:
            for upstream in toolset.own.values():
                self.chains.tools.retire(upstream)
            raise
        # Each round is a chat of its own: no upstream gets the request as it came.
        generation = dataclasses.replace(translated.generation, native=None)
        return self.chains.chain(
            admitted, request.model, generation, toolset, new_id("resp"), approvals
        )

    async def _previous(self, response_id: str, admitted: Admitted) -> Previous:
        """The stored response a request continues; 404 when it is not the caller's."""
        work = self.store.get(response_id, admitted.principal.key_id)
        stored = await _bounded(work, admitted.state.config)
        if stored is None:
            raise missing_previous(response_id)
        return Previous(stored.id, stored.context, stored.provider, stored.upstream_id)

    async def _conversation(self, conversation_id: str, admitted: Admitted) -> Previous:
        """The items of the conversation a request continues; 404 when it is not the
        caller's."""
        work = self.conversations.items(conversation_id, admitted.principal.key_id)
        items = await _bounded(work, admitted.state.config)
        if items is None:
            raise NotFound(
                f"no conversation {conversation_id!r}",
                {"conversation_id": conversation_id, "field": "conversation"},
            )
        return Previous(conversation_id, tuple(items))

    async def _keep(
        self,
        request: ResponsesRequest,
        translated: Translated,
        run: Run,
        builder: Builder,
        admitted: Admitted,
        quietly: bool = False,
    ) -> None:
        """Stores the response when the request asked (`store`, true by default), and
        adds its items to the conversation it names (when it completed)."""
        config = admitted.state.config
        input_items, output, answer = translated.input_items, builder.items, builder.response
        guard = admitted.call.record.guardrails
        if isinstance(guard, Guard):  # kept as the guardrails redacted them
            input_items = at_rest.items(guard, input_items, "input")
            output = list(at_rest.items(guard, output, "output"))
            answer = at_rest.response(guard, answer)
        if not quietly and (conversation := conversation_of(request)) is not None:
            added = (*input_items, *output)
            key_id = admitted.principal.key_id
            await _bounded(self.conversations.append(conversation, key_id, added), config)
        if not _stored(request):
            return
        now = time.time()
        retention_s = config.responses.retention_days * 86_400
        stored = StoredResponse(
            id=builder.response.id,
            key_id=admitted.principal.key_id,
            created_at=now,
            expires_at=now + retention_s,
            provider=run.provider_id,
            upstream_id=run.upstream_response_id or "",
            response=answer.SerializeToString(),
            input_items=input_items,
            context=(*translated.history, *input_items, *output),
        )
        try:
            await _bounded(self.store.save(stored), config)
        except GatewayError as exc:
            if quietly:
                log.warning("response %s was not stored: %s", stored.id, exc)
                return
            raise StorageFailed(f"the response could not be stored ({exc.message})") from None

    # -- stored responses ----------------------------------------------------------

    async def get_response(
        self, request: rs.GetResponseRequest, call: Call
    ) -> rs.GetResponseResponse:
        stored = await self._stored(request.response_id, call)
        return rs.GetResponseResponse(response=rpb.Response.FromString(stored.response))

    async def delete_response(
        self, request: rs.DeleteResponseRequest, call: Call
    ) -> rs.DeleteResponseResponse:
        state = self.live.current
        principal = await self.accounts.admit(call, "api", state.keys)
        _required_id(request.response_id)
        deleted = self.store.delete(request.response_id, principal.key_id)
        if not await _bounded(deleted, state.config):
            raise _not_found(request.response_id)
        return rs.DeleteResponseResponse(id=request.response_id, object="response", deleted=True)

    async def list_input_items(
        self, request: rs.ListInputItemsRequest, call: Call
    ) -> rs.ListInputItemsResponse:
        stored = await self._stored(request.response_id, call)
        limit = request.limit if request.HasField("limit") else DEFAULT_PAGE
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidArgument.for_field("limit", f"must be between 1 and {MAX_PAGE}")
        order = request.order if request.HasField("order") else "desc"
        if order not in ("asc", "desc"):
            raise InvalidArgument.for_field("order", "must be asc or desc")
        # References listed as the items they name (each id once in an input).
        items = resolve((*stored.context, *stored.input_items))[len(stored.context) :]
        if order == "desc":
            items.reverse()
        ids = [str(item.get("id")) for item in items]
        start, end = 0, len(items)
        if request.HasField("after"):
            start = _position(ids, request.after, "after") + 1
        if request.HasField("before"):
            end = _position(ids, request.before, "before")
        page = items[start:end][:limit]
        out = rs.ListInputItemsResponse(
            object="list",
            data=[input_item(item) for item in page],
            has_more=start + len(page) < end,
        )
        if page:
            out.first_id, out.last_id = str(page[0]["id"]), str(page[-1]["id"])
        return out

    async def _stored(self, response_id: str, call: Call) -> StoredResponse:
        state = self.live.current
        principal = await self.accounts.admit(call, "api", state.keys)
        _required_id(response_id)
        stored = await _bounded(self.store.get(response_id, principal.key_id), state.config)
        if stored is None:
            raise _not_found(response_id)
        return stored

    async def clean_every(self) -> None:
        """Deletes expired responses every `responses.cleanup_interval_s`, for ever."""
        while True:
            config = self.live.current.config
            await asyncio.sleep(config.responses.cleanup_interval_s)
            try:
                removed = await _bounded(self.store.delete_expired(time.time()), config)
            except GatewayError as exc:
                log.warning("cleaning up expired responses failed: %s", exc)
                continue
            if removed:
                log.info("deleted %d expired responses", removed)


class StorageFailed(GatewayError):
    """A finished response could not be stored although the caller asked for it."""

    reason = "STORAGE_UNAVAILABLE"


async def _bounded(work: Awaitable[T], config: Config) -> T:
    return await bounded("stored responses", work, config.storage_timeout_s)


def _least_cost(admitted: Admitted, request: ResponsesRequest) -> float:
    """What a continuation costs at least, whatever it continues: the output it may
    generate, at its model's price (0 for a routing profile or an unknown model, which
    the run names later)."""
    catalog = admitted.state.catalog
    if catalog.is_profile(request.model):
        return 0.0
    try:
        model = catalog.model(request.model)
    except NotFound:
        return 0.0
    most = request.max_output_tokens if request.HasField("max_output_tokens") else None
    bare = GenerationRequest(messages=(), max_tokens=most)
    return max_cost([model.price], bare, admitted.state.config.limits.default_max_tokens)


def conversation_of(request: ResponsesRequest) -> str | None:
    """The conversation a request names, as an id or as `{"id": ...}`."""
    if request.HasField("conversation"):
        return request.conversation or _no_id()
    if request.HasField("conversation_object"):
        return request.conversation_object.id or _no_id()
    return None


def _no_id() -> str:
    raise InvalidArgument.for_field("conversation", "must name a conversation id")


def _kept(request: ResponsesRequest) -> bool:
    """Whether the output is wanted as items: for the stored response or the conversation
    the request names."""
    return _stored(request) or conversation_of(request) is not None


def _stored(request: ResponsesRequest) -> bool:
    return request.store if request.HasField("store") else True


def _renamed(exc: InvalidArgument) -> InvalidArgument:
    """The refusal with the field as the Responses API names it."""
    param = exc.param or ""
    name = FIELD_NAMES.get(param, param)
    if name == param:
        return exc
    message = name + exc.message[len(param) :] if exc.message.startswith(param) else exc.message
    return type(exc)(message, {**exc.metadata, "field": name})


def _required_id(response_id: str) -> None:
    if not response_id:
        raise InvalidArgument.for_field("response_id", "is required")


def _not_found(response_id: str) -> NotFound:
    return NotFound(f"no response {response_id!r}", {"response_id": response_id})


def _position(ids: list[str], item_id: str, where: str) -> int:
    try:
        return ids.index(item_id)
    except ValueError:
        raise InvalidArgument.for_field(where, f"no input item {item_id!r}") from None


def _head(request: ResponsesRequest, run: Run, chain: Chain | None = None) -> rpb.Response:
    """The response as it starts: its id and the request's parameters echoed over
    OpenAI's defaults."""
    fields = dict(DEFAULTS)
    for field, value in request.ListFields():
        name = field.name
        if name in TAKEN:
            fields[name] = value
        elif name == "tools":
            fields[name] = [_echo_tool(tool) for tool in value]
        elif name == "text":
            text = rpb.TextConfig()
            text.CopyFrom(TEXT)
            text.MergeFrom(value)
            fields[name] = text
    response_id = chain.response_id if chain is not None else new_id("resp")
    return rpb.Response(**fields, id=response_id, created_at=int(time.time()), model=run.model.id)


def _echo_tool(tool: struct_pb2.Struct) -> struct_pb2.Struct:
    """A tool as OpenAI echoes it: a function tool with `strict` (true by default) and
    `description` (null when absent)."""
    echoed = struct_pb2.Struct()
    echoed.CopyFrom(tool)
    if echoed.fields["type"].string_value == "function":
        if "strict" not in echoed.fields:
            echoed.fields["strict"].bool_value = True
        if "description" not in echoed.fields:
            echoed.fields["description"].null_value = struct_pb2.NULL_VALUE
    return echoed


def input_item(item: dict[str, Any]) -> rpb.InputItem:
    """A stored item (OpenAI's JSON shape) as the contract's InputItem."""
    # Keys that are fields as they are; content and output as parts, and the summary,
    # are lists read apart.
    out = rpb.InputItem(
        **{k: v for k, v in item.items() if k in _ITEM_FIELDS and not isinstance(v, list)}
    )
    for key, target in (("content", out.content_parts), ("output", out.output_parts)):
        if isinstance(parts := item.get(key), list):
            for part in parts:
                _add_part(target, part)
    if isinstance(summary := item.get("summary"), list):
        for part in summary:
            out.summary.add(type=str(part.get("type")), text=str(part.get("text")))
    return out


_ITEM_FIELDS = frozenset(rpb.InputItem.DESCRIPTOR.fields_by_name)
_LISTED = ("annotations", "logprobs")
_PART_FIELDS = frozenset(rpb.InputContent.DESCRIPTOR.fields_by_name) - set(_LISTED)


def _add_part(target: Any, part: dict[str, Any]) -> None:
    """Adds a content or output part to `target`, its annotations and logprobs as Structs."""
    message = target.add(**{k: v for k, v in part.items() if k in _PART_FIELDS})
    for name in _LISTED:
        for entry in part.get(name, ()):
            getattr(message, name).add().update(entry)
