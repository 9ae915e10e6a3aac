"""Agent frameworks finish against the embedded default (its simulated models): the
simulated model behaves as a cooperative one would, calling the tools a question names
(in parallel when allowed), answering once their results are in, and handing in its
answer through an output tool when a tool is required. Each framework runs its own loop
through the facade, in a few turns."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.support.facade import facade
from tests.support.gateways import API_KEY

QUESTION = "What is the weather and the local time in Paris?"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with facade("in_process") as base:
        yield f"{base}/v1"


async def test_pydantic_ai_agent_with_a_tool_and_an_output_type(url: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    class Forecast(BaseModel):
        city: str
        summary: str

    calls: list[str] = []
    model = OpenAIChatModel("sim-mini", provider=OpenAIProvider(base_url=url, api_key=API_KEY))
    agent = Agent(model, output_type=Forecast)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Gets the weather of a city."""
        calls.append(city)
        return f"Sunny in {city}"

    result = await agent.run(QUESTION)
    assert isinstance(result.output, Forecast)
    assert len(calls) == 1
    # The tool call, its result, then the output tool: two model requests.
    assert len([m for m in result.all_messages() if m.kind == "response"]) == 2


def city_tools(used: list[str]) -> list[Callable[[str], str]]:
    """Two tools the question names, each noting in `used` that it ran."""

    def get_weather(city: str) -> str:
        """Gets the weather of a city."""
        used.append("weather")
        return f"Sunny in {city}"

    def get_time(city: str) -> str:
        """Gets the local time in a city."""
        used.append("time")
        return f"It is noon in {city}"

    return [get_weather, get_time]


async def test_langchain_tool_calling_agent_with_two_tools(url: str) -> None:
    used: list[str] = []
    chat = ChatOpenAI(model="sim-mini", base_url=url, api_key=API_KEY, max_retries=0)  # type: ignore[arg-type]
    agent = create_agent(chat, tools=[tool(f) for f in city_tools(used)])
    state = await agent.ainvoke({"messages": [{"role": "user", "content": QUESTION}]})
    messages = state["messages"]
    # Both tools in one turn (parallel calls), then an answer in text.
    assert sorted(used) == ["time", "weather"]
    assert [m.type for m in messages] == ["human", "ai", "tool", "tool", "ai"]
    assert str(messages[-1].content).startswith("(simulated)")


async def test_openai_agents_sdk_with_two_tools(url: str) -> None:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no traces sent anywhere
    used: list[str] = []
    client = AsyncOpenAI(base_url=url, api_key=API_KEY)
    agent = Agent(
        name="assistant",
        instructions="Answer with the tools.",
        model=OpenAIChatCompletionsModel(model="sim-mini", openai_client=client),
        tools=[function_tool(f) for f in city_tools(used)],
    )
    result = await Runner.run(agent, QUESTION, max_turns=4)
    assert sorted(used) == ["time", "weather"]
    assert str(result.final_output).startswith("(simulated)")


async def test_json_object_has_the_keys_the_prompt_names(url: str) -> None:
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"{url}/chat/completions",
            headers={"authorization": f"Bearer {API_KEY}"},
            json={
                "model": "sim-mini",
                "response_format": {"type": "json_object"},
                "messages": [
                    {
                        "role": "user",
                        "content": 'Return JSON with the keys "name", "age" and "city".',
                    }
                ],
            },  # fmt: skip
        )
        listed = await http.post(
            f"{url}/chat/completions",
            headers={"authorization": f"Bearer {API_KEY}"},
            json={
                "model": "sim-mini",
                "response_format": {"type": "json_object"},
                "messages": [
                    {"role": "user", "content": "Answer in JSON with keys title, author and year."}
                ],
            },  # fmt: skip
        )
    assert list(json.loads(reply.json()["choices"][0]["message"]["content"])) == [
        "name", "age", "city"
    ]  # fmt: skip
    assert list(json.loads(listed.json()["choices"][0]["message"]["content"])) == [
        "title", "author", "year"
    ]  # fmt: skip


async def test_smolagents_tool_calling_agent_hands_in_its_final_answer(url: str) -> None:
    """smolagents keeps the calls as assistant text and the results as user
    "Observation:" messages, with tool_choice required: once the result is in, the
    model calls final_answer and the run ends in two steps."""
    import asyncio

    from smolagents import OpenAIServerModel, ToolCallingAgent
    from smolagents import tool as smol_tool

    calls: list[str] = []

    @smol_tool
    def get_weather(city: str) -> str:
        """Gets the weather of a city.

        Args:
            city: The city.
        """
        calls.append(city)
        return f"Sunny in {city}"

    model = OpenAIServerModel(model_id="sim-mini", api_base=url, api_key=API_KEY)
    agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=4, verbosity_level=0)
    answer = await asyncio.to_thread(agent.run, "What is the weather in Paris?")
    steps = [s for s in agent.memory.steps if getattr(s, "tool_calls", None)]
    assert [[c.name for c in s.tool_calls] for s in steps] == [["get_weather"], ["final_answer"]]
    assert len(calls) == 1 and str(answer).startswith("(simulated)")


async def test_dspy_modules_parse_the_fields_they_prescribe(url: str) -> None:
    """dspy's chat adapter prescribes `[[ ## field ## ]]` markers with a note on each
    field's type; the reply is written in them, so no module falls back to JSON."""
    import dspy

    class Assess(dspy.Signature):
        """Assess the question."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()
        confidence: float = dspy.OutputField()
        steps: int = dspy.OutputField()
        certain: bool = dspy.OutputField()
        tags: list[str] = dspy.OutputField()

    lm = dspy.LM("openai/sim-mini", api_base=url, api_key=API_KEY, cache=False, num_retries=0)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
        plain = await dspy.Predict("question -> answer").acall(question="What is 2+2?")
        reasoned = await dspy.ChainOfThought("question -> answer").acall(question="Why?")
        typed = await dspy.Predict(Assess).acall(question="Is it raining?")
    assert plain.answer.startswith("(simulated)")
    assert reasoned.reasoning.startswith("(simulated)") and reasoned.answer
    assert isinstance(typed.confidence, float) and isinstance(typed.steps, int)
    assert isinstance(typed.certain, bool) and all(isinstance(t, str) for t in typed.tags)
