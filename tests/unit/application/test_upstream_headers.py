"""The checks on a caller's headers for an upstream MCP server, each refusal naming its
field: names are tokens, values field values in Latin-1, the gateway's own headers
stay its own, the count and size are bounded, and no value holds a key of the gateway
(configured anywhere in it, stored as a token shaped like one, a bounded number of
lookups per header); a server named through the gateway, or run as a child process,
takes no headers, and a remote cannot take a configured server's id."""

from __future__ import annotations

from typing import Any

import pytest

from server.application.pipeline.offer import ServerUse, gateway_named, offered, server_named
from server.base import upstream_headers as uh
from server.base.config import McpConfig, McpServerConfig
from server.base.errors import InvalidArgument

WHERE = "tools[0].headers"
STORED = "gw-api-" + "s" * 43
KEYLIKE = "gw-router-" + "k" * 43


def refusal(work: Any) -> tuple[str | None, str]:
    with pytest.raises(InvalidArgument) as refused:
        work()
    return refused.value.param, refused.value.message


def test_valid_headers_come_back_by_their_lower_case_names() -> None:
    given = {"X-Tenant": "acme café", "X-Note": "a\tb c", "X-Empty": "", "x~y!#$%&'*+.^_`|": "1"}
    assert uh.checked(given, WHERE) == {
        "x-tenant": "acme café", "x-note": "a\tb c", "x-empty": "", "x~y!#$%&'*+.^_`|": "1",
    }  # fmt: skip
    assert uh.checked({}, WHERE) == {}
    # Only a space or tab at either end is lost on the way: others stay the value's own.
    assert uh.checked({"X-Nbsp": "\xa0x\xa0", "X-Edge": "Xx X"}, WHERE) == {
        "x-nbsp": "\xa0x\xa0", "x-edge": "Xx X"
    }  # fmt: skip
    # Every visible ASCII character and every Latin-1 letter or sign is a value.
    every = "".join(map(chr, range(0x20, 0x7F))).strip() + "".join(map(chr, range(0xA0, 0x100)))
    assert uh.checked({"X-All": every}, WHERE) == {"x-all": every}


