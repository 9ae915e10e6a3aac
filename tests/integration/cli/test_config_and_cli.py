"""Config validation at start-up and the `gateway` command itself."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest

from server.base import config
from tests.support.gateways import (
    API_KEY,
    COMMAND_TIMEOUT_S,
    ROOT,
    default_config_dict,
    start_process,
    stop_process,
    write_config,
)


def _bad(mutate) -> str:
    data = default_config_dict()
    mutate(data)
    with pytest.raises(config.ConfigError) as caught:
        config.parse(data, "gateway.yaml")
    return str(caught.value)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["models"][0]["price"].update(input=-1), "models[0].price.input"),
        (
            lambda d: d["models"][1]["providers"][0].update(type="main"),
            "models[1].providers[0].type",
        ),
        (lambda d: d["models"][0].pop("owned_by"), "models[0].owned_by"),
        (lambda d: d["deployments"][0].update(model="ghost"), "deployments[0].model"),
        (
            lambda d: d["routing"]["profiles"].update(quality=["ghost"]),
            "routing.profiles.quality[0]",
        ),
        (lambda d: d["keys"][0].update(secret="short"), "keys[0].secret"),
        (lambda d: d["keys"][1].update(secret=d["keys"][0]["secret"]), "duplicate"),
        (lambda d: d["models"][0].update(colour="blue"), "models[0].colour"),
        (lambda d: d["models"][0]["providers"].reverse(), "exactly one primary"),
    ],
)
def test_invalid_config_names_the_field(mutate, expected):
    assert expected in _bad(mutate)


def test_bad_provider_params_name_the_field(tmp_path):
    data = default_config_dict()
    data["models"][2]["providers"][1]["params"] = {"ttft_ms": -5}
    result = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "--config", str(write_config(tmp_path, data))],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode != 0
    assert "models[2].providers[1].params.ttft_ms" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreadable_or_malformed_file_stops_start_up(tmp_path):
    for path, expected in (
        (tmp_path / "missing.yaml", "cannot read"),
        (tmp_path / "bad.yaml", "not valid YAML"),
    ):
        if path.name == "bad.yaml":
            path.write_text("models: [unclosed")
        result = subprocess.run(
            [sys.executable, "-m", "server.cli.main", "--config", str(path)],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, cwd=ROOT,
        )  # fmt: skip
        assert result.returncode != 0 and expected in result.stderr


def test_embedded_default_config_is_valid_and_complete():
    cfg, source = config.load()
    assert source == "embedded default config"
    # Three price tiers of text models, and simulated models that embed, rerank, moderate.
    generators = [
        m
        for m in cfg.models
        if m.id not in ("sim-embed", "sim-rerank", "sim-moderation", "sim-audio", "sim-image")
    ]
    assert len({m.price.input for m in generators if m.price}) == 3
    assert cfg.model("sim-embed") is not None
    assert all([p.type for p in m.providers] == ["primary", "backup"] for m in cfg.models)
    assert {k.kind for k in cfg.keys} == {"api", "router"}
    assert cfg.deployments


async def test_gateway_command_serves_defaults_and_prints_dev_keys():
    gw = start_process("--grpc-port", "0", "--http-port", "0")
    try:
        assert gw.grpc_port and gw.http_port, "".join(gw.output)
        text = "".join(gw.output)
        assert API_KEY in text and "x-router-key" in text
        grpcurl = ROOT / ".venv" / "bin" / "grpcurl"
        listing = await _run(str(grpcurl), "-plaintext", f"127.0.0.1:{gw.grpc_port}", "list")
        assert "gateway.v1.ChatService" in listing and "grpc.health.v1.Health" in listing
        reply = await _run(
            str(grpcurl), "-plaintext", "-H", f"x-api-key: {API_KEY}",
            "-d", '{"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}',
            f"127.0.0.1:{gw.grpc_port}", "gateway.v1.ChatService/CreateChatCompletion",
        )  # fmt: skip
        body = json.loads(reply)
        assert body["object"] == "chat.completion"
        assert int(body["usage"]["total_tokens"]) > 0
    finally:
        output = stop_process(gw)
    assert "shutting down" in output


async def _run(*argv: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, err.decode()
    return out.decode()


def test_generated_code_is_fresh():
    result = subprocess.run(
        [sys.executable, "-m", "tools.generate", "--check"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


async def test_request_lines_never_stall_requests_and_none_is_lost_at_shutdown():
    """Nobody reads the gateway's output while 400 requests run (its pipe fills after a
    few hundred lines): the requests are served anyway, since a thread writes the lines;
    at SIGTERM every line is written out, none inside a status line (unbuffered, as
    containers run it, a status line's newline once went out apart from its text)."""
    gw = start_process("--grpc-port", "0", "--http-port", "0", env={"PYTHONUNBUFFERED": "1"})
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}",
                                     headers={"x-api-key": API_KEY}, timeout=30) as http:  # fmt: skip
            body = {"model": "sim-mini", "messages": [{"role": "user", "content": "x" * 300}]}
            for _ in range(8):
                replies = await asyncio.gather(
                    *(http.post("/v1/chat/completions", json=body) for _ in range(50))
                )
                assert all(r.status_code == 200 for r in replies)
    finally:
        output = stop_process(gw, timeout_s=30)
    lines = [json.loads(line) for line in output.splitlines() if line.startswith('{"ts"')]
    served = [line for line in lines if line["rpc"].endswith("CreateChatCompletion")]
    assert len(served) == 400
    assert "gateway: stopped" in output


def test_the_state_folder_holds_the_database_and_the_spool(tmp_path):
    state = tmp_path / "state"
    cfg = config.parse(default_config_dict(), "test")
    storage = cfg.storage.model_copy(update={"sqlite_path": "gw.db", "state_dir": str(state)})
    assert storage.sqlite_file == str(state / "gw.db")
    absolute = storage.model_copy(update={"sqlite_path": str(tmp_path / "elsewhere.db")})
    assert absolute.sqlite_file == str(tmp_path / "elsewhere.db")
    # The embedded config's relative gateway.db, and `--workers 2`'s spool, go there.
    gw = start_process(
        "--grpc-port", "0", "--http-port", "0", "--workers", "2",
        env={"GATEWAY_STATE_DIR": str(state)},
    )  # fmt: skip
    try:
        assert gw.http_port, "".join(gw.output)
        assert (state / "gateway.db").is_file()
        assert len(list((state / "spool").iterdir())) == 1
        assert f"sqlite {state / 'gateway.db'}" in "".join(gw.output)
    finally:
        output = stop_process(gw)
    assert gw.process.returncode == 0, output
