"""The Redis client for `storage.redis_url`, by the URL's scheme:

- `redis://[:password@]host:port/db` (or `rediss://`, `unix://`): one server;
- `redis+cluster://[:password@]host:port[,host:port...]`: a Redis Cluster, found from
  any of the nodes named; each command goes to the node holding its key's slot. The
  gateway's keys put everything one call touches in one slot (a hash tag per
  organisation, or per key without one), so every Lua script runs on one node;
- `redis+sentinel://[:password@]host:port[,host:port...]/service[/db]`: the primary
  that the Sentinels name for `service`, asked again after a failover (the password
  is the primary's; the Sentinels are asked without one).

Every client bounds each command by `timeout_s`, and waits for a free connection
rather than refusing when `max_connections` are busy.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

CLUSTER = "redis+cluster"
SENTINEL = "redis+sentinel"


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """The Sentinel-managed pool that waits for a free connection (BlockingConnectionPool's
    get_connection and release) instead of refusing one when all are busy."""


class _BoundedCluster(RedisCluster):
    """A cluster client whose commands wait for one of `max_connections` turns: the
    cluster's own pools refuse (MaxConnectionsError) when a node's are all busy."""

    def __init__(self, *, max_connections: int, **kwargs: Any) -> None:
        super().__init__(max_connections=max_connections, **kwargs)
        self._turns = asyncio.Semaphore(max_connections)

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        async with self._turns:
            try:
                return await super().execute_command(*args, **kwargs)
            except (AttributeError, TypeError) as exc:
                # The cluster client can close a connection while another command is
                # still opening it (seen on a loaded machine): the write then fails on
                # a stream already gone, before anything reached Redis, so the
                # command is sent once more, on a fresh connection.
                if not _torn_down(exc):
                    raise
                return await super().execute_command(*args, **kwargs)


def _torn_down(exc: BaseException) -> bool:
    """Whether `exc` was raised writing to a connection's stream after it was closed
    (its writer or transport gone), inside the Redis client or asyncio's streams."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    where = frame.tb_frame.f_code.co_filename if frame is not None else ""
    return "NoneType" in str(exc) and where.endswith(
        ("redis/asyncio/connection.py", "asyncio/streams.py", "asyncio/selector_events.py")
    )


def client_for(url: str, timeout_s: float, max_connections: int) -> Any:
    """The client `url` names; ValueError saying what is wrong with it."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    bounds: dict[str, Any] = {
        "socket_timeout": timeout_s, "socket_connect_timeout": timeout_s,
    }  # fmt: skip
    if scheme == CLUSTER:
        username, password, nodes, _ = _parts(url)
        return _BoundedCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in nodes],
            username=username, password=password, max_connections=max_connections,
            **bounds,
        )  # fmt: skip
    if scheme == SENTINEL:
        username, password, nodes, path = _parts(url)
        service, _, db = path.partition("/")
        if not service:
            raise ValueError("redis+sentinel:// needs the service name: .../service_name")
        if db and not db.isdigit():
            raise ValueError(f"redis+sentinel://: database {db!r} is not a number")
        sentinel = Sentinel(nodes, sentinel_kwargs=bounds, **bounds)
        # A command that met the old primary (now a replica) is sent once more, to
        # the primary the Sentinels name now.
        return sentinel.master_for(
            service, redis_class=Redis, connection_pool_class=_BlockingSentinelPool,
            username=username, password=password, db=int(db or 0),
            max_connections=max_connections, timeout=timeout_s,
            retry=Retry(NoBackoff(), 1), retry_on_error=[RedisConnectionError],
            **bounds,
        )  # fmt: skip
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout_s, **bounds
    )
    return Redis.from_pool(pool)  # closed with the client


def _parts(url: str) -> tuple[str | None, str | None, list[tuple[str, int]], str]:
    """(username, password, [(host, port)...], path without its first slash)."""
    parts = urlsplit(url)
    auth, _, hosts = parts.netloc.rpartition("@")
    username, _, password = auth.partition(":") if auth else ("", "", "")
    nodes = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{parts.scheme}://: {item!r} is not host:port")
        nodes.append((host.strip("[]"), int(port)))
    return (
        unquote(username) or None, unquote(password) or None, nodes, parts.path.lstrip("/")
    )  # fmt: skip
