"""A batch's input is read whole: every refusal names its line and field."""

from __future__ import annotations

import orjson
import pytest

from server.application.batches import lines
from server.base.errors import InvalidArgument

CHAT = "/v1/chat/completions"


def line(custom_id: str, **body: object) -> bytes:
    return orjson.dumps({"custom_id": custom_id, "method": "POST", "url": CHAT,
                         "body": {"model": "m", "max_tokens": 10, **body}}) + b"\n"  # fmt: skip


def test_lines_are_read_with_their_worst_case_tokens() -> None:
    read = lines.read(line("a") + b"\n" + line("b", max_tokens=90), CHAT, 10, 10_000)
    assert [(x.number, x.custom_id) for x in read.lines] == [(1, "a"), (3, "b")]
    assert read.model == "m"
    assert read.tokens > 100  # both lines' max_tokens and their prompts


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[1]\n", "line 1 is not a JSON object"),
        (line("a") + b'{"custom_id": 3}\n', "line 2: custom_id is required (a string)"),
        (line("a").replace(b'"POST"', b'"GET"'), "line 1: method must be POST"),
        (
            line("a", stream=True),
            "line 1: body.stream must not be true: a batch line cannot stream",
        ),
        (line("a") + line("b", model="n"), "line 2: body.model is 'n'; earlier lines use 'm'"),
        (line("a") * 2, "line 2: custom_id 'a' is used by an earlier line"),
        (line("a") + line("b") + line("c"), "line 3 is past the limit of 2 lines"),
        (line("a", text="x" * 300), "line 1 is longer than 200 bytes"),
        (b"\n\n", "input_file_id: the file holds no request lines"),
    ],
)
def test_a_bad_line_is_named(data: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        lines.read(data, CHAT, 2, 200)
    assert refused.value.message == message


def test_requests_are_named_by_their_place() -> None:
    good = {"custom_id": "a", "params": {"model": "m", "max_tokens": 5, "messages": []}}
    assert lines.from_requests([good], 5, 10_000).lines[0].custom_id == "a"
    with pytest.raises(InvalidArgument) as refused:
        lines.from_requests([good, good], 5, 10_000)
    assert refused.value.param == "requests[1].custom_id"
    with pytest.raises(InvalidArgument) as refused:
        lines.from_requests([good] * 6, 5, 10_000)
    assert refused.value.param == "requests"
