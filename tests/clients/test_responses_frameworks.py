"""/v1/responses under the frameworks that speak it by default: the OpenAI Agents
SDK's Runner (its default model is the Responses API) with a function tool and an
output type, and LangChain's ChatOpenAI with use_responses_api=True."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agents import (
    Agent,
    OpenAIConversationsSession,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI, NotFoundError
from pydantic import BaseModel

from tests.support.gateways import API_KEY, running_gateway


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    async with running_gateway() as gw:
        yield f"http://127.0.0.1:{gw.http_port}/v1"


class Forecast(BaseModel):
    city: str
    summary: str


calls: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    return f"18C and sunny in {city}"


@pytest.mark.parametrize("streamed", [False, True])
async def test_agents_runner(base_url: str, streamed: bool) -> None:
    client = AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    set_tracing_disabled(True)
    agent = Agent(
        name="forecaster",
        instructions="Look the weather up, then answer.",
        tools=[get_weather],
        output_type=Forecast,
        model="sim-mini",
    )
    calls.clear()
    if streamed:
        run = Runner.run_streamed(agent, "Weather in Paris?")
        kinds = [event.type async for event in run.stream_events()]
        assert "raw_response_event" in kinds
        result = run
    else:
        result = await Runner.run(agent, "Weather in Paris?")  # type: ignore[assignment]
    assert len(calls) == 1
    assert isinstance(result.final_output, Forecast)
    kinds = [type(item).__name__ for item in result.new_items]
    assert kinds == ["ToolCallItem", "ToolCallOutputItem", "MessageOutputItem"]


async def test_langchain_chat_openai_responses(base_url: str) -> None:
    chat = ChatOpenAI(
        model="sim-mini", base_url=base_url, api_key=API_KEY, use_responses_api=True,  # type: ignore[arg-type]
        max_retries=0,
    )  # fmt: skip
    reply = await chat.ainvoke("Say hello.")
    assert reply.text.startswith("(simulated)")
    assert reply.usage_metadata is not None and reply.usage_metadata["total_tokens"] > 0
    streamed = "".join([chunk.text async for chunk in chat.astream("Say hello.")])
    assert streamed == reply.text

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "18C"

    tooled = chat.bind_tools([get_weather])
    asked = HumanMessage("Weather in Paris?")
    called = await tooled.ainvoke([asked])
    assert isinstance(called, AIMessage)
    (call,) = called.tool_calls
    assert call["name"] == "get_weather" and "city" in call["args"]
    answer = await tooled.ainvoke([asked, called, ToolMessage("18C", tool_call_id=call["id"])])
    assert answer.text.startswith("(simulated)")


async def test_agents_conversations_session_keeps_the_history(base_url: str) -> None:
    """OpenAIConversationsSession keeps the run's items in a gateway conversation: the
    second run reads the first's, and clearing the session deletes the conversation."""
    client = AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    set_tracing_disabled(True)
    session = OpenAIConversationsSession(openai_client=client)
    agent = Agent(name="chat", instructions="Answer briefly.", model="sim-mini")
    await Runner.run(agent, "My name is Ada.", session=session)
    second = await Runner.run(agent, "What is my name?", session=session)
    assert str(second.final_output).startswith("(simulated)")
    items = await session.get_items()
    asked = [i["content"] for i in items if i.get("role") == "user"]  # type: ignore[union-attr]
    assert [a if isinstance(a, str) else a[0]["text"] for a in asked] == [
        "My name is Ada.", "What is my name?",
    ]  # fmt: skip
    assert len(items) == 4
    popped = await session.pop_item()
    assert popped is not None and popped.get("role") == "assistant"  # type: ignore[union-attr]
    assert len(await session.get_items()) == 3
    conversation_id = session.session_id
    await session.clear_session()
    with pytest.raises(NotFoundError):
        await client.conversations.retrieve(conversation_id)
