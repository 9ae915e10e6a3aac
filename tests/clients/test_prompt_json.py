"""The simulated models answer JSON asked for in the prompt alone, through the openai
SDK, with the prompts frameworks write: Instructor's JSON and Markdown-JSON modes (a
schema in the system message), LiteLLM's schema appended to the last message, BAML's
own schema format, an example object; and a classifier gets one of the labels (or
indices) it lists. Answers stay deterministic and their strings labelled simulated."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any, Literal

import openai
import pytest
from pydantic import BaseModel

from tests.support.facade import facade
from tests.support.gateways import API_KEY


class User(BaseModel):
    name: str
    age: int
    tags: list[str]


SCHEMA = json.dumps(User.model_json_schema(), indent=2)
INSTRUCTOR_SYSTEM = (
    "As a genius expert, your task is to understand the content and provide the parsed "
    f"objects in json that match the following json_schema:\n\n{SCHEMA}\n\n"
    "Make sure to return an instance of the JSON, not the schema itself"
)
TEXT = "Jason is 25 years old and likes chess."


@pytest.fixture
async def sdk() -> AsyncIterator[openai.AsyncOpenAI]:
    async with (
        facade("in_process") as base,
        openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0) as client,
    ):
        yield client


async def ask(sdk: openai.AsyncOpenAI, *messages: dict[str, str], **extra: Any) -> str:
    answer = await sdk.chat.completions.create(
        model="sim-mini",
        messages=messages,  # type: ignore[arg-type]
        **extra,
    )
    return answer.choices[0].message.content or ""


async def test_instructor_markdown_json_mode(sdk: openai.AsyncOpenAI) -> None:
    system = {"role": "system", "content": INSTRUCTOR_SYSTEM}
    asked = [
        system,
        {"role": "user", "content": TEXT},
        {"role": "user", "content": "Return the correct JSON response within a ```json "
         "codeblock. not the JSON_SCHEMA"},
    ]  # fmt: skip
    text = await ask(sdk, *asked)
    fenced = re.fullmatch(r"```json\n(.*)\n```", text, re.DOTALL)
    assert fenced is not None, text
    user = User.model_validate_json(fenced.group(1))
    assert user.name.startswith("(simulated)")
    assert await ask(sdk, *asked) == text  # deterministic


async def test_instructor_json_mode(sdk: openai.AsyncOpenAI) -> None:
    text = await ask(
        sdk,
        {"role": "system", "content": INSTRUCTOR_SYSTEM},
        {"role": "user", "content": TEXT},
        response_format={"type": "json_object"},
    )
    User.model_validate_json(text)


async def test_litellm_schema_in_the_last_message(sdk: openai.AsyncOpenAI) -> None:
    content = f"{TEXT}\n\nUse this JSON schema: \n```json\n{SCHEMA}\n```"
    text = await ask(sdk, {"role": "user", "content": content})
    User.model_validate_json(re.sub(r"^```json\n|\n```$", "", text))


async def test_baml_output_format(sdk: openai.AsyncOpenAI) -> None:
    class Person(BaseModel):
        name: str
        age: int
        nickname: str | None
        mood: Literal["HAPPY", "SAD"]
        scores: list[float]

    prompt = (
        f"Extract from this content:\n{TEXT}\n\nAnswer in JSON using this schema:\n{{\n"
        '  name: string,\n  age: int,\n  nickname: string or null,\n'
        '  mood: "HAPPY" or "SAD",\n  scores: float[],\n}'
    )  # fmt: skip
    Person.model_validate_json(await ask(sdk, {"role": "user", "content": prompt}))


async def test_an_example_object_gives_the_answer_its_shape(sdk: openai.AsyncOpenAI) -> None:
    prompt = 'What is the weather in Paris? Respond in JSON like {"city": "Rome", "celsius": 20}'
    value = json.loads(await ask(sdk, {"role": "user", "content": prompt}))
    assert set(value) == {"city", "celsius"}
    assert isinstance(value["city"], str) and isinstance(value["celsius"], int)


async def test_a_classifier_gets_one_of_its_labels(sdk: openai.AsyncOpenAI) -> None:
    labels = {"positive", "negative", "neutral"}
    seen = set()
    for text in ("I love it.", "I hate it.", "It is a chair.", "Fine.", "Great!", "Meh."):
        prompt = (
            f"Classify the sentiment of: {text}\nAnswer with one of: positive, negative, neutral"
        )
        seen.add(await ask(sdk, {"role": "user", "content": prompt}))
    assert seen <= labels and len(seen) > 1
    listed = "Classify the text into a category:\n- sports\n- politics\n- science\n\nText: Goal!"
    assert await ask(sdk, {"role": "user", "content": listed}) in {"sports", "politics", "science"}


async def test_a_classifier_asking_for_an_index_gets_one_in_range(sdk: openai.AsyncOpenAI) -> None:
    prompt = (
        "Classify the text. The labels are:\n0: positive\n1: negative\n2: neutral\n\n"
        "Text: I love it.\nReturn the index of the label."
    )
    schema = {"type": "object", "properties": {"index": {"type": "integer"}},
              "required": ["index"], "additionalProperties": False}  # fmt: skip
    seen = set()
    for text in ("I love it.", "I hate it.", "A chair.", "Fine.", "Great!", "Meh."):
        asked = prompt.replace("I love it.", text)
        value = json.loads(await ask(
            sdk, {"role": "user", "content": asked},
            response_format={"type": "json_schema",
                             "json_schema": {"name": "label", "schema": schema}},
        ))  # fmt: skip
        seen.add(value["index"])
        seen.add(int(await ask(sdk, {"role": "user", "content": asked})))
    assert seen <= {0, 1, 2} and len(seen) > 1


async def test_a_prompt_that_asks_for_no_json_gets_text(sdk: openai.AsyncOpenAI) -> None:
    text = await ask(sdk, {"role": "user", "content": "What is JSON, in a sentence?"})
    assert text.startswith("(simulated)")


async def test_an_agents_turn_with_tools_is_not_read_as_a_classifier(
    sdk: openai.AsyncOpenAI,
) -> None:
    # An agent's instructions list skills and categories; its turn is answered as text.
    system = "Skills you may use, by category:\n- run: start the app\n- test: run the tests"
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip
    answer = await sdk.chat.completions.create(
        model="sim-mini", tools=[tool], tool_choice="none",  # type: ignore[list-item]
        messages=[{"role": "system", "content": system}, {"role": "user", "content": "Hello"}],
    )  # fmt: skip
    assert (answer.choices[0].message.content or "").startswith("(simulated)")
