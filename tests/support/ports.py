"""Ports a test names before a process listens on them (a node started again on its own
port, a gateway whose URL is in its own config). A port the kernel handed out at random
(bind to 0) may be handed again to any outgoing connection before the test binds it:
these are picked below the kernel's ephemeral range, where only another test's listener
can take one."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST_PORT = 10_000


def below_ephemeral() -> int:
    """The first port the kernel may hand out as an outgoing connection's own."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def steady_port(companion_offset: int = 0) -> int:
    """A port free now below the ephemeral range (and, with `companion_offset`, the port
    that far above it too: a Redis Cluster node's bus)."""
    top = max(below_ephemeral() - companion_offset, LOWEST_PORT + 1_000)
    while True:
        port = random.randrange(LOWEST_PORT, top)
        if is_free(port) and (not companion_offset or is_free(port + companion_offset)):
            return port
