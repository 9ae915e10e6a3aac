"""`gateway probe`: asks a running gateway whether it is ready, for a container's health
check where no curl or shell exists. Exits 0 when it is, 1 when it is not (or does not
answer in time), saying why on stderr."""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

DEFAULT_URL = "http://127.0.0.1:8080/readyz"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "probe", help="exit 0 when a running gateway is ready (a container health check)",
        description="Ask a running gateway whether it is ready: GET its /readyz (the default), "
        "or the standard gRPC health check with --grpc. Exits 0 when ready, 1 otherwise.",
    )  # fmt: skip
    parser.add_argument("--url", default=DEFAULT_URL, help=f"readiness URL (default {DEFAULT_URL})")
    parser.add_argument("--grpc", metavar="HOST:PORT", help="check gRPC health here instead")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait (default 2)")
    parser.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    problem = _grpc(args.grpc, args.timeout) if args.grpc else _http(args.url, args.timeout)
    if problem:
        print(f"gateway: not ready: {problem}", file=sys.stderr)
        return 1
    return 0


def _http(url: str, timeout_s: float) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 - an operator's URL
            return None if answer.status == 200 else f"{url} answered {answer.status}"
    except urllib.error.HTTPError as error:
        return f"{url} answered {error.code}"
    except (OSError, ValueError) as error:
        return f"{url}: {error}"


def _grpc(target: str, timeout_s: float) -> str | None:
    with grpc.insecure_channel(target) as channel:
        try:
            status = (
                health_pb2_grpc.HealthStub(channel)
                .Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
                .status
            )
        except grpc.RpcError as error:
            return f"{target}: {error.code().name}"
    serving = health_pb2.HealthCheckResponse.SERVING
    return (
        None
        if status == serving
        else f"{target}: {health_pb2.HealthCheckResponse.ServingStatus.Name(status)}"
    )
