"""LangChain's ChatAnthropic pointed at the gateway with `base_url`: invoke, stream,
tools, for any model of the catalog."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, ToolMessage
from pydantic import BaseModel, Field

from tests.support.facade import facade
from tests.support.gateways import API_KEY


class GetWeather(BaseModel):
    """Gets the weather of a city."""

    city: str = Field(description="The city")


@pytest.fixture
async def chat() -> AsyncIterator[ChatAnthropic]:
    async with facade("in_process") as url:
        yield ChatAnthropic(  # type: ignore[call-arg]
            model="sim-mini", base_url=url, api_key=API_KEY, max_tokens=200, max_retries=0
        )


async def test_invoke_and_stream(chat: ChatAnthropic) -> None:
    reply = await chat.ainvoke("Say hello.")
    assert isinstance(reply.content, str) and reply.content.startswith("(simulated)")
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] > 0
    assert reply.response_metadata["stop_reason"] == "end_turn"
    pieces = [chunk.content async for chunk in chat.astream("Say hello.")]
    text = "".join(p for p in pieces if isinstance(p, str))
    assert text == reply.content


async def test_tool_loop(chat: ChatAnthropic) -> None:
    tools = chat.bind_tools([GetWeather])
    question = HumanMessage("Weather in Paris?")
    first = await tools.ainvoke([question])
    (call,) = first.tool_calls
    assert call["name"] == "GetWeather" and isinstance(call["args"]["city"], str)
    answer = await tools.ainvoke(
        [question, first, ToolMessage("18°C, sunny", tool_call_id=call["id"])]
    )
    assert answer.response_metadata["stop_reason"] == "end_turn"
    assert not answer.tool_calls


class Person(BaseModel):
    """A person."""

    name: str
    age: int


async def test_structured_output_by_json_schema(chat: ChatAnthropic) -> None:
    """method="json_schema" sends Anthropic's output_config.format: served on any model."""
    structured = chat.with_structured_output(Person, method="json_schema")
    person = await structured.ainvoke("Ada is 36.")
    assert isinstance(person, Person)
