"""Which tools a key sees: a server's own filter over its tool names, then the key's
grant over the exposed names. Deny by default: an empty grant grants nothing."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from server.base.config import McpToolFilter


def matches(globs: Iterable[str], name: str) -> bool:
    """Whether any glob matches `name` (case-sensitive, as tool names are)."""
    return any(fnmatchcase(name, glob) for glob in globs)


def exposes(tools: McpToolFilter, name: str) -> bool:
    """Whether a server's filter lets its tool `name` through: allowed (all are when
    `allow` is empty) and not denied."""
    if tools.allow and not matches(tools.allow, name):
        return False
    return not matches(tools.deny, name)


def granted(grant: Iterable[str], exposed: str) -> bool:
    """Whether a key's grant covers the exposed tool name."""
    return matches(grant, exposed)
