"""The `mcp` section and the keys' grants, validated at start-up like the rest of the
config: each refusal names its field."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from server.base import config
from tests.support.gateways import ROOT, default_config_dict, write_config
from tests.support.mcp.upstreams import mcp_config


def refusal(mutate) -> str:
    data = mcp_config("http://127.0.0.1:9/mcp")
    mutate(data)
    with pytest.raises(config.ConfigError) as caught:
        config.parse(data, "gateway.yaml")
    return str(caught.value)


def server(index: int, **changes):
    return lambda d: d["mcp"]["servers"][index].update(changes)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (server(0, id="Web"), "mcp.servers[0].id: 'Web' must match [a-z0-9-]{1,24}"),
        (server(0, id="web_tools"), "mcp.servers[0].id"),
        (server(0, id="x" * 25), "mcp.servers[0].id"),
        (server(1, id="web"), "mcp: servers: duplicate 'web'"),
        (server(0, transport="smtp"), "mcp.servers[0].transport"),
        (server(0, url="ftp://x"), "mcp.servers[0]: url: an http or https URL is required"),
        (server(0, command="python"), "command, args and env are for transport stdio"),
        (server(1, command="no-such-command-anywhere"),
         "mcp.servers[1]: command: 'no-such-command-anywhere' is not found"),
        (server(1, url="http://x"), "url and headers are for transport http"),
        (server(0, headers={"Authorization": "Bearer abc"}),
         "mcp.servers[0].headers: headers.Authorization: 'Bearer abc' is not an environment"),
        (server(0, headers={"Authorization": "GW_TEST_NOT_SET_ANYWHERE"}),
         "environment variable GW_TEST_NOT_SET_ANYWHERE is not set"),
        (server(1, env={"TOKEN": "GW_TEST_NOT_SET_ANYWHERE"}), "mcp.servers[1].env"),
        (server(0, timeout_s=0), "mcp.servers[0].timeout_s"),
        (server(0, price_per_call=-1), "mcp.servers[0].price_per_call"),
        (server(0, tools={"allow": ["a" * 60]}), "is not a valid tool name for every model API"),
        (server(0, tools={"allow": ["echo.v2"]}), "mcp.servers[0].tools.allow"),
        (server(0, tools={"allow": ["echo", "echo"]}), "tools.allow: duplicate 'echo'"),
        (server(0, tools={"deny": ["a b"]}), "mcp.servers[0].tools.deny"),
        (lambda d: d["keys"][0].update(mcp_tools=["web/echo"]), "keys[0].mcp_tools"),
        (lambda d: d["mcp"].update(max_result_bytes=10), "mcp.max_result_bytes"),
        (lambda d: d["mcp"].update(session_secret_env="GW_TEST_NOT_SET_ANYWHERE"),
         "mcp.session_secret_env: environment variable GW_TEST_NOT_SET_ANYWHERE is not set"),
        (lambda d: d["mcp"].update(oauth={"issuer": "x"}), "mcp.oauth.jwks_uri"),
        (lambda d: d["mcp"].update(colour="blue"), "mcp.colour"),
    ],
)  # fmt: skip
def test_invalid_mcp_config_names_the_field(mutate, expected) -> None:
    assert expected in refusal(mutate)


def test_a_valid_mcp_config() -> None:
    parsed = config.parse(mcp_config("http://127.0.0.1:9/mcp"), "gateway.yaml")
    web, local = parsed.mcp.servers
    assert (web.id, web.transport, local.command) == ("web", "http", sys.executable)
    assert parsed.keys[0].mcp_tools == ["web__*", "local__*"]
    assert parsed.keys[2].mcp_tools == []  # the default grants nothing
    assert parsed.mcp.server("local") is local and parsed.mcp.server("nope") is None


@pytest.mark.parametrize(
    ("secret", "why"), [("", "holds nothing"), ("x" * 31, "holds too short a secret")]
)
def test_an_empty_or_short_session_secret_stops_start_up(tmp_path, secret, why) -> None:
    """Never a secret made up per worker, which would refuse half of a session's calls."""
    data = default_config_dict()
    data["mcp"] = {"session_secret_env": "GW_TEST_SESSION_SIGNING"}
    path = str(write_config(tmp_path, data))
    done = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "--config", path, "--workers", "2"],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
        env={**os.environ, "GW_TEST_SESSION_SIGNING": secret},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"mcp.session_secret_env: environment variable GW_TEST_SESSION_SIGNING {why}; "
        "it needs at least 32 characters"
    ) in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "gateway: ready" not in done.stdout
