"""pgbouncer in transaction mode on a free loopback port, in front of the test
PostgreSQL (127.0.0.1:5432, trust), started and stopped by the test; skipped, saying
why, where pgbouncer is not installed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

START_DEADLINE_S = 30.0


@contextmanager
def pgbouncer(folder: Path, user: str = "postgres", pool_size: int = 1) -> Iterator[int]:
    """Yields the port pgbouncer listens on; every database name is passed through, on
    `pool_size` server connections each."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.access(binary, os.X_OK):
        pytest.skip("pgbouncer is not installed (Debian package pgbouncer)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        "* = host=127.0.0.1 port=5432\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\n"
        "ignore_startup_parameters = extra_float_digits\n"
    )
    folder.chmod(0o755)  # read by the unprivileged user it runs as
    argv = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        argv += ["-u", "nobody"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    _, err = process.communicate(timeout=5)
                    raise RuntimeError(f"pgbouncer did not start: {err.decode()}") from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
