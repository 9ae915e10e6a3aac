"""The processes bench/load.py measures: an nginx upstream, gateway processes and the
LiteLLM proxy, each started with its own temp config on free loopback ports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-api-key-000000000000"
LITELLM_KEY = "sk-bench-master-key-000000"
LITELLM_VERSION = "1.106.2"
LITELLM_VENV = ROOT / "bench" / ".litellm-venv"
GATEWAY_CORE = "0"
UPSTREAM_CORE = "1"
# One model per upstream answer: nginx answers by path, not by the body's "stream" flag.
UNARY_MODEL, STREAM_MODEL = "bench", "bench-stream"
STREAM_CHUNKS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}) before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout_s:.0f} s")


@dataclass
class Server:
    """One started process: its pid (the one to read in /proc) and its log."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start(
    name: str, argv: list[str], core: str, tmp: Path, env: dict[str, str] | None = None
) -> Server:
    """Starts `argv` pinned to `core` (taskset execs, so the pid is the server's own)."""
    log = tmp / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["taskset", "-c", core, *argv], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    return Server(name, proc, log)


# --- the nginx upstream ---------------------------------------------------------------


def chat_completion() -> str:
    """The fixed unary answer, shaped like OpenAI's chat.completion."""
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1767225600,
            "model": UNARY_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Hello from the upstream."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15},
        }
    )


def chat_stream() -> str:
    """The fixed SSE answer: 20 content chunks (the last carries finish_reason), a
    usage chunk, then `data: [DONE]`."""
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600}
    head["model"] = STREAM_MODEL
    events = []
    for i in range(STREAM_CHUNKS):
        last = i == STREAM_CHUNKS - 1
        choice = {"index": 0, "delta": {"content": f" word{i}"}, "finish_reason": None}
        if i == 0:
            choice["delta"]["role"] = "assistant"
        if last:
            choice["finish_reason"] = "stop"
        events.append({**head, "choices": [choice]})
    usage = {"prompt_tokens": 9, "completion_tokens": STREAM_CHUNKS, "total_tokens": 29}
    events.append({**head, "choices": [], "usage": usage})
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def nginx_config(tmp: Path, port: int) -> str:
    """Both answers are files: a POST to a file is a 405 in nginx, which error_page
    turns into a GET of the same file (answers too long for an inline `return`)."""
    temp_paths = "\n".join(
        f"    {kind}_temp_path {tmp}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    locations = "".join(
        f"""
        location = /{path}/v1/chat/completions {{
            types {{ }}
            default_type {mime};
            alias {tmp}/{path}.body;
            error_page 405 =200 $uri;
        }}"""
        for path, mime in (("unary", "application/json"), ("stream", "text/event-stream"))
    )
    return f"""daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
{temp_paths}
    server {{
        listen 127.0.0.1:{port};{locations}
    }}
}}
"""


def start_nginx(tmp: Path) -> tuple[Server, int]:
    port = free_port()
    conf = tmp / "nginx.conf"
    tmp.chmod(0o755)  # started as root, nginx's workers read the files as nobody
    (tmp / "unary.body").write_text(chat_completion())
    (tmp / "stream.body").write_text(chat_stream())
    conf.write_text(nginx_config(tmp, port))
    # -e: the startup error log too, or nginx opens /var/log/nginx/error.log first.
    argv = ["nginx", "-c", str(conf), "-p", str(tmp), "-e", str(tmp / "nginx-error.log")]
    server = start("nginx", argv, UPSTREAM_CORE, tmp)
    wait_port(port, server.proc, "nginx", 10)
    return server, port


# --- gateway processes ----------------------------------------------------------------


def gateway_config(upstream_port: int, sqlite_path: Path) -> dict:
    def model(model_id: str, path: str, stream: bool) -> dict:
        params = {
            "base_url": f"http://127.0.0.1:{upstream_port}/{path}/v1",
            "model": model_id,
            "stream": stream,
        }
        provider = {"id": f"{model_id}-nginx", "type": "primary", "adapter": "openai"}
        return {
            "id": model_id,
            "owned_by": "bench",
            "created": 0,
            "price": {"input": 1, "output": 2},
            "providers": [{**provider, "params": params}],
        }

    return {
        "server": {"host": "127.0.0.1", "grpc_port": free_port(), "http_port": free_port()},
        "storage": {"sqlite_path": str(sqlite_path)},
        "models": [model(UNARY_MODEL, "unary", False), model(STREAM_MODEL, "stream", True)],
        "routing": {"profiles": {p: [UNARY_MODEL] for p in ("economy", "balanced", "quality")}},
        "keys": [{"name": "bench", "kind": "api", "secret": KEY}],
    }


@dataclass
class Gateway:
    server: Server
    grpc_port: int | None
    http_port: int | None
    sqlite_path: Path | None


def start_gateway(
    name: str, tmp: Path, upstream_port: int, *flags: str, grpc_target: str | None = None
) -> Gateway:
    """A gateway process on the gateway core, logging warnings only."""
    sqlite_path = tmp / f"{name}.db"
    config = gateway_config(upstream_port, sqlite_path)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [
        sys.executable,
        "-m",
        "server.cli.main",
        "--config",
        str(path),
        "--log-level",
        "WARNING",
    ]
    argv += list(flags)
    if grpc_target:
        argv += ["--grpc-target", grpc_target]
    server = start(name, argv, GATEWAY_CORE, tmp)
    grpc_port = None if grpc_target else config["server"]["grpc_port"]
    http_port = None if "--no-http" in flags else config["server"]["http_port"]
    for port in (grpc_port, http_port):
        if port is not None:
            wait_port(port, server.proc, name, 60)
    return Gateway(server, grpc_port, http_port, None if grpc_target else sqlite_path)


