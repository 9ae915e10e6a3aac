"""LangChain's OpenAI classes against the facade: the `OpenAI` LLM class, which always
sends `prompt` as an array (one completion per prompt, in order), and the chat class
streaming with usage."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langchain_openai import ChatOpenAI, OpenAI

from tests.support.facade import facade
from tests.support.gateways import API_KEY


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with facade("in_process") as base:
        yield f"{base}/v1"


async def test_the_llm_class_batches_prompts(url: str) -> None:
    llm = OpenAI(model="sim-mini", base_url=url, api_key=API_KEY, max_tokens=4, max_retries=0)
    single = await llm.ainvoke("Once upon a time")
    assert single.startswith("(simulated)")
    # LangChain sends the batch as one request of two prompts and reads the choices
    # back by index: each prompt's text is its own.
    result = await llm.agenerate(["Once upon a time", "Tell me about the sea"])
    texts = [g[0].text for g in result.generations]
    assert len(texts) == 2 and texts[0] == single
    assert texts[1] == await llm.ainvoke("Tell me about the sea")
    assert (
        result.llm_output is not None and result.llm_output["token_usage"]["completion_tokens"] == 8
    )


async def test_the_chat_class_streams_with_usage(url: str) -> None:
    chat = ChatOpenAI(model="sim-mini", base_url=url, api_key=API_KEY, stream_usage=True,
                      max_retries=0)  # fmt: skip
    chunks = [chunk async for chunk in chat.astream("Say hello.")]
    text = "".join(str(c.content) for c in chunks)
    assert text.startswith("(simulated)")
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert len(usage) == 1 and usage[0]["output_tokens"] > 0
    assert usage[0]["total_tokens"] == usage[0]["input_tokens"] + usage[0]["output_tokens"]
