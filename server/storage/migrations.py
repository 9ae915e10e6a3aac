"""Versioned schema migrations.

Each migration runs once, in order, inside one transaction that also records it in
`schema_migrations`; running them again is a no-op. On PostgreSQL an advisory lock
keeps two instances starting together from applying the same migration twice.
Never edit a released migration: add the next one.
"""

from __future__ import annotations

import time

from server.base.config import ConfigError
from server.storage.db import Database, Dialect

# An arbitrary constant naming the migration lock.
LOCK_ID = 0x6761_7465

# Per-dialect spellings, substituted into the SQL below.
TYPES: dict[Dialect, dict[str, str]] = {
    "sqlite": {"serial": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL"},
    "postgresql": {"serial": "BIGSERIAL PRIMARY KEY", "float": "DOUBLE PRECISION"},
}

# A level's budget, rate limits, model allowlist and version (orgs, teams, members).
LIMITS = """budget_usd {float},
                budget_period TEXT NOT NULL DEFAULT 'monthly',
                requests_per_minute INTEGER,
                tokens_per_minute INTEGER,
                models TEXT NOT NULL DEFAULT '',
                version INTEGER NOT NULL DEFAULT 1,
                created_at {float} NOT NULL"""

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "api keys",
        [
            """CREATE TABLE api_keys (
                id TEXT PRIMARY KEY,
                prefix TEXT NOT NULL,
                digest TEXT NOT NULL UNIQUE,
                kind TEXT NOT NULL,
                name TEXT NOT NULL,
                owner TEXT NOT NULL DEFAULT '',
                requests_per_minute INTEGER,
                tokens_per_minute INTEGER,
                budget_usd {float},
                budget_period TEXT NOT NULL DEFAULT 'monthly',
                created_at {float} NOT NULL,
                expires_at {float},
                revoked_at {float}
            )""",
            "CREATE INDEX api_keys_name ON api_keys (name)",
        ],
    ),
    (
        2,
        "usage ledger",
        [
            """CREATE TABLE usage_records (
                id {serial},
                ts {float} NOT NULL,
                request_id TEXT NOT NULL,
                key_id TEXT NOT NULL,
                key_name TEXT NOT NULL,
                method TEXT NOT NULL,
                model TEXT NOT NULL DEFAULT '',
                provider TEXT NOT NULL DEFAULT '',
                prompt_tokens INTEGER NOT NULL DEFAULT 0,
                completion_tokens INTEGER NOT NULL DEFAULT 0,
                total_tokens INTEGER NOT NULL DEFAULT 0,
                input_cost_usd {float},
                output_cost_usd {float},
                cache_input_cost_usd {float},
                total_cost_usd {float},
                latency_ms {float} NOT NULL DEFAULT 0,
                ttft_ms {float},
                status TEXT NOT NULL,
                error_reason TEXT NOT NULL DEFAULT ''
            )""",
            "CREATE INDEX usage_records_key_ts ON usage_records (key_id, ts)",
        ],
    ),
    (
        3,
        "routing decisions and feedback",
        [
            "ALTER TABLE usage_records ADD COLUMN route_profile TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN difficulty {float}",
            # Only when routing.record_prompts is on: the text feedback trains on.
            "ALTER TABLE usage_records ADD COLUMN prompt TEXT",
            "CREATE INDEX usage_records_request ON usage_records (request_id)",
            """CREATE TABLE feedback (
                request_id TEXT PRIMARY KEY,
                key_id TEXT NOT NULL,
                score {float} NOT NULL,
                label TEXT NOT NULL DEFAULT '',
                comment TEXT NOT NULL DEFAULT '',
                ts {float} NOT NULL
            )""",
        ],
    ),
    (
        4,
        "feedback by key and request id",
        [
            # Callers choose their request ids: two keys may use the same one.
            """CREATE TABLE feedback_by_key (
                request_id TEXT NOT NULL,
                key_id TEXT NOT NULL,
                score {float} NOT NULL,
                label TEXT NOT NULL DEFAULT '',
                comment TEXT NOT NULL DEFAULT '',
                ts {float} NOT NULL,
                PRIMARY KEY (key_id, request_id)
            )""",
            "INSERT INTO feedback_by_key (request_id, key_id, score, label, comment, ts) "
            "SELECT request_id, key_id, score, label, comment, ts FROM feedback",
            "DROP TABLE feedback",
            "ALTER TABLE feedback_by_key RENAME TO feedback",
        ],
    ),
    (
        5,
        "stored responses",
        [
            # A Responses API response kept for retrieval and continuation, owned by
            # the key that made it; `context` is the whole conversation it ends.
            """CREATE TABLE stored_responses (
                id TEXT PRIMARY KEY,
                key_id TEXT NOT NULL,
                created_at {float} NOT NULL,
                expires_at {float} NOT NULL,
                provider TEXT NOT NULL DEFAULT '',
                upstream_id TEXT NOT NULL DEFAULT '',
                response TEXT NOT NULL,
                input_items TEXT NOT NULL,
                context TEXT NOT NULL
            )""",
            "CREATE INDEX stored_responses_expires ON stored_responses (expires_at)",
        ],
    ),
    (
        6,
        "prompt-cache tokens and response-cache hits",
        [
            "ALTER TABLE usage_records ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE usage_records ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE usage_records ADD COLUMN cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE usage_records ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE usage_records ADD COLUMN cache_write_cost_usd {float}",
            "ALTER TABLE usage_records ADD COLUMN response_cached BOOLEAN NOT NULL DEFAULT FALSE",
        ],
    ),
    (
        7,
        "MCP tool grants and tool calls",
        [
            # Globs over the MCP tools a key may use, one per line; empty: none.
            "ALTER TABLE api_keys ADD COLUMN mcp_tools TEXT NOT NULL DEFAULT ''",
            # A tool call's row: its server, the tool's name there, how it ended
            # (ok, tool_error, denied...) and the bytes of its result.
            "ALTER TABLE usage_records ADD COLUMN mcp_server TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN mcp_tool TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN mcp_outcome TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN result_bytes INTEGER NOT NULL DEFAULT 0",
        ],
    ),
    (
        8,
        "routing tags",
        [
            # A routed request's tags, comma-separated: what routing learns per kind.
            "ALTER TABLE usage_records ADD COLUMN tags TEXT NOT NULL DEFAULT ''",
        ],
    ),
    (
        9,
        "conversations",
        [
            # A Conversations API conversation, owned by the key that created it, and
            # its items in OpenAI's JSON shape, in the order `seq` gives them.
            """CREATE TABLE conversations (
                id TEXT PRIMARY KEY,
                key_id TEXT NOT NULL,
                created_at {float} NOT NULL,
                metadata TEXT NOT NULL
            )""",
            """CREATE TABLE conversation_items (
                seq {serial},
                conversation_id TEXT NOT NULL,
                item_id TEXT NOT NULL,
                item TEXT NOT NULL
            )""",
            "CREATE INDEX conversation_items_by_conversation "
            "ON conversation_items (conversation_id, seq)",
        ],
    ),
    (
        10,
        "organisations, teams, users and memberships",
        [
            # Each level's budget, rate limits and model allowlist (one id per line;
            # empty: any); `version` grows with every change (the ETag of If-Match).
            f"""CREATE TABLE orgs (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL UNIQUE,
                {LIMITS}
            )""",
            f"""CREATE TABLE teams (
                id TEXT PRIMARY KEY,
                org_id TEXT NOT NULL,
                name TEXT NOT NULL,
                {LIMITS},
                UNIQUE (org_id, name)
            )""",
            # A person, as the identity provider names them (`subject`), or made by an
            # administrator (empty subject until they first sign in).
            """CREATE TABLE users (
                id TEXT PRIMARY KEY,
                subject TEXT NOT NULL DEFAULT '',
                email TEXT NOT NULL DEFAULT '',
                created_at {float} NOT NULL
            )""",
            "CREATE INDEX users_subject ON users (subject)",
            "CREATE INDEX users_email ON users (email)",
            # A user's role in a team (team_id set) or in an organisation (team_id
            # empty: org_admin or viewer), with the member's own budget and limits in
            # that team; `source` says who made it (`admin`, or `oidc` for a group).
            f"""CREATE TABLE memberships (
                org_id TEXT NOT NULL,
                team_id TEXT NOT NULL DEFAULT '',
                user_id TEXT NOT NULL,
                role TEXT NOT NULL,
                source TEXT NOT NULL DEFAULT 'admin',
                {LIMITS},
                PRIMARY KEY (org_id, team_id, user_id)
            )""",
            "ALTER TABLE api_keys ADD COLUMN team_id TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE api_keys ADD COLUMN models TEXT NOT NULL DEFAULT ''",
            "CREATE INDEX api_keys_team ON api_keys (team_id)",
            "ALTER TABLE usage_records ADD COLUMN team_id TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN org_id TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN user_id TEXT NOT NULL DEFAULT ''",
            "CREATE INDEX usage_records_team_ts ON usage_records (team_id, ts)",
            "CREATE INDEX usage_records_org_ts ON usage_records (org_id, ts)",
        ],
    ),
    (
        11,
        "rows of one response",
        [
            # The response a row belongs to: each model round and tool call of a chain
            # the gateway runs inside one model call is a row of its own.
            "ALTER TABLE usage_records ADD COLUMN response_id TEXT NOT NULL DEFAULT ''",
        ],
    ),
    (
        12,
        "audit log",
        [
            # Append-only: each event's `hash` is the SHA-256 of its canonical JSON,
            # which holds the previous event's hash (server/storage/audit.py).
            """CREATE TABLE audit_events (
                seq INTEGER PRIMARY KEY,
                ts {float} NOT NULL,
                actor TEXT NOT NULL,
                actor_address TEXT NOT NULL DEFAULT '',
                action TEXT NOT NULL,
                target TEXT NOT NULL DEFAULT '',
                before TEXT,
                after TEXT,
                request_id TEXT NOT NULL DEFAULT '',
                prev_hash TEXT NOT NULL,
                hash TEXT NOT NULL
            )""",
            "CREATE INDEX audit_events_ts ON audit_events (ts)",
        ],
    ),
    (
        13,
        "admin sign-in",
        [
            # A signed-in user's session, by the SHA-256 of its cookie's secret; the
            # gateway-wide role its groups gave at sign-in; revoked at sign-out.
            """CREATE TABLE admin_sessions (
                digest TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                role TEXT NOT NULL DEFAULT '',
                created_at {float} NOT NULL,
                expires_at {float} NOT NULL,
                revoked_at {float}
            )""",
            "CREATE INDEX admin_sessions_user ON admin_sessions (user_id)",
            # A sign-in under way: its state (by digest), nonce and PKCE verifier, taken
            # once by the callback.
            """CREATE TABLE oidc_logins (
                state TEXT PRIMARY KEY,
                nonce TEXT NOT NULL,
                verifier TEXT NOT NULL,
                created_at {float} NOT NULL
            )""",
        ],
    ),
    (
        14,
        "billing units",
        [
            # What a call is billed in (tokens, seconds, characters, images,
            # search_units) and how many; rows from before are token-billed.
            "ALTER TABLE usage_records ADD COLUMN unit TEXT NOT NULL DEFAULT 'tokens'",
            "ALTER TABLE usage_records ADD COLUMN units {float}",
        ],
    ),
    (
        15,
        "time waited for a rate limit",
        [
            # Milliseconds a call waited for room under `max_wait_s` (part of latency_ms).
            "ALTER TABLE usage_records ADD COLUMN queue_ms {float} NOT NULL DEFAULT 0",
        ],
    ),
    (
        16,
        "budget alerts",
        [
            # One row per threshold a level's spend crossed in a period: its primary key
            # makes each alert once across instances.
            """CREATE TABLE budget_alerts (
                account TEXT NOT NULL,
                period_start {float} NOT NULL,
                threshold {float} NOT NULL,
                ts {float} NOT NULL,
                payload TEXT NOT NULL,
                PRIMARY KEY (account, period_start, threshold)
            )""",
            "CREATE INDEX budget_alerts_ts ON budget_alerts (ts)",
        ],
    ),
    (
        17,
        "shadow traffic",
        [
            # A candidate model's row names the call it shadowed and whether the two
            # answers agreed (and how similar they were).
            "ALTER TABLE usage_records ADD COLUMN shadow_of TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN shadow_agrees BOOLEAN",
            "ALTER TABLE usage_records ADD COLUMN shadow_score {float}",
            "CREATE INDEX usage_records_shadow ON usage_records (shadow_of)",
        ],
    ),
    (
        18,
        "batches and files",
        [
            # An uploaded file, owned by the key that uploaded it; its bytes are in the
            # files folder (server/storage/files.py) under its id.
            """CREATE TABLE files (
                id TEXT PRIMARY KEY,
                key_id TEXT NOT NULL,
                purpose TEXT NOT NULL,
                filename TEXT NOT NULL,
                bytes INTEGER NOT NULL,
                created_at {float} NOT NULL,
                expires_at {float}
            )""",
            "CREATE INDEX files_key ON files (key_id, created_at)",
            # A batch job: what it runs, whose it is (its key's levels), what it may
            # take at most (its lines' tokens and their cost at the batch price, held
            # against budgets while it runs), where it stands, and the instance holding
            # its lease (until `lease_until`) while it runs.
            """CREATE TABLE batches (
                id TEXT PRIMARY KEY,
                key_id TEXT NOT NULL,
                dialect TEXT NOT NULL,
                endpoint TEXT NOT NULL,
                model TEXT NOT NULL,
                input_file_id TEXT NOT NULL DEFAULT '',
                completion_window TEXT NOT NULL DEFAULT '24h',
                metadata TEXT NOT NULL DEFAULT '{{}}',
                status TEXT NOT NULL,
                created_at {float} NOT NULL,
                expires_at {float} NOT NULL,
                in_progress_at {float},
                finalizing_at {float},
                completed_at {float},
                failed_at {float},
                expired_at {float},
                cancelling_at {float},
                cancelled_at {float},
                output_file_id TEXT NOT NULL DEFAULT '',
                error_file_id TEXT NOT NULL DEFAULT '',
                total INTEGER NOT NULL DEFAULT 0,
                team_id TEXT NOT NULL DEFAULT '',
                org_id TEXT NOT NULL DEFAULT '',
                user_id TEXT NOT NULL DEFAULT '',
                tokens INTEGER NOT NULL DEFAULT 0,
                reserved_usd {float} NOT NULL DEFAULT 0,
                lease_owner TEXT NOT NULL DEFAULT '',
                lease_until {float} NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX batches_key ON batches (key_id, created_at)",
            "CREATE INDEX batches_status ON batches (status)",
            # One line of a batch: its request, and once it ended its answer (or error).
            """CREATE TABLE batch_lines (
                batch_id TEXT NOT NULL,
                line INTEGER NOT NULL,
                custom_id TEXT NOT NULL,
                body TEXT NOT NULL,
                status TEXT NOT NULL DEFAULT 'pending',
                status_code INTEGER,
                result TEXT,
                ended_at {float},
                PRIMARY KEY (batch_id, line)
            )""",
            "CREATE INDEX batch_lines_status ON batch_lines (batch_id, status)",
            # A batch line's ledger row names its batch and custom_id; the database
            # takes one such row per line and refuses a second.
            "ALTER TABLE usage_records ADD COLUMN batch_id TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE usage_records ADD COLUMN custom_id TEXT NOT NULL DEFAULT ''",
            "CREATE UNIQUE INDEX usage_records_batch_line ON usage_records "
            "(batch_id, custom_id) WHERE batch_id <> ''",
        ],
    ),
    (
        19,
        "realtime audio",
        [
            # A Realtime response's audio tokens, heard and spoken, and what each cost
            # at the audio prices (parts of the row's tokens and costs).
            "ALTER TABLE usage_records ADD COLUMN audio_input_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE usage_records ADD COLUMN audio_output_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE usage_records ADD COLUMN audio_input_cost_usd {float}",
            "ALTER TABLE usage_records ADD COLUMN audio_output_cost_usd {float}",
        ],
    ),
    (
        20,
        "batches handed to a provider",
        [
            # A batch its model's provider runs with its own batch API: which provider,
            # and the provider's id of the batch once it was handed over.
            "ALTER TABLE batches ADD COLUMN upstream_provider TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE batches ADD COLUMN upstream_id TEXT NOT NULL DEFAULT ''",
        ],
    ),
    (
        21,
        "cached realtime audio",
        [
            # A relayed Realtime response's audio tokens read from the upstream's
            # prompt cache (among cached_tokens and audio_input_tokens).
            "ALTER TABLE usage_records ADD COLUMN cached_audio_tokens INTEGER NOT NULL DEFAULT 0",
        ],
    ),
]


# asyncpg's errors when its named prepared statements meet a server connection another
# client used (pgbouncer in transaction mode), by name: asyncpg is imported only for
# PostgreSQL.
BOUNCED = ("DuplicatePreparedStatementError", "InvalidSQLStatementNameError")


async def migrate(db: Database) -> list[int]:
    """Applies every pending migration; returns the versions applied now. The first
    statements a process sends: where pgbouncer in transaction mode meets a statement
    cache, ConfigError says what to set."""
    try:
        return await _migrate(db)
    except Exception as exc:
        if type(exc).__name__ in BOUNCED:
            raise ConfigError(
                "storage.database_url: the server connection holds another client's "
                "prepared statements, as behind pgbouncer in transaction mode: set "
                "storage.pgbouncer: true"
            ) from None
        raise


async def _migrate(db: Database) -> list[int]:
    floats = TYPES[db.dialect]["float"]
    applied_now = []
    async with db.transaction(lock_id=LOCK_ID) as tx:
        await tx.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            f"version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at {floats} NOT NULL)"
        )
        done = {r["version"] for r in await tx.fetch("SELECT version FROM schema_migrations")}
        for version, name, statements in MIGRATIONS:
            if version in done:
                continue
            for sql in statements:
                await tx.execute(sql.format(**TYPES[db.dialect]))
            await tx.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                version,
                name,
                time.time(),
            )
            applied_now.append(version)
    return applied_now


async def current_version(db: Database) -> int:
    row = await db.fetchrow("SELECT MAX(version) AS v FROM schema_migrations")
    return int(row["v"]) if row and row["v"] is not None else 0
