"""What a real upstream checks before it generates anything, as each fake applies it.

A fake answers a request its real API would refuse the way that API refuses it: the
status and the error body its documentation gives. `Refusal` is that answer; each wire
format's module (openai.py, responses.py, anthropic.py, gemini.py, vertex.py,
bedrock.py, azure.py, tgi.py) has a `refusal(path, headers, body)` that returns one, or
None for a request the real API takes.

The record of each wire format is its provider's own: the OpenAI and Anthropic SDKs'
request parameter types (openai-python's `completion_create_params`, read from the
installed SDK; anthropic-sdk-python's `MessageCreateParams`), and TGI's router
(`GenerateRequest`, `GenerateParameters` and the messages of `ValidationError`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The key every fake expects unless told otherwise, and the variable the gateway's test
# configs read it from (`tests/support/upstreams/config.py`); gateway processes started
# by tests inherit it.
KEY = "sk-fake-upstream-key-0123456789"
KEY_ENV = "GATEWAY_TEST_UPSTREAM_KEY"
os.environ.setdefault(KEY_ENV, KEY)


@dataclass
class Refusal:
    """An error answer: its status, its JSON body (or text), extra headers."""

    status: int
    body: Any
    # What was refused, in a few words, for `FakeUpstream.problems`.
    why: str
    headers: dict[str, str] = field(default_factory=dict)
    text: bool = False


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# A field's check: the JSON type it must have (a word for the message) and a test of
# its value (type and range) that says what is wrong, or None.
Check = Callable[[Any], str | None]


def number(low: float | None = None, high: float | None = None, *, above: float | None = None,
           below: float | None = None) -> Check:  # fmt: skip
    def check(value: Any) -> str | None:
        if not is_number(value):
            return "expected a number"
        if low is not None and value < low or high is not None and value > high:
            return f"expected a value between {low:g} and {high:g}"
        if above is not None and value <= above or below is not None and value >= below:
            return f"expected a value above {above} and below {below}"
        return None

    return check


def integer(low: int | None = None, high: int | None = None) -> Check:
    def check(value: Any) -> str | None:
        if not is_int(value):
            return "expected an integer"
        if low is not None and value < low or high is not None and value > high:
            return f"expected an integer between {low} and {high}"
        return None

    return check


def of_type(*kinds: type, word: str) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) and bool not in kinds:
            return f"expected {word}"
        return None if isinstance(value, kinds) else f"expected {word}"

    return check


def one_of(*allowed: Any) -> Check:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"expected one of {', '.join(map(str, allowed))}"

    return check


def strings(most: int | None = None, single: bool = False) -> Check:
    """A list of strings (of at most `most`), or with `single` also one string."""

    def check(value: Any) -> str | None:
        if single and isinstance(value, str):
            return None
        if not is_str_list(value):
            return "expected a list of strings"
        if most is not None and len(value) > most:
            return f"expected at most {most} strings"
        return None

    return check


def str_map(values: Check) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            return "expected an object"
        for item in value.values():
            if (problem := values(item)) is not None:
                return problem
        return None

    return check


BOOL = of_type(bool, word="a boolean")
STRING = of_type(str, word="a string")
OBJECT = of_type(dict, word="an object")
LIST = of_type(list, word="an array")


def first_problem(body: dict[str, Any], checks: dict[str, Check], nullable: bool) -> tuple[str, str] | None:  # fmt: skip
    """The first field of `body` whose value fails its check: (field, what is wrong)."""
    for name, value in body.items():
        check = checks.get(name)
        if check is None or value is None and nullable:
            continue
        if (problem := check(value)) is not None:
            return name, problem
    return None
