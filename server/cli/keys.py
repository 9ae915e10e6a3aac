"""`gateway keys ...`: create, list, show and revoke keys in the configured database."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from server.base.config import check_tool_globs
from server.cli.options import load, storage_options
from server.storage import open_store
from server.storage.keys import KeyRecord

KINDS = ["api", "router", "admin"]


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "keys", help="manage keys", description="Manage gateway keys in the configured database."
    )
    parser.set_defaults(run=run)
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", help="create a key and print its secret (once)")
    storage_options(create)
    create.add_argument("--name", required=True)
    create.add_argument("--kind", required=True, choices=KINDS)
    create.add_argument("--owner", default="")
    create.add_argument("--rpm", type=int, help="requests per minute (default: unlimited)")
    create.add_argument("--tpm", type=int, help="tokens per minute (default: unlimited)")
    create.add_argument("--budget-usd", type=float, help="spend per period in USD")
    create.add_argument("--budget-period", default="monthly", choices=["daily", "monthly", "none"])
    create.add_argument("--expires-in-days", type=float, help="expiry (default: never)")
    create.add_argument("--mcp-tool", action="append", default=[], metavar="GLOB",
                        help="an MCP tool the key may use, a glob over {server}__{tool} "
                        "names; repeat for more (default: none)")  # fmt: skip
    create.add_argument("--json", action="store_true", help="print JSON")
    listing = sub.add_parser("list", help="list keys")
    storage_options(listing)
    listing.add_argument("--kind", choices=KINDS)
    listing.add_argument("--owner")
    listing.add_argument("--all", action="store_true", help="include revoked keys")
    listing.add_argument("--json", action="store_true", help="print JSON")
    for name, text in (("show", "show one key"), ("revoke", "revoke a key")):
        one = sub.add_parser(name, help=text)
        storage_options(one)
        one.add_argument("key", help="key id or name")
        one.add_argument("--json", action="store_true", help="print JSON")


def _key_dict(key: KeyRecord) -> dict[str, Any]:
    return {
        "id": key.id, "prefix": key.prefix, "kind": key.kind, "name": key.name,
        "owner": key.owner, "requests_per_minute": key.requests_per_minute,
        "tokens_per_minute": key.tokens_per_minute, "budget_usd": key.budget_usd,
        "budget_period": key.budget_period, "created_at": _when(key.created_at),
        "expires_at": _when(key.expires_at), "revoked_at": _when(key.revoked_at),
        "mcp_tools": list(key.mcp_tools),
    }  # fmt: skip


def _when(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _print_key(key: KeyRecord, as_json: bool) -> None:
    data = _key_dict(key)
    if as_json:
        print(json.dumps(data))
        return
    for name, value in data.items():
        print(f"{name + ':':22}{'-' if value is None else value}")


async def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    store = await open_store(cfg.storage)
    try:
        if args.command == "create":
            try:
                check_tool_globs(args.mcp_tool)
            except ValueError as exc:
                print(f"gateway: --mcp-tool {exc}", file=sys.stderr)
                return 2
            expires = None
            if args.expires_in_days is not None:
                expires = time.time() + args.expires_in_days * 86400
            key, secret = await store.keys.create(
                kind=args.kind, name=args.name, owner=args.owner, requests_per_minute=args.rpm,
                tokens_per_minute=args.tpm, budget_usd=args.budget_usd,
                budget_period=args.budget_period, expires_at=expires,
                mcp_tools=tuple(args.mcp_tool),
            )  # fmt: skip
            if args.json:
                print(json.dumps({**_key_dict(key), "secret": secret}))
            else:
                _print_key(key, False)
                print(f"{'secret:':22}{secret}")
                print("The secret is shown only now; the gateway keeps only its digest.")
            return 0
        if args.command == "list":
            keys = await store.keys.list(kind=args.kind, owner=args.owner, include_revoked=args.all)
            if args.json:
                print(json.dumps([_key_dict(k) for k in keys]))
                return 0
            print(f"{'ID':22} {'PREFIX':12} {'KIND':7} {'NAME':20} {'OWNER':14} {'RPM':>6} "
                  f"{'TPM':>8} {'BUDGET':>12} STATUS")  # fmt: skip
            for k in keys:
                status = "revoked" if k.revoked else ("expired" if k.expired() else "active")
                budget = "-" if k.budget_usd is None else f"${k.budget_usd:g}/{k.budget_period}"
                print(f"{k.id:22} {k.prefix:12} {k.kind:7} {k.name:20} {k.owner:14} "
                      f"{k.requests_per_minute or '-':>6} {k.tokens_per_minute or '-':>8} "
                      f"{budget:>12} {status}")  # fmt: skip
            return 0
        found = await store.keys.get(args.key)
        if found is None:
            print(f"gateway: no key {args.key!r}", file=sys.stderr)
            return 1
        if args.command == "revoke":
            found = await store.keys.revoke(found.id)
            assert found is not None
        _print_key(found, args.json)
        return 0
    finally:
        await store.aclose()
