"""What each transport itself costs per call, with no gateway behind it, in one run.

A server that answers one fixed message (unary) or twenty (a stream), as the gateway's
gRPC API would, served five ways: grpc.aio on the gateway's event loop, the same
sending response headers first (as the gateway sends x-request-id), the same awaiting
once before it answers (as the gateway awaits its upstream), grpc.aio writing the stream
as one merged message, and the synchronous thread-pool server. h2load loads each on
the other core. Beside them, the REST facade's floor: uvicorn and FastAPI on the same
loop answering a fixed JSON body (or twenty SSE events: through Starlette's
StreamingResponse, and `rest-direct` without its disconnect task group, as the
facade streams), loaded by wrk. CPU ms/req is the server process's own time: the floor
each API cannot go below, and what the alternatives would save.

    python -m bench.grpc_floor [--seconds 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from bench.perf import LUA, cpu_s, free_port, pinned, wait_port, wrk

LUA_FILE = Path(tempfile.gettempdir()) / "grpc-floor-post.lua"
MESSAGE = b"\n" + bytes([60]) + b"x" * 60  # a chunk-sized message
CHUNKS = 20


def handlers(kind: str) -> grpc.GenericRpcHandler:
    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if kind == "aio-await":  # as the gateway awaits its upstream
            await asyncio.sleep(0)
        if kind in ("aio-headers", "aio-await"):  # as the gateway sends x-request-id
            await context.send_initial_metadata((("x-request-id", "0" * 32),))
        return MESSAGE

    async def stream(request: bytes, context: grpc.aio.ServicerContext) -> None:
        if kind == "aio-await":
            await asyncio.sleep(0)
        if kind in ("aio-headers", "aio-await"):
            await context.send_initial_metadata((("x-request-id", "0" * 32),))
        if kind == "aio-merged":
            await context.write(MESSAGE * CHUNKS)
            return
        for _ in range(CHUNKS):
            await context.write(MESSAGE)

    return grpc.method_handlers_generic_handler(
        "floor.Floor",
        {"Unary": grpc.unary_unary_rpc_method_handler(unary),
         "Stream": grpc.unary_stream_rpc_method_handler(stream)},
    )  # fmt: skip


def sync_handlers() -> grpc.GenericRpcHandler:
    def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
        return MESSAGE

    def stream(request: bytes, context: grpc.ServicerContext):  # noqa: ANN202
        for _ in range(CHUNKS):
            yield MESSAGE

    return grpc.method_handlers_generic_handler(
        "floor.Floor",
        {"Unary": grpc.unary_unary_rpc_method_handler(unary),
         "Stream": grpc.unary_stream_rpc_method_handler(stream)},
    )  # fmt: skip


def rest_app(direct: bool) -> Any:
    """The facade's framework with nothing behind it: a fixed JSON answer, or twenty SSE
    events, as a chat completion would be; `direct` streams them without the task group
    Starlette starts to read a disconnect (as the facade's EventStream does)."""
    from fastapi import FastAPI
    from fastapi.responses import Response, StreamingResponse

    class Direct(StreamingResponse):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await self.stream_response(send)

    app = FastAPI()
    answer = b'{"id":"x","choices":[{"message":{"content":"' + b"x" * 40 + b'"}}]}'
    event = b'data: {"choices":[{"delta":{"content":"' + b"x" * 30 + b'"}}]}\n\n'

    @app.post("/unary")
    async def unary() -> Response:
        return Response(answer, media_type="application/json")

    @app.post("/stream")
    async def stream() -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            for _ in range(CHUNKS):
                yield event

        return (Direct if direct else StreamingResponse)(events(), media_type="text/event-stream")

    return app


def serve(kind: str, port: int) -> None:
    if kind.startswith("rest"):
        import uvicorn

        config = uvicorn.Config(rest_app(kind == "rest-direct"), host="127.0.0.1", port=port, http="httptools",
                                log_level="warning", access_log=False, loop="none")  # fmt: skip
        from server.cli.serving import event_loop

        with asyncio.Runner(loop_factory=event_loop()) as runner:
            runner.run(uvicorn.Server(config).serve())
        return
    if kind == "sync":
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        server.add_generic_rpc_handlers([sync_handlers()])
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        server.wait_for_termination()
        return

    async def main() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([handlers(kind)])
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    from server.cli.serving import event_loop

    with asyncio.Runner(loop_factory=event_loop()) as runner:
        runner.run(main())


def load(kind: str, port: int, method: str, connections: int, seconds: float, core: str) -> int:
    if kind.startswith("rest"):
        url = f"http://127.0.0.1:{port}/{method.lower()}"
        return wrk(url, "{}", connections, seconds, core, LUA_FILE)["requests"]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp, "body")
        data.write_bytes(b"\0\0\0\0\0")
        argv = ["h2load", "-t1", f"-c{connections}", "-m1", f"-D{int(seconds)}", "-d", str(data),
                "-H", "content-type: application/grpc", "-H", "te: trailers",
                f"http://127.0.0.1:{port}/floor.Floor/{method}"]  # fmt: skip
        done = subprocess.run(pinned(core, argv), capture_output=True, text=True)
    return int(done.stdout.split(" succeeded")[0].rsplit(" ", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pin", default="0:1")
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    server_core, load_core = args.pin.split(":") if args.pin else ("", "")
    LUA_FILE.write_text(LUA)
    servers = {}
    for kind in ("aio", "aio-headers", "aio-await", "aio-merged", "sync", "rest", "rest-direct"):
        port = free_port()
        argv = [sys.executable, "-m", "bench.grpc_floor", "--serve", kind, str(port)]
        servers[kind] = (subprocess.Popen(pinned(server_core, argv)), port)
        wait_port(port)
    time.sleep(0.5)
    best: dict[tuple, float] = {}
    try:
        for _ in range(args.rounds):
            for method in ("Unary", "Stream"):
                for c in (1, 32):
                    for kind, (proc, port) in servers.items():
                        if kind in ("aio-merged", "rest-direct") and method == "Unary":
                            continue
                        before = cpu_s(proc.pid)
                        n = load(kind, port, method, c, args.seconds, load_core)
                        ms = (cpu_s(proc.pid) - before) * 1000 / max(1, n)
                        row = (method, c, kind)
                        best[row] = min(best.get(row, ms), ms)
        print("| call | conns | server | CPU ms/call |\n|---|---|---|---|")
        for (method, c, kind), ms in best.items():
            print(f"| {method.lower()} | {c} | {kind} | {ms:.3f} |")
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
