"""The key list as the admin page and ListKeys read it: searched, filtered, ordered and
cut into pages.

A page token names the last key of the page before by its place in the order (the
sort value and the key's id), so a key created or revoked between two pages neither
repeats one nor skips one.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from server.base.errors import InvalidArgument
from server.storage.keys import KeyRecord

MAX_PAGE = 1000
ORDERS = {
    "created_at": lambda k: k.created_at,
    "name": lambda k: k.name.lower(),
    "kind": lambda k: k.kind,
    "owner": lambda k: k.owner.lower(),
    "team": lambda k: k.team_id,
}


def matching(keys: Sequence[KeyRecord], query: str, team: str) -> list[KeyRecord]:
    """The keys whose name, id or prefix holds `query` (ignoring case), of `team`."""
    needle = query.strip().lower()
    return [
        k for k in keys
        if (not team or k.team_id == team)
        and (not needle or any(needle in v.lower() for v in (k.name, k.id, k.prefix)))
    ]  # fmt: skip


def page(
    keys: Sequence[KeyRecord], order_by: str, size: int, token: str
) -> tuple[list[KeyRecord], str]:
    """One page of `keys` in the order asked, and the token of the next ('' at the
    end). `size` 0: every key."""
    field, descending = order_by.removeprefix("-") or "created_at", order_by.startswith("-")
    if field not in ORDERS:
        raise InvalidArgument.for_field(
            "order_by", f"must be one of {', '.join(ORDERS)}, or one of them after `-`"
        )
    if size and not 1 <= size <= MAX_PAGE:
        raise InvalidArgument.for_field("page_size", f"must be 1 to {MAX_PAGE}")
    value = ORDERS[field]
    ordered = sorted(keys, key=lambda k: (value(k), k.id), reverse=descending)
    if token:
        after = _read(token)
        ordered = [
            k for k in ordered
            if ((value(k), k.id) < after if descending else (value(k), k.id) > after)
        ]  # fmt: skip
    if not size or len(ordered) <= size:
        return ordered, ""
    shown = ordered[:size]
    last = shown[-1]
    written = json.dumps([value(last), last.id]).encode()
    return shown, base64.urlsafe_b64encode(written).decode()


def _read(token: str) -> tuple[Any, str]:
    try:
        sort_value, key_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        if not isinstance(key_id, str) or not isinstance(sort_value, str | int | float):
            raise ValueError(token)
        return sort_value, key_id
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument.for_field("page_token", "is not a token this API gave") from None
