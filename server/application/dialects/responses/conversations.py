"""ConversationsService: OpenAI's Conversations API (create, retrieve, update, delete;
list, add, retrieve and delete items).

A conversation is owned by the key that created it, like a stored response: any other
key gets NOT_FOUND. Items are kept in the Responses API's item shape (the same as a
stored response's input items), so a response that names the conversation
(`conversation`, in service.py) reads them as the context before its input, and its
input and output items are added after it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from gateway.v1 import conversations_service_pb2 as cs
from gateway.v1 import responses_pb2 as rpb

from server.accounting.accounts import Accounts
from server.accounting.guard import bounded
from server.application.dialects.responses.request import Item, items_of, new_id
from server.application.dialects.responses.service import DEFAULT_PAGE, MAX_PAGE, input_item
from server.application.pipeline import fields
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.config import Config
from server.base.errors import InvalidArgument, NotFound
from server.storage.conversations import Conversation, ConversationStore

T = TypeVar("T")
# Items one create call may add (OpenAI's bound).
MAX_ADDED = 20
# Between an id and which of its occurrences a cursor names (see `cursor`).
REPEAT = "~"


class ConversationsService:
    def __init__(self, live: Live, accounts: Accounts, store: ConversationStore) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store

    async def create_conversation(
        self, request: cs.CreateConversationRequest, call: Call
    ) -> cs.CreateConversationResponse:
        key_id, config = await self._admit(call)
        metadata = dict(fields.metadata(request))
        items = _added(request.items, "items", required=False)
        conversation = Conversation(new_id("conv"), key_id, time.time(), metadata)
        await _bounded(self.store.create(conversation, items), config)
        return cs.CreateConversationResponse(conversation=_head(conversation))

    async def get_conversation(
        self, request: cs.GetConversationRequest, call: Call
    ) -> cs.GetConversationResponse:
        key_id, config = await self._admit(call)
        conversation = await self._get(request.conversation_id, key_id, config)
        return cs.GetConversationResponse(conversation=_head(conversation))

    async def update_conversation(
        self, request: cs.UpdateConversationRequest, call: Call
    ) -> cs.UpdateConversationResponse:
        key_id, config = await self._admit(call)
        _required(request.conversation_id, "conversation_id")
        metadata = dict(fields.metadata(request))
        work = self.store.set_metadata(request.conversation_id, key_id, metadata)
        updated = await _bounded(work, config)
        if updated is None:
            raise missing(request.conversation_id)
        return cs.UpdateConversationResponse(conversation=_head(updated))

    async def delete_conversation(
        self, request: cs.DeleteConversationRequest, call: Call
    ) -> cs.DeleteConversationResponse:
        key_id, config = await self._admit(call)
        _required(request.conversation_id, "conversation_id")
        if not await _bounded(self.store.delete(request.conversation_id, key_id), config):
            raise missing(request.conversation_id)
        return cs.DeleteConversationResponse(
            id=request.conversation_id, object="conversation.deleted", deleted=True
        )

    async def list_conversation_items(
        self, request: cs.ListConversationItemsRequest, call: Call
    ) -> cs.ListConversationItemsResponse:
        key_id, config = await self._admit(call)
        items = await self._items(request.conversation_id, key_id, config)
        limit = request.limit if request.HasField("limit") else DEFAULT_PAGE
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidArgument.for_field("limit", f"must be between 1 and {MAX_PAGE}")
        order = request.order if request.HasField("order") else "desc"
        if order not in ("asc", "desc"):
            raise InvalidArgument.for_field("order", "must be asc or desc")
        if order == "desc":
            items.reverse()
        ids = [str(item.get("id")) for item in items]
        start = 0
        if request.HasField("after"):
            start = _position(ids, request.after) + 1
        page = items[start : start + limit]
        out = cs.ListConversationItemsResponse(
            object="list", data=[input_item(i) for i in page], has_more=start + limit < len(items)
        )
        if page:
            out.first_id, out.last_id = str(page[0]["id"]), cursor(ids, start + len(page) - 1)
        return out

    async def create_conversation_items(
        self, request: cs.CreateConversationItemsRequest, call: Call
    ) -> cs.CreateConversationItemsResponse:
        key_id, config = await self._admit(call)
        _required(request.conversation_id, "conversation_id")
        known = await self._items(request.conversation_id, key_id, config)
        items = _added(request.items, "items", required=True, known=known)
        if not await _bounded(self.store.append(request.conversation_id, key_id, items), config):
            raise missing(request.conversation_id)
        return cs.CreateConversationItemsResponse(
            object="list", data=[input_item(i) for i in items], has_more=False,
            first_id=str(items[0]["id"]), last_id=str(items[-1]["id"]),
        )  # fmt: skip

    async def get_conversation_item(
        self, request: cs.GetConversationItemRequest, call: Call
    ) -> cs.GetConversationItemResponse:
        key_id, config = await self._admit(call)
        items = await self._items(request.conversation_id, key_id, config)
        _required(request.item_id, "item_id")
        found = next((i for i in items if i.get("id") == request.item_id), None)
        if found is None:
            raise _missing_item(request.item_id)
        return cs.GetConversationItemResponse(item=input_item(found))

    async def delete_conversation_item(
        self, request: cs.DeleteConversationItemRequest, call: Call
    ) -> cs.DeleteConversationItemResponse:
        key_id, config = await self._admit(call)
        conversation = await self._get(request.conversation_id, key_id, config)
        _required(request.item_id, "item_id")
        work = self.store.delete_item(request.conversation_id, key_id, request.item_id)
        if not await _bounded(work, config):
            raise _missing_item(request.item_id)
        return cs.DeleteConversationItemResponse(conversation=_head(conversation))

    # -- shared steps -----------------------------------------------------------------

    async def _admit(self, call: Call) -> tuple[str, Config]:
        state = self.live.current
        principal = await self.accounts.admit(call, "api", state.keys)
        return principal.key_id, state.config

    async def _get(self, conversation_id: str, key_id: str, config: Config) -> Conversation:
        _required(conversation_id, "conversation_id")
        found = await _bounded(self.store.get(conversation_id, key_id), config)
        if found is None:
            raise missing(conversation_id)
        return found

    async def _items(self, conversation_id: str, key_id: str, config: Config) -> list[Item]:
        _required(conversation_id, "conversation_id")
        items = await _bounded(self.store.items(conversation_id, key_id), config)
        if items is None:
            raise missing(conversation_id)
        return items


def cursor(ids: Sequence[str], position: int) -> str:
    """What `after` names the item at `position` by: its id when that finds it there,
    else `{id}~{n}`, its id's n-th occurrence (a conversation repeats an id: each
    reference carries the id of the item it names). A page's `last_id` is this, so
    paging always moves on by position and ends."""
    item_id = ids[position]
    if _position(ids, item_id) == position:
        return item_id
    return f"{item_id}{REPEAT}{ids[: position + 1].count(item_id)}"


def _position(ids: Sequence[str], after: str) -> int:
    """Where the item `after` names is: `{id}~{n}` the n-th occurrence of that id; a
    bare id its last one (beyond every repeat, so a page never starts over)."""
    base, mark, nth = after.rpartition(REPEAT)
    if mark and nth.isascii() and nth.isdigit():
        places = [i for i, item_id in enumerate(ids) if item_id == base]
        if 0 < int(nth) <= len(places):
            return places[int(nth) - 1]
    for i in range(len(ids) - 1, -1, -1):
        if ids[i] == after:
            return i
    raise InvalidArgument.for_field("after", f"no item {after!r}")


def missing(conversation_id: str) -> NotFound:
    return NotFound(f"no conversation {conversation_id!r}", {"conversation_id": conversation_id})


def _missing_item(item_id: str) -> NotFound:
    return NotFound(f"no item {item_id!r} in the conversation", {"item_id": item_id})


def _required(value: str, name: str) -> None:
    if not value:
        raise InvalidArgument.for_field(name, "is required")


def _added(
    given: Sequence[rpb.InputItem], where: str, required: bool, known: Sequence[Item] = ()
) -> list[Item]:
    if required and not given:
        raise InvalidArgument.for_field(where, "at least one item is required")
    if len(given) > MAX_ADDED:
        raise InvalidArgument.for_field(where, f"at most {MAX_ADDED} items at once")
    return items_of(given, where, known)


def _head(conversation: Conversation) -> cs.Conversation:
    return cs.Conversation(
        id=conversation.id, object="conversation", created_at=int(conversation.created_at),
        metadata=conversation.metadata,
    )  # fmt: skip


async def _bounded(work: Awaitable[T], config: Config) -> T:
    return await bounded("conversations", work, config.storage_timeout_s)