def start_proxy_floor(tmp: Path, upstream_port: int) -> tuple[Server, int]:
    """bench/proxy_floor.py on the gateway core: uvicorn and the gateway's client alone."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.proxy_floor", "--port", str(port)]
    argv += ["--upstream", f"http://127.0.0.1:{upstream_port}"]
    server = start("proxy-floor", argv, GATEWAY_CORE, tmp)
    wait_port(port, server.proc, "proxy-floor", 60)
    return server, port


# --- LiteLLM --------------------------------------------------------------------------


def litellm_binary() -> tuple[Path | None, str]:
    """The LiteLLM proxy in its own virtualenv, created on first use; (None, why) when
    it cannot be had."""
    binary = LITELLM_VENV / "bin" / "litellm"
    pip = LITELLM_VENV / "bin" / "pip"
    if not binary.exists():
        print(f"load: creating {LITELLM_VENV} with litellm[proxy]=={LITELLM_VERSION} ...")
        steps = [
            ["python3", "-m", "venv", str(LITELLM_VENV)],
            [str(pip), "install", "--quiet", f"litellm[proxy]=={LITELLM_VERSION}"],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                return None, f"`{' '.join(step)}` failed: {done.stderr.strip()[-500:]}"
    shown = subprocess.run(
        [str(pip), "show", "litellm"], capture_output=True, text=True, check=False
    ).stdout
    if f"Version: {LITELLM_VERSION}" not in shown:
        return None, f"{LITELLM_VENV} does not hold litellm {LITELLM_VERSION}"
    return binary, LITELLM_VERSION


def litellm_config(upstream_port: int) -> dict:
    def model(model_id: str, path: str) -> dict:
        params = {
            "model": f"openai/{model_id}",
            "api_base": f"http://127.0.0.1:{upstream_port}/{path}/v1",
            "api_key": "unused",
        }
        return {"model_name": model_id, "litellm_params": params}

    return {
        "model_list": [model(UNARY_MODEL, "unary"), model(STREAM_MODEL, "stream")],
        "litellm_settings": {
            "callbacks": [],
            "success_callback": [],
            "failure_callback": [],
            "set_verbose": False,
            "turn_off_message_logging": True,
            "telemetry": False,
        },
        "general_settings": {"master_key": LITELLM_KEY, "disable_spend_logs": True},
    }


def start_litellm(binary: Path, tmp: Path, upstream_port: int) -> tuple[Server, int]:
    port = free_port()
    path = tmp / "litellm.yaml"
    path.write_text(yaml.safe_dump(litellm_config(upstream_port)))
    env = {
        **os.environ,
        "LITELLM_LOG": "ERROR",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch from the internet at start-up
        "LITELLM_TELEMETRY": "False",
    }
    argv = [str(binary), "--config", str(path), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--num_workers", "1"]
    server = start("litellm", argv, GATEWAY_CORE, tmp, env)
    wait_port(port, server.proc, "litellm", 180)
    return server, port


# --- Portkey --------------------------------------------------------------------------

PORTKEY_VERSION = "1.15.2"
PORTKEY_DIR = ROOT / "build" / "portkey"
PORTKEY_PACKAGE = "@portkey-ai/gateway"


def portkey_script() -> tuple[Path | None, str]:
    """Portkey's gateway (Node) in a folder of its own, installed from npm on first use
    (`make portkey` does the same); (None, why) when it cannot be had."""
    package = PORTKEY_DIR / "node_modules" / PORTKEY_PACKAGE
    if not (package / "package.json").exists():
        print(f"load: installing {PORTKEY_PACKAGE}@{PORTKEY_VERSION} into {PORTKEY_DIR} ...")
        argv = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--no-save",
                "--prefix", str(PORTKEY_DIR), f"{PORTKEY_PACKAGE}@{PORTKEY_VERSION}"]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError as exc:
            return None, f"npm: {exc}"
        if done.returncode != 0:
            return None, f"`{' '.join(argv)}` failed: {done.stderr.strip()[-500:]}"
    version = json.loads((package / "package.json").read_text()).get("version")
    if version != PORTKEY_VERSION:
        return None, f"{package} holds {version}, not {PORTKEY_VERSION}"
    return package / "build" / "start-server.js", PORTKEY_VERSION


def portkey_headers(upstream_port: int, mode: str) -> dict[str, str]:
    """Portkey takes its route from each request's headers: the `openai` provider, sent
    to our nginx as a custom host (loopback is among the hosts it trusts by default)."""
    return {
        "x-portkey-provider": "openai",
        "x-portkey-custom-host": f"http://127.0.0.1:{upstream_port}/{mode}/v1",
        "authorization": "Bearer unused",
    }


def start_portkey(script: Path, tmp: Path) -> tuple[Server, int]:
    """Portkey on the gateway core, without its log UI (`--headless`, production)."""
    port = free_port()
    env = {**os.environ, "NODE_ENV": "production"}
    argv = ["node", str(script), f"--port={port}", "--headless"]
    server = start("portkey", argv, GATEWAY_CORE, tmp, env)
    wait_port(port, server.proc, "portkey", 60)
    return server, port


def last_error(log: Path) -> str:
    """The last line of a server's log that names an error, for a failing row."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    # A start-up spinner may share the line, redrawn after carriage returns.
    found = next((line for line in reversed(lines) if "Error" in line), "")
    return found.rsplit("\r", 1)[-1].strip()
