"""What a compiled build of the hot modules gains, per module and per request.

Copies this tree (`git archive HEAD`) to a temporary directory and compiles the
modules a unary chat completion spends its time in with Cython (`cythonize -i`, type
annotations not read as C types, so the code means what it means in Python). Then:

- per module: the synchronous functions a request calls, timed in each tree (`timeit`,
  the best of five), in a process of its own;
- per request, with `--perf`: `bench.perf --compare` of the compiled copy against this
  tree, run once from each so each tree is measured in both places.

mypyc is the other compiler the issue allows: it cannot build the pipeline's modules,
which are async generators ("async generators are unimplemented", mypy 2.4.1).

Needs Cython, which the gateway does not depend on: `pip install cython`.

    python -m bench.compiled [--perf]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The modules of a unary chat completion with the most self time in a py-spy profile.
MODULES = (
    "server/providers/http1.py", "server/providers/http.py", "server/providers/openai.py",
    "server/application/pipeline/engine.py", "server/application/pipeline/generations.py",
    "server/application/pipeline/dispatch.py", "server/application/pipeline/fields.py",
    "server/base/costs.py", "server/base/tokens.py", "server/base/generation.py",
    "server/base/caller.py", "server/base/record.py", "http_facade/endpoint.py",
    "http_facade/codec.py", "http_facade/context.py", "http_facade/fast_routes.py",
    "http_facade/protocol.py", "http_facade/backends.py",
    "server/application/dialects/chat/request.py", "server/application/dialects/chat/service.py",
    "server/ops/observe.py", "server/ops/metrics.py", "server/ops/requestlog.py",
    "server/accounting/accounts.py", "server/accounting/admission.py",
)  # fmt: skip


def cases() -> dict[str, Callable[[], object]]:
    """The synchronous work of one unary chat completion, function by function."""
    from gateway.v1 import chat_service_pb2 as chat

    from bench import payloads
    from http_facade import codec
    from server.application.dialects.chat import request as chat_request
    from server.base import costs, tokens
    from server.base.config import Price
    from server.base.generation import TokenCounts
    from server.ops.metrics import Metrics
    from server.ops.observe import Outcome

    payload = payloads.chat("hello", "bench", False)
    message = codec.from_dict(payload, chat.CreateChatCompletionRequest())
    response = chat.CreateChatCompletionResponse(id="chatcmpl-1", model="bench")
    choice = response.choices.add()
    choice.message.role, choice.message.content, choice.finish_reason = "assistant", "Hi.", "stop"
    response.usage.prompt_tokens, response.usage.completion_tokens = 9, 6
    generation = chat_request.chat(message)
    price, counts = Price(input=1, output=2), TokenCounts(prompt_tokens=9, completion_tokens=6)
    metrics = Metrics()
    outcome = Outcome(
        rpc="CreateChatCompletion", request_id="r", key_id="k", model="bench", provider="p",
        status="OK", reason="", generated=True, prompt_tokens=9, completion_tokens=6,
        cost_usd=0.000021, latency_s=0.0006, ttft_s=0.0002, upstream_s=0.0002,
    )  # fmt: skip
    return {
        "http_facade/codec.py: from_dict (request)": lambda: codec.from_dict(
            payload, chat.CreateChatCompletionRequest()
        ),
        "http_facade/codec.py: to_dict (response)": lambda: codec.to_dict(response),
        "dialects/chat/request.py: chat": lambda: chat_request.chat(message),
        "base/costs.py: cost": lambda: costs.cost(counts, price),
        "base/tokens.py: estimate_prompt": lambda: tokens._estimate_prompt(generation),
        "ops/metrics.py: observe": lambda: metrics.observe(outcome),
    }


def time_cases() -> None:
    """Prints {case: us per call} for the tree this process imports from."""
    found = {}
    for name, call in cases().items():
        found[name] = min(timeit.repeat(call, number=5000, repeat=5)) / 5000 * 1e6
    print(json.dumps(found))


def timed(tree: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.compiled", "--time-cases"],
        cwd=tree, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def build(tree: Path) -> None:
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    (tree / ".venv").symlink_to(ROOT / ".venv")
    cythonize = Path(sys.executable).parent / "cythonize"
    argv = [str(cythonize), "-i", "-q", "-3", "-j", str(os.cpu_count() or 1)]
    argv += ["-X", "annotation_typing=False", *MODULES]
    subprocess.run(argv, cwd=tree, check=True, capture_output=True)


def perf(first: Path, second: Path) -> None:
    argv = [sys.executable, "-m", "bench.perf", "--compare", str(second), "--seconds", "3"]
    argv += ["--rounds", "3", "--messages", "off", "--gemini", "off", "--responses", "off"]
    print(f"\nfrom {first.name or first} against {second}:", flush=True)
    subprocess.run(argv, cwd=first, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--perf", action="store_true", help="also bench.perf, each tree compared")
    parser.add_argument("--time-cases", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.time_cases:
        time_cases()
        return
    if shutil.which("cythonize", path=str(Path(sys.executable).parent)) is None:
        sys.exit("compiled: needs Cython in this environment: pip install cython")
    tree = Path(tempfile.mkdtemp(prefix="bench-compiled-"))
    try:
        build(tree)
        pure, compiled = timed(ROOT), timed(tree)
        print("| function (module) | pure Python us | compiled us | compiled / pure |")
        print("|---|---|---|---|")
        for name, us in pure.items():
            print(f"| {name} | {us:.2f} | {compiled[name]:.2f} | {compiled[name] / us:.2f} |")
        if args.perf:
            perf(ROOT, tree)
            perf(tree, ROOT)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    main()
