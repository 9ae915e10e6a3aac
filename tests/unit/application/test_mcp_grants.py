"""Which tools a key sees: a server's allow and deny lists, then the key's globs."""

from __future__ import annotations

import pytest

from server.application.mcp.grants import exposes, granted, matches
from server.base.config import McpToolFilter


@pytest.mark.parametrize(
    ("allow", "deny", "name", "seen"),
    [
        ([], [], "anything", True),
        (["read_*"], [], "read_file", True),
        (["read_*"], [], "write_file", False),
        (["read_*", "list"], [], "list", True),
        ([], ["write_*"], "write_file", False),
        ([], ["write_*"], "read_file", True),
        (["*"], ["rm"], "rm", False),
        (["rm"], ["rm"], "rm", False),
        (["Read"], [], "read", False),  # names are case-sensitive
    ],
)
def test_a_servers_filter(allow, deny, name, seen) -> None:
    assert exposes(McpToolFilter(allow=allow, deny=deny), name) is seen


@pytest.mark.parametrize(
    ("grant", "name", "seen"),
    [
        ((), "web__echo", False),  # the default grants nothing
        (("*",), "web__echo", True),
        (("web__*",), "web__echo", True),
        (("web__*",), "webx__echo", False),
        (("web__echo",), "web__echo", True),
        (("web__echo",), "web__echo2", False),
        (("web__ech?",), "web__echo", True),
        (("web__[ab]*",), "web__add", True),
        (("web__[ab]*",), "web__echo", False),
        (("files__*", "web__add"), "web__add", True),
        (("WEB__*",), "web__add", False),
    ],
)
def test_a_keys_grant(grant, name, seen) -> None:
    assert granted(grant, name) is seen
    assert matches(grant, name) is seen
