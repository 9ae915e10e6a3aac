"""The audit log: `gateway audit verify` passes on the chain the admin API wrote and
names the first event edited in the database; a change whose event cannot be written
is not made; paging, filters and the JSON Lines export; a reload on SIGHUP recorded
once; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import yaml

from server.base.config import StorageConfig
from server.storage import open_store
from server.storage.audit import AuditFilter
from tests.support.gateways import (
    ROOT,
    running_gateway,
    start_process,
    stop_process,
    write_config,
)
from tests.support.shared_state import ADMIN_KEY, config_with

ADMIN = {"x-admin-key": ADMIN_KEY}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "sqlite":
        return {"sqlite_path": str(tmp_path / "gw.db")}
    # A database of its own: the test edits the chain, which other tests would see.
    return {"database_url": request.getfixturevalue("pg_url")}


@pytest.fixture
async def database(storage: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """`storage`, on PostgreSQL a fresh database of this test (its chain is edited)."""
    if "database_url" not in storage:
        yield storage
        return
    name = f"gw_audit_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(storage["database_url"])
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = storage["database_url"].rsplit("/", 1)[0] + f"/{name}"
    yield {"database_url": url}
    admin = await asyncpg.connect(storage["database_url"])
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def execute(storage: dict[str, Any], sql: str) -> None:
    if "database_url" in storage:
        conn = await asyncpg.connect(storage["database_url"])
        try:
            await conn.execute(sql)
        finally:
            await conn.close()
        return
    with sqlite3.connect(storage["sqlite_path"]) as conn:
        conn.executescript(sql)


def verify(storage: dict[str, Any], *options: str) -> subprocess.CompletedProcess[str]:
    where = (
        ["--database-url", storage["database_url"]]
        if "database_url" in storage
        else ["--sqlite-path", storage["sqlite_path"]]
    )
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", "audit", "verify", *where, *options],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip


async def test_verify_passes_then_names_the_first_edited_event(database: dict[str, Any]) -> None:
    async with (
        running_gateway(config_with(**database)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        org = (await http.post("/v1/admin/orgs", headers=ADMIN, json={"name": "a"})).json()["org"]
        for name in ("t1", "t2", "t3"):
            made = await http.post("/v1/admin/teams", headers=ADMIN,
                                   json={"org_id": org["id"], "name": name})  # fmt: skip
            assert made.status_code == 200
        await http.post("/v1/admin/keys", headers=ADMIN, json={"name": "k", "kind": "api"})
    result = verify(database)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 events chained" in result.stdout
    # Someone with the database's password widens a team's budget after the fact.
    await execute(
        database,
        'UPDATE audit_events SET after = replace(after, \'"name":"t2"\', \'"name":"t9"\') '
        "WHERE seq = 3",
    )
    result = verify(database)
    assert result.returncode == 1
    assert "audit event 3 (team.create" in result.stdout
    assert "does not match its hash" in result.stdout and "2 events before it fit" in result.stdout
    # An event removed is found too.
    await execute(database, "DELETE FROM audit_events WHERE seq = 3")
    result = verify(database)
    assert result.returncode == 1 and "event 3 is missing" in result.stdout


async def test_a_change_whose_event_cannot_be_written_is_not_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = {"sqlite_path": str(tmp_path / "gw.db")}
    async with (
        running_gateway(config_with(**storage)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        await http.post("/v1/admin/orgs", headers=ADMIN, json={"name": "before"})
        # The audit table refuses every new event from now on.
        await execute(
            storage,
            "CREATE TRIGGER refuse BEFORE INSERT ON audit_events "
            "BEGIN SELECT RAISE(ABORT, 'no'); END;",
        )
        refused = await http.post("/v1/admin/keys", headers=ADMIN,
                                  json={"name": "ghost", "kind": "api"})  # fmt: skip
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "audit_unavailable"
        assert refused.json()["error"]["type"] == "api_error"
        # The operator is told which change could not be recorded, and why.
        said = [r.getMessage() for r in caplog.records if r.name.endswith("governance.audit")]
        assert said == ["audit: cannot record key.create: IntegrityError"]
        org = await http.post("/v1/admin/orgs", headers=ADMIN, json={"name": "ghost-org"})
        assert org.status_code == 503
        await execute(storage, "DROP TRIGGER refuse;")
        keys = await http.get("/v1/admin/keys", headers=ADMIN)
        assert "ghost" not in {k["name"] for k in keys.json()["keys"]}
        orgs = await http.get("/v1/admin/orgs", headers=ADMIN)
        assert [o["name"] for o in orgs.json()["orgs"]] == ["before"]


async def test_paging_filters_and_the_json_lines_export(tmp_path: Path) -> None:
    storage = {"sqlite_path": str(tmp_path / "gw.db")}
    async with (
        running_gateway(config_with(**storage)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        org = (await http.post("/v1/admin/orgs", headers=ADMIN, json={"name": "o"})).json()["org"]
        for i in range(5):
            await http.post("/v1/admin/teams", headers=ADMIN,
                            json={"org_id": org["id"], "name": f"t{i}"})  # fmt: skip
        seen: list[int] = []
        token = ""
        while True:
            page = await http.get("/v1/admin/audit", headers=ADMIN,
                                  params={"page_size": 2, "page_token": token})  # fmt: skip
            seen += [int(e["seq"]) for e in page.json()["events"]]
            token = page.json()["next_page_token"]
            if not token:
                break
        assert seen == [1, 2, 3, 4, 5, 6]
        teams = await http.get("/v1/admin/audit", headers=ADMIN, params={"action": "team."})
        assert [e["action"] for e in teams.json()["events"]] == ["team.create"] * 5
        one = await http.get(
            "/v1/admin/audit", headers=ADMIN, params={"target": f"org:{org['id']}"}
        )
        assert [int(e["seq"]) for e in one.json()["events"]] == [1]
        export = await http.get("/v1/admin/audit", headers=ADMIN,
                                params={"format": "jsonl", "action": "team."})  # fmt: skip
        assert export.status_code == 200, export.text
        assert export.headers["content-type"].startswith("application/jsonl")
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert [e["action"] for e in lines] == ["team.create"] * 5
        assert all(a["hash"] == b["prev_hash"] for a, b in zip(lines, lines[1:], strict=False))
        wrong = await http.get("/v1/admin/audit", headers=ADMIN, params={"format": "csv"})
        assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "format"


async def test_a_reload_on_sighup_is_recorded_once_with_what_changed(tmp_path: Path) -> None:
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    data["operations"] = {"request_log": False}
    path = write_config(tmp_path, data)
    gw = start_process("--config", str(path), "--workers", "2")
    try:
        data["keys"].append({"name": "added", "kind": "api", "secret": "gw-test-added-000000"})
        path.write_text(yaml.safe_dump(data))
        gw.process.send_signal(signal.SIGHUP)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
            events: list[dict[str, Any]] = []
            for _ in range(100):
                reply = await http.get("/v1/admin/audit", headers=ADMIN,
                                       params={"action": "config."})  # fmt: skip
                events = reply.json()["events"]
                if events:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # a second worker's event, if it wrote one, lands
            events = (await http.get("/v1/admin/audit", headers=ADMIN,
                                     params={"action": "config."})).json()["events"]  # fmt: skip
    finally:
        output = stop_process(gw, timeout_s=60)
    assert gw.process.returncode == 0, output
    [event] = events  # both workers reloaded; one recorded it
    assert event["actor"] == "signal:SIGHUP"
    assert "added" not in json.loads(event["before"])["keys"]
    assert "added" in json.loads(event["after"])["keys"]
    assert "gw-test-added" not in json.dumps(event)  # names, never secrets


async def test_the_chain_as_the_store_writes_and_walks_it(tmp_path: Path) -> None:
    store = await open_store(StorageConfig(sqlite_path=str(tmp_path / "chain.db")))
    try:
        audit = store.audit
        assert await audit.verify() == (0, None, "")
        written = []
        for i in range(5):
            async with audit.change() as tx:
                written.append(await audit.append(
                    tx, ts=1000.0 + i, actor="key:a", actor_address="10.0.0.1:5",
                    action="team.update", target=f"team:t{i % 2}", before={"b": i},
                    after={"ü": [i, None]}, request_id=f"r{i}",
                ))  # fmt: skip
        first, second = written[0], written[1]
        assert first.seq == 1 and first.prev_hash == "0" * 64 and second.prev_hash == first.hash
        # The hash is the SHA-256 of the canonical JSON of every field but itself.
        fields = {"seq": 1, "ts": 1000.0, "actor": "key:a", "actor_address": "10.0.0.1:5",
                  "action": "team.update", "target": "team:t0", "before": '{"b":0}',
                  "after": '{"ü":[0,null]}', "request_id": "r0", "prev_hash": "0" * 64}  # fmt: skip
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert first.hash == hashlib.sha256(text.encode()).hexdigest()
        assert await audit.verify(batch=2) == (5, None, "")  # across pages
        page = await audit.page(AuditFilter(target="team:t1"), 0, 10)
        assert [e.seq for e in page] == [2, 4]
        assert [e.seq for e in await audit.page(AuditFilter(start=1002.0, end=1004.0), 0, 10)] == [
            3,
            4,
        ]
        assert [e.seq for e in await audit.page(AuditFilter(action="team."), 3, 1)] == [4]
        assert await audit.page(AuditFilter(action="team.x"), 0, 10) == []
        assert [e.seq for e in await audit.page(AuditFilter(actor="key:a"), 4, 10)] == [5]
        both = AuditFilter(actor="key:a", action="team.", target="team:t0", start=1001.0)
        assert [e.seq for e in await audit.page(both, 0, 10)] == [3, 5]
        assert await audit.page(AuditFilter(actor="key:b"), 0, 10) == []
        # Each kind of tampering, named at the event where the chain stops fitting.
        await store.db.execute("UPDATE audit_events SET prev_hash = ? WHERE seq = 4", "f" * 64)
        checked, broken, why = await audit.verify(batch=2)
        assert (checked, broken.seq if broken else None) == (3, 4)
        assert why == "its prev_hash is not the previous event's hash"
        await store.db.execute("UPDATE audit_events SET actor = 'key:b' WHERE seq = 2")
        checked, broken, why = await audit.verify()
        assert (checked, broken.seq if broken else None, why) == (
            1, 2, "its content does not match its hash",
        )  # fmt: skip
        await store.db.execute("DELETE FROM audit_events WHERE seq = 1")
        checked, broken, why = await audit.verify()
        assert (checked, broken.seq if broken else None, why) == (0, 2, "event 1 is missing")
    finally:
        await store.aclose()


async def test_a_reload_or_switch_the_log_cannot_record_is_not_made(tmp_path: Path) -> None:
    storage = {"sqlite_path": str(tmp_path / "gw.db")}
    data = config_with(**storage)
    data["keys"].append({"name": "doomed", "kind": "api", "secret": "gw-test-doomed-0000000"})
    path = write_config(tmp_path, data)
    gw = start_process("--config", str(path))
    doomed = {"x-api-key": "gw-test-doomed-0000000"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:

            async def enabled() -> bool:
                listing = await http.get("/v1/providers", params={"model": "sim-mini"},
                                         headers=doomed)  # fmt: skip
                return {p["id"]: p["enabled"] for p in listing.json()["providers"]}[
                    "sim-mini-primary"
                ]

            assert (await http.get("/v1/models", headers=doomed)).status_code == 200
            await execute(
                storage,
                "CREATE TRIGGER refuse BEFORE INSERT ON audit_events "
                "BEGIN SELECT RAISE(ABORT, 'no'); END;",
            )
            data["keys"] = [k for k in data["keys"] if k["name"] != "doomed"]
            path.write_text(yaml.safe_dump(data))
            reload = await http.post("/v1/admin/config:reload", headers=ADMIN, json={})
            assert reload.status_code == 503, reload.text
            assert reload.json()["error"]["code"] == "audit_unavailable"
            assert (await http.get("/v1/models", headers=doomed)).status_code == 200
            off = await http.post("/v1/admin/providers/sim-mini-primary:disable", headers=ADMIN,
                                  json={})  # fmt: skip
            assert off.status_code == 503 and off.json()["error"]["code"] == "audit_unavailable"
            assert await enabled()

            await execute(storage, "DROP TRIGGER refuse;")
            events = (await http.get("/v1/admin/audit", headers=ADMIN)).json()["events"]
            assert events == []
            off = await http.post("/v1/admin/providers/sim-mini-primary:disable", headers=ADMIN,
                                  json={})  # fmt: skip
            assert off.status_code == 200 and not await enabled()
            reload = await http.post("/v1/admin/config:reload", headers=ADMIN, json={})
            assert reload.status_code == 200, reload.text
            assert (await http.get("/v1/models", headers=doomed)).status_code == 401
            events = (await http.get("/v1/admin/audit", headers=ADMIN)).json()["events"]
            assert [e["action"] for e in events] == ["provider.disable", "config.reload"]
    finally:
        output = stop_process(gw, timeout_s=60)
    assert "Traceback" not in output


async def test_verify_against_what_was_noted_finds_a_log_cut_short(tmp_path: Path) -> None:
    storage = {"sqlite_path": str(tmp_path / "gw.db")}
    async with (
        running_gateway(config_with(**storage)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        for name in ("a", "b", "c"):
            await http.post("/v1/admin/orgs", headers=ADMIN, json={"name": name})
        events = (await http.get("/v1/admin/audit", headers=ADMIN)).json()["events"]
    noted = ["--count", "3", "--last-hash", events[-1]["hash"]]
    second = ["--count", "2", "--last-hash", events[1]["hash"]]
    assert verify(storage, *noted).returncode == 0
    assert verify(storage, *second).returncode == 0  # the log may have grown since
    mismatched = verify(storage, "--count", "2", "--last-hash", events[-1]["hash"])
    assert mismatched.returncode == 1 and "is event 3's, not event 2's" in mismatched.stdout

    await execute(storage, "DELETE FROM audit_events WHERE seq = 3")
    assert verify(storage).returncode == 0  # the chain alone cannot tell
    for options, why in (
        (noted, "2 events chained, 3 noted"),
        (noted[2:], f"no event has the noted hash {events[-1]['hash']}"),
    ):
        result = verify(storage, *options)
        assert result.returncode == 1, result.stdout
        assert f"audit log not intact (sqlite {storage['sqlite_path']}): {why}" in result.stdout
    assert verify(storage, *second).returncode == 0

    await execute(storage, "DELETE FROM audit_events")
    result = verify(storage, "--count", "1")
    assert result.returncode == 1 and "0 events chained, 1 noted" in result.stdout

    for options, option in ((["--count", "0"], "--count"), (["--last-hash", "ab"], "--last-hash")):
        result = verify(storage, *options)
        assert result.returncode == 2 and f"argument {option}" in result.stderr