@pytest.mark.parametrize(
    ("headers", "field", "message"),
    [
        ("X-A: 1", WHERE, "must map header names to strings"),
        (["X-A"], WHERE, "must map header names to strings"),
        ({"X-A": 1}, f"{WHERE}.X-A", "must be a string"),
        ({"X-A": None}, f"{WHERE}.X-A", "must be a string"),
        ({"": "v"}, f"{WHERE}.", "is not a header name (an RFC 9110 token)"),
        ({"X A": "v"}, f"{WHERE}.X A", "is not a header name (an RFC 9110 token)"),
        ({"X-A:": "v"}, f"{WHERE}.X-A:", "is not a header name (an RFC 9110 token)"),
        ({"X-Ä": "v"}, f"{WHERE}.X-Ä", "is not a header name (an RFC 9110 token)"),
        ({"X-A\n": "v"}, f"{WHERE}.X-A\n", "is not a header name (an RFC 9110 token)"),
        ({"X-A": "a\r\nB: 1"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "a\nb"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x00"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x1f"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x7f"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x80"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x9f"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "€"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\u2028"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": " a"}, f"{WHERE}.X-A", "must not begin or end with a space or tab"),
        ({"X-A": "a\t"}, f"{WHERE}.X-A", "must not begin or end with a space or tab"),
        ({"X-A": "1", "x-a": "2"}, f"{WHERE}.x-a",
         "is given twice (names are case-insensitive)"),
        ({f"X-{i}": "v" for i in range(33)}, WHERE, "holds more than 32 headers"),
        ({"X-A": "a" * 16378, "X-B": "b"}, f"{WHERE}.X-B", "the headers exceed 16384 bytes"),
    ],
)  # fmt: skip
def test_a_header_that_is_no_valid_field_is_refused_by_name(
    headers: Any, field: str, message: str
) -> None:
    assert refusal(lambda: uh.checked(headers, WHERE)) == (field, f"{field}: {message}")


def test_the_bounds_themselves_are_allowed() -> None:
    assert len(uh.checked({f"X-{i}": "v" for i in range(32)}, WHERE)) == 32
    assert uh.checked({"X-A": "a" * 16377, "X-B": "b"}, WHERE)["x-b"] == "b"


@pytest.mark.parametrize(
    "name",
    ["Host", "content-length", "Content-Type", "Content-Encoding", "Transfer-Encoding",
     "Connection", "Keep-Alive", "Upgrade", "TE", "Trailer", "Expect", "Accept",
     "Accept-Encoding", "traceparent", "tracestate", "baggage", "Proxy-Authorization",
     "Proxy-Connection", "Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"],
)  # fmt: skip
def test_the_gateways_own_headers_are_refused(name: str) -> None:
    field = f"{WHERE}.{name}"
    assert refusal(lambda: uh.checked({name: "v"}, WHERE)) == (
        field, f"{field}: is a header the gateway sets itself"
    )  # fmt: skip


def test_a_token_is_sent_as_a_bearer_when_it_is_a_field_value() -> None:
    where = "mcp_servers[0].authorization_token"
    assert uh.bearer("tok en", where) == "Bearer tok en"
    assert uh.bearer("t" * 16384, where) == "Bearer " + "t" * 16384
    for token, message in [
        ("", "must be a token"),
        (None, "must be a token"),
        (5, "must be a token"),
        ("t" * 16385, "exceeds 16384 bytes"),
        ("a\r\nb", "is not a header value (a control character, or one Latin-1 lacks)"),
        (" a", "must not begin or end with a space or tab"),
    ]:
        assert refusal(lambda t=token: uh.bearer(t, where)) == (where, f"{where}: {message}")


class Store:
    """The key store's answer for each token asked, and the tokens asked."""

    def __init__(self, *known: str) -> None:
        self.known = set(known)
        self.asked: list[str] = []

    async def __call__(self, token: str) -> bool:
        self.asked.append(token)
        return token in self.known


async def refused_keys(headers: dict[str, str], store: Store) -> tuple[str | None, str]:
    fields = {name: f"{WHERE}.{name}" for name in headers}
    with pytest.raises(InvalidArgument) as refused:
        await uh.refuse_keys(headers, fields, ["config-key-000000000"], store)
    return refused.value.param, refused.value.message


HOLDS = "holds a key of this gateway, which never goes to an MCP server"


@pytest.mark.parametrize(
    "value",
    ["config-key-000000000", "Bearer config-key-000000000", "k=config-key-000000000;x",
     f"Bearer {STORED}", f"{STORED}", f"x{STORED}x", f"gw-api-{STORED}", f"{KEYLIKE} {STORED}"],
)  # fmt: skip
async def test_a_value_holding_a_key_is_refused(value: str) -> None:
    store = Store(STORED)
    headers = {"x-a": "fine", "x-b": value}
    assert await refused_keys(headers, store) == (f"{WHERE}.x-b", f"{WHERE}.x-b: {HOLDS}")


async def test_values_without_keys_pass_with_a_lookup_per_key_shaped_token() -> None:
    store = Store(STORED)
    headers = {"x-a": "Bearer config-key", "x-b": f"{KEYLIKE},{KEYLIKE} gw-api-short",
               "x-c": "gw-user-" + "u" * 43}  # fmt: skip
    await uh.refuse_keys(headers, {n: n for n in headers}, ["config-key-000000000"], store)
    assert store.asked == [KEYLIKE]
    four = " ".join("gw-api-" + c * 43 for c in "abcd")
    await uh.refuse_keys({"x-a": four}, {"x-a": "x-a"}, [], store)
    assert len(store.asked) == 5


async def test_more_key_shaped_tokens_than_lookups_allowed_is_refused_unasked() -> None:
    store = Store()
    five = " ".join("gw-api-" + c * 43 for c in "abcde")
    assert await refused_keys({"x-a": five}, store) == (
        f"{WHERE}.x-a", f"{WHERE}.x-a: holds more than 4 tokens shaped like keys"
    )  # fmt: skip
    assert store.asked == []
    # Overlapping ones count too: each start of a key is a token.
    overlapping = "gw-api-" * 5 + "o" * 43
    assert (await refused_keys({"x-a": overlapping}, store))[0] == f"{WHERE}.x-a"


# -- which servers take headers --------------------------------------------------------

CONFIG = McpConfig(
    servers=[
        McpServerConfig(id="web", transport="http", url="https://mcp.example.com/mcp"),
        McpServerConfig(id="local", transport="stdio", command="python"),
    ],
    remote_urls=["https://partner.example.org/mcp", "https://partner.example.org/mcp/web"],
)
FIELDS = {"authorization": "tools[0].authorization", "x-a": "tools[0].headers.X-A"}


def named(label: str, url: str | None, fields: dict[str, str] = FIELDS) -> Any:
    return server_named(CONFIG, label, url, "tools[0]", "server_label", "server_url", fields)


def test_headers_go_to_a_configured_http_server_or_a_remote() -> None:
    assert named("web", None).id == "web"
    assert named("web", "https://mcp.example.com/mcp").id == "web"
    assert named("partner", "https://partner.example.org/mcp").id == "partner"
    # A remote listed by its URL is that remote, whatever its path says.
    remote = named("other", "https://partner.example.org/mcp/web")
    assert (remote.id, remote.url) == ("other", "https://partner.example.org/mcp/web")


@pytest.mark.parametrize(
    "url", ["gateway:web", "http://127.0.0.1:8080/mcp/web", "/mcp/web/", "gateway:local"]
)
def test_a_server_named_through_the_gateway_takes_no_headers(url: str) -> None:
    param, message = refusal(lambda: named("web", url))
    assert param == "tools[0].authorization"
    assert "which the gateway calls with its configured credentials: it takes no headers" in (
        message
    )
    assert named("web", url, {}).id in ("web", "local")


@pytest.mark.parametrize("label", ["web", "local"])
def test_a_remote_cannot_take_a_configured_servers_id(label: str) -> None:
    assert refusal(lambda: named(label, "https://partner.example.org/mcp", {})) == (
        "tools[0].server_label",
        f"tools[0].server_label: {label!r} is a configured MCP server's id: a remote one "
        "needs a label of its own",
    )


@pytest.mark.parametrize(
    ("url", "server"),
    [("gateway:web", "web"), ("gateway:nowhere", None), ("https://h.example/mcp/web", "web"),
     ("https://h.example/a/mcp/web///", "web"), ("mcp/web", "web"), ("/mcp/local", "local"),
     ("https://h.example/api/web", None), ("https://h.example/mcp/webX", None),
     ("https://h.example/mcp/", None), ("https://h.example/mcp", None),
     ("https://h.example/mcpx/web", None), ("https://h.example/mcp/web/tools", None)],
)  # fmt: skip
def test_the_gateways_own_urls(url: str, server: str | None) -> None:
    found = gateway_named(CONFIG, url)
    assert (found.id if found is not None else None) == server


@pytest.mark.parametrize("url", [None, "gateway:local", "/mcp/local"])
def test_a_stdio_server_takes_no_headers(url: str | None) -> None:
    fields = {"x-a": "tools[0].headers.X-A"}
    param, message = refusal(lambda: named("local", url, fields))
    assert param == "tools[0].headers.X-A"
    assert "takes no headers" in message
    assert named("local", url, {}).transport == "stdio"


class Servers:
    """ToolServers with one configured server: which upstream each listing ran on, and
    the clients made for a request."""

    def __init__(self, config: McpServerConfig) -> None:
        self.configured = type("Configured", (), {"config": config})()
        self.listed_on: list[Any] = []
        self.made: list[McpServerConfig] = []

    def upstream(self, server_id: str) -> Any:
        return self.configured if server_id == self.configured.config.id else None

    def transient(self, config: McpServerConfig, headers: dict[str, str]) -> Any:
        self.made.append(config)
        return type("Transient", (), {"config": config})()

    def retire(self, upstream: Any) -> None:
        pass

    async def refuse_keys(self, headers: dict[str, str], fields: dict[str, str]) -> None:
        pass

    async def listing(self, principal: Any, upstream: Any) -> list[Any]:
        self.listed_on.append(upstream)
        return []


@pytest.mark.parametrize(("transport", "shared"), [("stdio", True), ("http", False)])
async def test_a_stdio_server_changed_by_a_reload_keeps_its_one_child(
    transport: str, shared: bool
) -> None:
    settings: dict[str, Any] = (
        {"command": "python"} if transport == "stdio" else {"url": "https://mcp.example.com/"}
    )
    before = McpServerConfig(id="local", transport=transport, timeout_s=5, **settings)
    now = McpServerConfig(id="local", transport=transport, timeout_s=6, **settings)
    servers = Servers(now)
    await offered(servers, None, [ServerUse("tools[0]", "local", before)])  # type: ignore[arg-type]
    assert (servers.listed_on == [servers.configured]) is shared
    assert servers.made == ([] if shared else [before])
