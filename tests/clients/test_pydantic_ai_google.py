"""pydantic-ai's GoogleModel (the Gemini API through google-genai) on a model with no
Gemini upstream: the simulated default. pydantic-ai sends `responseModalities: ["TEXT"]`
with every call, a value any text model answers anyway, so its agent runs, streams, calls
tools and hands in structured output like any other client of the dialect."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from tests.support.facade import facade
from tests.support.gateways import API_KEY


@pytest.fixture
async def model() -> AsyncIterator[GoogleModel]:
    async with facade("in_process") as base:
        yield GoogleModel("sim-mini", provider=GoogleProvider(api_key=API_KEY, base_url=base))


async def test_an_agent_answers_in_text(model: GoogleModel) -> None:
    result = await Agent(model).run("Say hello.")
    assert isinstance(result.output, str) and result.output
    assert result.usage().output_tokens > 0


async def test_an_agent_streams(model: GoogleModel) -> None:
    async with Agent(model).run_stream("Tell me a short story.") as run:
        pieces = [piece async for piece in run.stream_text(delta=True, debounce_by=None)]
    assert len(pieces) > 1
    assert "".join(pieces).strip()


async def test_an_agent_calls_a_tool_then_answers(model: GoogleModel) -> None:
    calls: list[str] = []
    agent = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Gets the weather of a city."""
        calls.append(city)
        return f"Sunny in {city}"

    result = await agent.run("What is the weather in Paris?")
    assert len(calls) == 1 and calls[0]
    assert result.output


async def test_structured_output_through_the_output_tool(model: GoogleModel) -> None:
    class Forecast(BaseModel):
        city: str
        summary: str

    result = await Agent(model, output_type=Forecast).run("The forecast for Paris, please.")
    assert isinstance(result.output, Forecast)
