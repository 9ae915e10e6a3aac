"""`gateway router train`: trains and calibrates the learned difficulty scorer from
labelled outcomes (CSV) and from the feedback in the ledger."""

from __future__ import annotations

import argparse
from typing import Any

from server.cli.options import load, storage_options
from server.routing import training
from server.storage import open_store


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "router",
        help="train the routing scorer",
        description="Routing tools. `gateway router train --help` lists the training options.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser(
        "train",
        help="train and calibrate the learned scorer (other options: see below)",
        description="Trains the learned difficulty scorer; every option of "
        "`python -m server.routing.training` is accepted too (--data, --csv, --feedback, "
        "--share PROFILE=SHARE, --out FILE...).",
        add_help=False,
    )
    storage_options(train)
    train.add_argument(
        "--from-ledger",
        metavar="MODEL",
        help="also learn from the feedback on MODEL's answers in the ledger (the cheaper "
        "model; needs routing.record_prompts on while the traffic was served)",
    )
    train.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    rows: list[tuple[str, float]] = []
    if args.from_ledger:
        store = await open_store(load(args).storage)
        try:
            rows = await store.feedback.rated_prompts(args.from_ledger)
        finally:
            await store.aclose()
        print(f"gateway: {len(rows)} rated prompts of {args.from_ledger} in the ledger")
    return training.main(args.rest, rows, prog="gateway router train")
