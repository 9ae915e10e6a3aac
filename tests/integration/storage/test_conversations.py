"""The Conversations API on SQLite, PostgreSQL and in memory, through the openai SDK:
a conversation's life (create with items and metadata, retrieve, update, delete), its
items (listed in pages both ways, added, retrieved, deleted), the Responses API's
`conversation` reading them and adding its own, and ownership: for another key a
conversation does not exist."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.gateways import API_KEY, running_gateway
from tests.support.shared_state import config_with

OTHER = "gw-test-other-api-key-0000"


async def _exercise(data: dict[str, Any]) -> None:
    data["keys"].append({"name": "other", "kind": "api", "secret": OTHER})
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}/v1"
        mine = openai.AsyncOpenAI(base_url=base, api_key=API_KEY, max_retries=0)
        theirs = openai.AsyncOpenAI(base_url=base, api_key=OTHER, max_retries=0)
        async with mine, theirs:
            await _life(mine, theirs)


async def _life(mine: openai.AsyncOpenAI, theirs: openai.AsyncOpenAI) -> None:
    first = {"type": "message", "role": "user", "content": "My name is Ada."}
    conv = await mine.conversations.create(items=[first], metadata={"topic": "intro"})  # type: ignore[list-item]
    assert conv.id.startswith("conv_") and conv.metadata == {"topic": "intro"}
    assert (await mine.conversations.retrieve(conv.id)) == conv

    # A response naming it reads its items and adds its input and output, stored or not
    # (not here: the session's PostgreSQL database is shared with the stored-responses
    # tests, which count what expires).
    answer = await mine.responses.create(
        model="sim-mini", input="Name?", conversation=conv.id, store=False
    )
    assert answer.output_text.startswith("(simulated)")
    stream = await mine.responses.create(
        model="sim-pro", input="Again?", conversation={"id": conv.id}, stream=True, store=False
    )
    async for _ in stream:
        pass
    items = (await mine.conversations.items.list(conv.id, order="asc")).data
    assert [(i.type, getattr(i, "role", None)) for i in items] == [
        ("message", "user"), ("message", "user"), ("message", "assistant"),
        ("message", "user"), ("message", "assistant"),
    ]  # fmt: skip
    assert items[1].content[0].text == "Name?"  # type: ignore[union-attr]
    ids = [i.id for i in items]
    # Pages, newest first by default, and after an item.
    page = await mine.conversations.items.list(conv.id, limit=2)
    assert [i.id for i in page.data] == ids[::-1][:2] and page.has_more
    rest = await mine.conversations.items.list(conv.id, limit=10, after=page.last_id)
    assert [i.id for i in rest.data] == ids[::-1][2:] and not rest.has_more

    # Items added, read and deleted one by one.
    added = await mine.conversations.items.create(
        conv.id,
        items=[{"type": "message", "role": "user", "content": "Bye."}],  # type: ignore[list-item]
    )
    (new,) = added.data
    assert (await mine.conversations.items.retrieve(new.id, conversation_id=conv.id)) == new
    after = await mine.conversations.items.delete(new.id, conversation_id=conv.id)
    assert after.id == conv.id
    with pytest.raises(openai.NotFoundError):
        await mine.conversations.items.retrieve(new.id, conversation_id=conv.id)

    updated = await mine.conversations.update(conv.id, metadata={"topic": "names"})
    assert updated.metadata == {"topic": "names"}

    # Another key's conversation does not exist for it, in any call.
    for attempt in (
        theirs.conversations.retrieve(conv.id),
        theirs.conversations.update(conv.id, metadata={}),
        theirs.conversations.items.list(conv.id),
        theirs.conversations.items.create(conv.id, items=[first]),  # type: ignore[list-item]
        theirs.conversations.items.retrieve(ids[0], conversation_id=conv.id),
        theirs.conversations.items.delete(ids[0], conversation_id=conv.id),
        theirs.conversations.delete(conv.id),
        theirs.responses.create(model="sim-mini", input="Name?", conversation=conv.id),
    ):
        with pytest.raises(openai.NotFoundError):
            await attempt
    assert len((await mine.conversations.items.list(conv.id)).data) == 5

    with pytest.raises(openai.BadRequestError) as both:
        await mine.responses.create(
            model="sim-mini", input="Hi", conversation=conv.id, previous_response_id=answer.id
        )
    assert both.value.param == "conversation"

    deleted = await mine.conversations.delete(conv.id)
    assert deleted.deleted and deleted.object == "conversation.deleted"
    with pytest.raises(openai.NotFoundError) as gone:
        await mine.responses.create(model="sim-mini", input="Name?", conversation=conv.id)
    assert gone.value.body["param"] == "conversation"  # type: ignore[index]


async def test_sqlite(tmp_path: Path) -> None:
    await _exercise(config_with(sqlite_path=str(tmp_path / "gw.db")))


async def test_postgres(pg_url: str) -> None:
    await _exercise(config_with(database_url=pg_url))


async def test_concurrent_responses_each_add_their_items(tmp_path: Path) -> None:
    async with running_gateway(config_with(sqlite_path=str(tmp_path / "gw.db"))) as gw:
        base = f"http://127.0.0.1:{gw.http_port}/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key=API_KEY, max_retries=0) as sdk:
            conv = await sdk.conversations.create()
            await asyncio.gather(
                *(sdk.responses.create(model="sim-mini", input=f"Q{i}", conversation=conv.id)
                  for i in range(8))
            )  # fmt: skip
            items = (await sdk.conversations.items.list(conv.id, limit=100, order="asc")).data
    asked = sorted(i.content[0].text for i in items if getattr(i, "role", "") == "user")  # type: ignore[union-attr]
    assert asked == [f"Q{i}" for i in range(8)] and len(items) == 16


@pytest.mark.parametrize(
    "body, field",
    [
        ({"items": [{"type": "message", "role": "wizard", "content": "x"}]}, "items[0].role"),
        ({"items": [{"type": "message", "role": "user", "content": "x"}] * 21}, "items"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ],
)
async def test_a_bad_conversation_is_refused_by_name(body: dict[str, Any], field: str) -> None:
    async with running_gateway(config_with()) as gw:
        base = f"http://127.0.0.1:{gw.http_port}/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key=API_KEY, max_retries=0) as sdk:
            with pytest.raises(openai.BadRequestError) as refused:
                await sdk.conversations.create(**body)
    assert refused.value.param == field


@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_items_whose_ids_repeat_page_through_to_an_end(tmp_path: Path, order: str) -> None:
    """A reference repeats its item's id, and a caller may give one id twice: the SDK's
    own paging (`after` = the page's `last_id`) still reads every item once and stops."""

    def said(item_id: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": text, "id": item_id}

    async with running_gateway(config_with(sqlite_path=str(tmp_path / "gw.db"))) as gw:
        base = f"http://127.0.0.1:{gw.http_port}/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key=API_KEY, max_retries=0) as sdk:
            given = [said("a", "1"), said("b", "2"), said("a", "3"), said("a~1", "4")]
            conv = await sdk.conversations.create(items=given)  # type: ignore[arg-type]
            refs = [{"type": "item_reference", "id": i} for i in ("a", "b", "a")]
            await sdk.conversations.items.create(conv.id, items=[*refs, said("a", "5")])  # type: ignore[list-item]
            whole = (await sdk.conversations.items.list(conv.id, order=order, limit=100)).data
            assert len(whole) == 8
            paged = []
            async for item in sdk.conversations.items.list(conv.id, order=order, limit=2):
                paged.append(item)
                assert len(paged) <= len(whole), "paging started over"
            assert paged == whole
            # A bare id that repeats names its last occurrence: paging from it ends.
            last = await sdk.conversations.items.list(conv.id, order="asc", after="a")
            assert last.data == [] and not last.has_more
            with pytest.raises(openai.BadRequestError) as refused:
                await sdk.conversations.items.list(conv.id, after="a~9")
            assert refused.value.param == "after"
