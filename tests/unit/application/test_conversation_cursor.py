"""The cursor of a conversation's item pages: a repeated id is named by which
occurrence it is, so `after` always moves on by position."""

from __future__ import annotations

import pytest

from server.application.dialects.responses.conversations import _position, cursor
from server.base.errors import InvalidArgument

IDS = ["a", "b", "a", "a~1", "c~x", "a"]


def test_every_position_has_a_cursor_that_finds_it() -> None:
    names = [cursor(IDS, i) for i in range(len(IDS))]
    assert names == ["a~1", "b", "a~2", "a~1~1", "c~x", "a"]
    assert [_position(IDS, n) for n in names] == list(range(len(IDS)))
    assert [cursor(["a", "a"], i) for i in (0, 1)] == ["a~1", "a"]  # side by side


def test_a_bare_id_names_its_last_occurrence() -> None:
    assert _position(IDS, "a") == 5 and _position(IDS, "b") == 1
    assert _position(["x~2", "x", "x"], "x~2") == 2  # an occurrence before an id
    assert _position(["x~2"], "x~2") == 0  # no such occurrence: the id itself


@pytest.mark.parametrize("after", ["z", "a~4", "a~0", "a~", "a~-1", "a~٢", "b~2"])
def test_a_cursor_that_names_nothing_is_refused(after: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _position(IDS, after)
    assert refused.value.metadata["field"] == "after"
    assert refused.value.message == f"after: no item {after!r}"
