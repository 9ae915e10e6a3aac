"""A `gateway` that cannot start exits non-zero within seconds, one line saying why and
no traceback, whatever failed and with one worker or several; a stop signal during
start-up ends it too; and PROMETHEUS_MULTIPROC_DIR is created when missing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateways import (
    ROOT,
    children,
    default_config_dict,
    start_process,
    stop_process,
    write_config,
)

# A failing start-up is over in seconds (an unreachable Redis is retried for a few);
# the bound leaves room for a loaded machine's imports (with `--workers 2`, three
# processes' worth; 60 s was passed with two suites at once): a hung process is what
# it catches.
EXIT_DEADLINE_S = 120.0


@contextmanager
def listening() -> Iterator[socket.socket]:
    """A loopback socket that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock
    finally:
        sock.close()


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def launch(tmp_path: Path, data: dict[str, Any], workers: int, env: dict[str, str]):
    path = write_config(tmp_path, data)
    argv = [sys.executable, "-m", "server.cli.main", "--config", str(path)]
    argv += ["--workers", str(workers)]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), **env},
    )  # fmt: skip


def ended(process: subprocess.Popen[str]) -> tuple[int, str]:
    """Waits for the process to exit (killing it past the deadline): its code, stderr."""
    try:
        _, err = process.communicate(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"still running after {EXIT_DEADLINE_S}s:\n{err}")
    return process.returncode, err


def _multiproc_under_a_file(tmp_path: Path, data: dict[str, Any]) -> tuple[dict[str, str], str]:
    (tmp_path / "file").write_text("")
    return {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "file" / "metrics")}, "PROMETHEUS"


def _taken() -> int:
    """A port some other process listens on (closed after the test)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    HELD.append(taken)
    return taken.getsockname()[1]


def _grpc_port_taken(tmp_path: Path, data: dict[str, Any]) -> tuple[dict[str, str], str]:
    data["server"]["grpc_port"] = _taken()
    return {}, "server.grpc_port"


def _http_port_taken(tmp_path: Path, data: dict[str, Any]) -> tuple[dict[str, str], str]:
    data["server"]["http_port"] = _taken()
    return {}, "server.http_port"


def _redis_away(tmp_path: Path, data: dict[str, Any]) -> tuple[dict[str, str], str]:
    data["storage"]["redis_url"] = f"redis://:secret-pw@127.0.0.1:{closed_port()}/0"
    return {}, "storage.redis_url"


def _postgres_away(tmp_path: Path, data: dict[str, Any]) -> tuple[dict[str, str], str]:
    data["storage"]["database_url"] = f"postgresql://u:secret-pw@127.0.0.1:{closed_port()}/db"
    return {}, "storage.database_url"


def _sqlite_under_a_file(tmp_path: Path, data: dict[str, Any]) -> tuple[dict[str, str], str]:
    (tmp_path / "file").write_text("")
    data["storage"]["sqlite_path"] = str(tmp_path / "file" / "gateway.db")
    return {}, "cannot start"


HELD: list[socket.socket] = []
FAILURES: dict[str, Callable[[Path, dict[str, Any]], tuple[dict[str, str], str]]] = {
    "metrics folder": _multiproc_under_a_file,
    "grpc port": _grpc_port_taken,
    "http port": _http_port_taken,
    "redis": _redis_away,
    "postgres": _postgres_away,
    "sqlite": _sqlite_under_a_file,
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_start_up_failure_exits_non_zero_at_once(tmp_path, failure, workers):
    data = default_config_dict()
    try:
        env, expected = FAILURES[failure](tmp_path, data)
        code, err = ended(launch(tmp_path, data, workers, env))
    finally:
        while HELD:
            HELD.pop().close()
    assert code != 0, err
    assert expected in err, err
    assert "Traceback" not in err and "secret-pw" not in err, err


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_during_start_up_ends_the_gateway(tmp_path, workers):
    data = default_config_dict()
    # Start-up waits on a Redis that accepts and never answers, for as long as the
    # storage bound lets it (far longer than this test).
    data["storage"]["timeout_s"] = 300
    with listening() as redis:
        data["storage"]["redis_url"] = f"redis://127.0.0.1:{redis.getsockname()[1]}/0"
        process = launch(tmp_path, data, workers, {})
        redis.settimeout(EXIT_DEADLINE_S)
        conn, _ = redis.accept()  # start-up has reached Redis
        try:
            process.send_signal(signal.SIGTERM)
            code, err = ended(process)
        finally:
            conn.close()
    assert code != 0, err
    assert "Traceback" not in err, err


def test_sigterm_reaches_a_gateway_that_is_a_containers_first_process(tmp_path):
    """PID 1 of a PID namespace gets no signal it has no handler for: a gateway there
    that installed none until serving could not be stopped while starting."""
    unshare = shutil.which("unshare")
    probe = subprocess.run(
        [unshare or "unshare", "--pid", "--fork", "true"], capture_output=True, timeout=30
    )
    if unshare is None or probe.returncode != 0:
        pytest.skip("no PID namespace here (unshare missing or not permitted)")
    data = default_config_dict()
    data["storage"]["timeout_s"] = 300
    with listening() as redis:
        data["storage"]["redis_url"] = f"redis://127.0.0.1:{redis.getsockname()[1]}/0"
        path = write_config(tmp_path, data)
        process = subprocess.Popen(
            [unshare, "--pid", "--fork", "--kill-child", sys.executable, "-m",
             "server.cli.main", "--config", str(path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        redis.settimeout(EXIT_DEADLINE_S)
        conn, _ = redis.accept()  # start-up has reached Redis
        try:
            [first] = children(process.pid)  # the namespace's PID 1
            os.kill(first, signal.SIGTERM)
            code, err = ended(process)
        finally:
            conn.close()
    assert code != 0 and "stopped before it was serving" in err, err


def test_a_missing_multiprocess_folder_is_created(tmp_path):
    folder = tmp_path / "run" / "metrics"
    config = write_config(tmp_path, default_config_dict())
    gw = start_process(
        "--config", str(config),
        env={"PROMETHEUS_MULTIPROC_DIR": str(folder), "XDG_STATE_HOME": str(tmp_path)},
    )  # fmt: skip
    try:
        assert gw.http_port, "".join(gw.output)
        assert any(folder.iterdir())  # the workers' value files
    finally:
        output = stop_process(gw)
    assert gw.process.returncode == 0, output
