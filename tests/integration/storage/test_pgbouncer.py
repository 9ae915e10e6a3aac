"""PostgreSQL behind pgbouncer in transaction mode (`storage.pgbouncer: true`): a
`gateway migrate` and then two gateway processes share pgbouncer's one server
connection (as replicas share a pool), every call is answered and every ledger row
written. Without the setting the second process to prepare a statement there meets
the first one's of the same name (DuplicatePreparedStatementError)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from tests.support.gateways import API_KEY, ROOT, start_process, stop_process, write_config
from tests.support.pgbouncer import pgbouncer
from tests.support.shared_state import config_with, fresh_database

pytestmark = pytest.mark.postgres

CALLS = 20
HELLO = {"model": "sim-mini", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 5}


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A database of this test's own (its ledger rows are all this test's)."""
    async with fresh_database("gw_bouncer_") as name:
        yield name


def migrate(config: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", "migrate", "--config", config],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip


async def test_without_the_setting_the_second_client_is_told_what_to_set(tmp_path, database):
    with pgbouncer(tmp_path) as port:
        data = config_with(database_url=f"postgresql://postgres@127.0.0.1:{port}/{database}")
        config = str(write_config(tmp_path, data))
        assert migrate(config).returncode == 0
        again = migrate(config)  # its statements' names are the first one's
    assert again.returncode != 0
    assert "storage.pgbouncer: true" in again.stderr and "Traceback" not in again.stderr


async def test_two_gateways_run_behind_pgbouncer_in_transaction_mode(tmp_path, database):
    with pgbouncer(tmp_path) as port:
        data = config_with(database_url=f"postgresql://postgres@127.0.0.1:{port}/{database}")
        data["storage"]["pgbouncer"] = True
        config = str(write_config(tmp_path, data))
        migrated = migrate(config)
        assert migrated.returncode == 0, migrated.stderr
        gateways = [start_process("--config", config) for _ in range(2)]
        try:
            for gw in gateways:
                assert gw.http_port, "".join(gw.output)
            async with httpx.AsyncClient(
                timeout=30, headers={"authorization": f"Bearer {API_KEY}"}
            ) as http:
                replies = await asyncio.gather(*(
                    http.post(
                        f"http://127.0.0.1:{gateways[i % 2].http_port}/v1/chat/completions",
                        json=HELLO,
                    )
                    for i in range(CALLS)
                ))  # fmt: skip
            assert [r.status_code for r in replies] == [200] * CALLS, replies[0].text
        finally:
            outputs = [stop_process(gw) for gw in gateways]
        assert [gw.process.returncode for gw in gateways] == [0, 0], outputs
    # Each drained its ledger at SIGTERM; read straight from PostgreSQL.
    conn = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:5432/{database}")
    try:
        assert await conn.fetchval("SELECT count(*) FROM usage_records") == CALLS
    finally:
        await conn.close()
