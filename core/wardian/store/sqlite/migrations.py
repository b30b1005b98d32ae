"""Versioned schema migrations of the embedded store, and the code that applies them.

Invariant: migration N runs in the same transaction that sets `PRAGMA user_version = N`, so a crash leaves
the store at version N-1 or N, never in between (the sqlite-utils habit).
"""

from __future__ import annotations

import secrets
import sqlite3

from wardian import errors
from wardian.store.sqlite.migrations_from_13 import FROM_13

MIGRATIONS: tuple[str, ...] = (
    # 1: the canonical interaction store.
    """
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value BLOB NOT NULL
    ) STRICT;

    CREATE TABLE agents (
        id INTEGER PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        provider TEXT NOT NULL,
        workspace TEXT,
        status TEXT NOT NULL DEFAULT 'off',
        generation INTEGER NOT NULL DEFAULT 0,
        active_turn_id TEXT,
        thread_id TEXT,
        created_at INTEGER NOT NULL,
        removed_at INTEGER
    ) STRICT;
    CREATE INDEX agents_by_name ON agents(name) WHERE removed_at IS NULL;

    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        agent_id INTEGER NOT NULL REFERENCES agents(id),
        generation INTEGER NOT NULL,
        secret_hash BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    ) STRICT;

    -- One row per information, task, reply or notice. The mailbox order of a recipient is `id`.
    CREATE TABLE interactions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        public_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('information', 'task', 'reply', 'notice')),
        sender_id INTEGER REFERENCES agents(id),
        recipient_id INTEGER NOT NULL REFERENCES agents(id),
        body TEXT NOT NULL,
        request_id TEXT,
        status TEXT CHECK (status IS NULL OR status IN ('done', 'blocked', 'failed')),
        created_at INTEGER NOT NULL,
        acked_at INTEGER
    ) STRICT;
    CREATE INDEX interactions_unacked ON interactions(recipient_id, id) WHERE acked_at IS NULL;

    -- The delivery facts of each task, in a table of their own beside its record.
    CREATE TABLE tasks (
        interaction_id INTEGER PRIMARY KEY REFERENCES interactions(id),
        request_id TEXT NOT NULL UNIQUE,
        requester_id INTEGER NOT NULL REFERENCES agents(id),
        recipient_id INTEGER NOT NULL REFERENCES agents(id),
        state TEXT NOT NULL
            CHECK (state IN ('pending', 'claimed', 'submitted', 'uncertain', 'completed')),
        claimed_by TEXT CHECK (claimed_by IS NULL OR claimed_by IN ('receive', 'dispatch', 'reply')),
        claim_generation INTEGER,
        claimed_at INTEGER,
        submitted_at INTEGER,
        thread_id TEXT,
        turn_id TEXT,
        uncertain_at INTEGER,
        completed_at INTEGER,
        reply_status TEXT,
        reply_id TEXT
    ) STRICT;
    CREATE INDEX tasks_pending ON tasks(recipient_id, interaction_id) WHERE state = 'pending';

    CREATE TABLE interrupts (
        id INTEGER PRIMARY KEY,
        caller_id INTEGER NOT NULL REFERENCES agents(id),
        target_id INTEGER NOT NULL REFERENCES agents(id),
        turn_id TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL
    ) STRICT;
    """,
    # 2: the Codex runtime: managed agents' desired state and launch settings, terminal evidence of tasks,
    # and information pushed into a provider conversation (thread/inject_items).
    """
    ALTER TABLE agents ADD COLUMN desired TEXT NOT NULL DEFAULT 'unmanaged'
        CHECK (desired IN ('unmanaged', 'on', 'off'));
    ALTER TABLE agents ADD COLUMN mode TEXT;
    ALTER TABLE agents ADD COLUMN overrides TEXT;
    ALTER TABLE tasks ADD COLUMN outcome_status TEXT
        CHECK (outcome_status IS NULL OR outcome_status IN ('done', 'blocked', 'failed'));
    ALTER TABLE tasks ADD COLUMN outcome_text TEXT;
    ALTER TABLE tasks ADD COLUMN outcome_at INTEGER;
    CREATE INDEX tasks_by_turn ON tasks(turn_id) WHERE turn_id IS NOT NULL;
    ALTER TABLE interactions ADD COLUMN provider_delivered_at INTEGER;
    """,
    # 3: the mailbox index holds exactly what receive and wait look for. A record pushed into a live
    # provider conversation stays unacknowledged, so with migration 1's index every receive, ack and wait
    # of its recipient stepped over all such records, in the table, before reaching the first unread one.
    """
    DROP INDEX interactions_unacked;
    CREATE INDEX interactions_inbox ON interactions(recipient_id, id)
        WHERE acked_at IS NULL AND provider_delivered_at IS NULL;
    """,
    # 4: how far each agent's waits have reported context pushed into its live conversation, so a push that
    # lands just before a wait starts still ends that wait (wake_reason provider_context_available).
    """
    ALTER TABLE agents ADD COLUMN context_seen_id INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX interactions_pushed ON interactions(recipient_id, id)
        WHERE provider_delivered_at IS NOT NULL AND kind != 'task';
    """,
    # 5: sessions are operator-minted (`wardian agent env`, valid until revoked) or managed (minted by a start,
    # stale once a newer generation starts). A record reaches its recipient through exactly one path: returned by a
    # receive (`received_at`; only such records can be acknowledged) or pushed into the live conversation
    # (`push_state`: sending, then done or uncertain). Tasks keep why they became uncertain and the provider's id
    # of the message that carried them. Records admitted before this version count as received: they were
    # visible to receive, and a page read before the upgrade must stay acknowledgeable.
    """
    ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'operator'
        CHECK (kind IN ('operator', 'managed'));
    ALTER TABLE interactions ADD COLUMN received_at INTEGER;
    ALTER TABLE interactions ADD COLUMN push_state TEXT
        CHECK (push_state IS NULL OR push_state IN ('sending', 'done', 'uncertain'));
    ALTER TABLE interactions ADD COLUMN push_note TEXT;
    ALTER TABLE tasks ADD COLUMN uncertain_reason TEXT;
    ALTER TABLE tasks ADD COLUMN provider_message_id TEXT;
    CREATE INDEX interactions_pushing ON interactions(push_state) WHERE push_state = 'sending';
    UPDATE interactions SET received_at = created_at
        WHERE acked_at IS NULL AND provider_delivered_at IS NULL AND kind != 'task';
    UPDATE interactions SET received_at = created_at WHERE kind = 'task' AND acked_at IS NULL
        AND id IN (SELECT interaction_id FROM tasks WHERE claimed_by = 'receive');
    """,
    # 6: the operator, the person running the agents, is a participant of its own: one reserved row of kind
    # `operator` (the nil UUID, name `operator`) that sends tasks and information and receives the replies to its tasks,
    # but that no roster listing, target or session ever resolves to. An agent named `operator` from before this
    # version stays an agent. The web console's exchange timeline pages through records newest first by id: a kind
    # filter is a range scan of `interactions_by_kind`, which also carries both parties, so a participant filter reads
    # that narrow index (never the records' text) over a bounded window of ids per page; uncertain records are walked
    # through their own small indexes. No index is keyed by participant: each would add a B-tree leaf per sender or
    # recipient to every commit of the send path (measured: about a fifth of the store's throughput each), while
    # `interactions_by_kind` only appends at the end of each kind. The request view finds the interrupts of a turn,
    # and the agents page counts each agent's pending and in-flight tasks, by index too.
    """
    ALTER TABLE agents ADD COLUMN kind TEXT NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent', 'operator'));
    INSERT INTO agents (uuid, name, provider, kind, created_at)
        VALUES ('00000000-0000-0000-0000-000000000000', 'operator', 'operator', 'operator',
                CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
    CREATE INDEX interactions_by_kind ON interactions(kind, id, sender_id, recipient_id);
    CREATE INDEX interactions_push_uncertain ON interactions(id) WHERE push_state = 'uncertain';
    CREATE INDEX tasks_uncertain ON tasks(interaction_id) WHERE state = 'uncertain';
    CREATE INDEX tasks_in_flight ON tasks(recipient_id) WHERE state IN ('claimed', 'submitted');
    CREATE INDEX interrupts_by_turn ON interrupts(turn_id);
    """,
    # 7: a submission whose answer was lost is settled by looking its message up by the id the app chose:
    # `lookup` says whether it was found (the delivery is confirmed) or not (it stays uncertain), `lookup_note` why
    # the answer was lost. The agent list counts each agent's uncertain and lookup-confirmed deliveries by these
    # partial indexes, so its cost follows the number of doubtful tasks, not of tasks.
    """
    ALTER TABLE tasks ADD COLUMN lookup TEXT CHECK (lookup IS NULL OR lookup IN ('confirmed', 'not_found'));
    ALTER TABLE tasks ADD COLUMN lookup_note TEXT;
    CREATE INDEX tasks_uncertain_by_recipient ON tasks(recipient_id) WHERE state = 'uncertain';
    CREATE INDEX tasks_looked_up ON tasks(recipient_id) WHERE lookup = 'confirmed';
    """,
    # 8: hosts. Each app serves one host under a lease it renews (on the embedded store its home lock already
    # makes it the only one); agents belong to the host that added them. Agents from before this version get the
    # host of the first app that runs (an app on this store adopts every agent, see `SqlHosts.claim_host`).
    """
    CREATE TABLE hosts (
        name TEXT PRIMARY KEY,
        lease_owner TEXT,
        lease_expires_at INTEGER,
        heartbeat_at INTEGER,
        started_at INTEGER,
        pid INTEGER,
        machine TEXT,
        home TEXT
    ) STRICT;
    ALTER TABLE agents ADD COLUMN host TEXT REFERENCES hosts(name);
    CREATE INDEX agents_by_host ON agents(host) WHERE removed_at IS NULL;
    """,
    # 9: a conversation that could not be resumed (its provider no longer has it) is replaced by a new one, and that
    # is a fact of the agent: the thread it replaced, when and why. A task whose submission the provider definitely
    # refused (nothing was accepted) goes back to pending and is offered again; it keeps how often that happened and
    # the provider's last words, so its story shows it was never uncertain.
    """
    ALTER TABLE agents ADD COLUMN previous_thread_id TEXT;
    ALTER TABLE agents ADD COLUMN thread_replaced_at INTEGER;
    ALTER TABLE agents ADD COLUMN thread_replaced_reason TEXT;
    ALTER TABLE tasks ADD COLUMN rejections INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN rejection_note TEXT;
    """,
    # 10: sign-in. An agent keeps the name of the credential its starts use (NULL: its provider's default), and when
    # its provider last rejected that credential (cleared by its next start), with the provider's words.
    """
    ALTER TABLE agents ADD COLUMN auth TEXT;
    ALTER TABLE agents ADD COLUMN signed_out_at INTEGER;
    ALTER TABLE agents ADD COLUMN signed_out_reason TEXT;
    """,
    # 11: the tools an agent's last explicit start granted (`agent start --approve-tools`, a JSON array), kept with
    # the agent like its overrides so an app restart or a relaunch for new work grants them again. NULL (an agent
    # of an older store) reads as no grants, which is what such an agent's restart granted before.
    """
    ALTER TABLE agents ADD COLUMN approve_tools TEXT;
    """,
    # 12: a record's receipt (the first time a receive returned it) moves out of the record into a table of its
    # own, keyed by recipient then record, so the first read of a page of 100 writes 100 short rows on one or two
    # leaves instead of a mark on each record's table page (interleaved recipients put every record of a page on
    # a page of its own: about 100 WAL frames and a checkpoint every tenth page). What it means is unchanged: only
    # a received record can be acknowledged, and a received record is never pushed
    # (docs/decisions/0023-receipts-beside-the-records.md). Dropping the column rewrites the records once.
    """
    CREATE TABLE receipts (
        recipient_id INTEGER NOT NULL,
        interaction_id INTEGER NOT NULL,
        received_at INTEGER NOT NULL,
        PRIMARY KEY (recipient_id, interaction_id)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO receipts (recipient_id, interaction_id, received_at)
        SELECT recipient_id, id, received_at FROM interactions WHERE received_at IS NOT NULL;
    ALTER TABLE interactions DROP COLUMN received_at;
    """,
    *FROM_13,
)


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the store at `conn` to this wardian's schema, one migration per transaction.

    Raises: StorageUnavailable (the store's schema is newer than this wardian)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(MIGRATIONS):
        raise errors.StorageUnavailable(
            f"the store has schema version {version}, newer than this wardian understands "
            f"({len(MIGRATIONS)}); upgrade wardian")
    for number in range(version + 1, len(MIGRATIONS) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split_sql(MIGRATIONS[number - 1]):
                conn.execute(statement)
            if number == 1:
                conn.execute("INSERT INTO meta (key, value) VALUES ('epoch', ?), ('cursor_key', ?)",
                             (secrets.token_bytes(8), secrets.token_bytes(32)))
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _split_sql(script: str) -> list[str]:
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements


def load_meta(conn: sqlite3.Connection) -> tuple[bytes, bytes]:
    """The store's epoch and cursor key."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return bytes(meta["epoch"]), bytes(meta["cursor_key"])
