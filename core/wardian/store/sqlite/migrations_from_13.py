"""The embedded store's migrations from 13 on (the list is `wardian.store.sqlite.migrations.MIGRATIONS`, kept in two
modules so neither grows past what one reader takes in).

Invariant: entries are only appended; entry i is migration 13+i (`FROM_13` is spliced into the full list).
"""

from __future__ import annotations

FROM_13: tuple[str, ...] = (
    # 13: an agent's `--env NAME=VALUE` settings (a JSON array), kept with it like its overrides; NULL (an agent of
    # an older store) reads as none.
    """
    ALTER TABLE agents ADD COLUMN env TEXT;
    """,
    # 14: a generic ACP agent's command line (a JSON array; provider `acp`); NULL for the other providers.
    """
    ALTER TABLE agents ADD COLUMN command TEXT;
    """,
    # 15: the permission requests an agent made that the app answered for nobody (`store.permissions`).
    """
    CREATE TABLE permission_requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id INTEGER NOT NULL REFERENCES agents(id),
        request_id TEXT,
        turn_id TEXT,
        tool TEXT NOT NULL,
        title TEXT NOT NULL,
        options TEXT NOT NULL,
        answer TEXT NOT NULL,
        created_at INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX permission_requests_agent ON permission_requests(agent_id, id);
    """,
    # 16: an agent's git worktree (`store.worktrees`): its repository, branch and base; the agent's workspace is the
    # worktree's path.
    """
    CREATE TABLE worktrees (
        agent_id INTEGER PRIMARY KEY REFERENCES agents(id),
        repo TEXT NOT NULL,
        branch TEXT NOT NULL,
        base TEXT,
        made_branch INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    ) STRICT;
    """,
    # 17: the token usage of each ended turn (NULL counts: its provider reported none) and the tasks it answered
    # (`store.usage`).
    """
    CREATE TABLE turn_usage (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id INTEGER NOT NULL REFERENCES agents(id),
        turn_id TEXT NOT NULL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        cached_tokens INTEGER,
        created_at INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX turn_usage_agent ON turn_usage(agent_id);
    CREATE TABLE task_usage (
        request_id TEXT PRIMARY KEY,
        turn_usage_id INTEGER NOT NULL REFERENCES turn_usage(id)
    ) STRICT;
    """,
    # 18: task deadlines and chains (`store.chains`): a task's deadline, why the app ended it, the task its sender was
    # working on when it made it, its chain's root and its depth; and the team's task policy, key by key.
    """
    ALTER TABLE tasks ADD COLUMN deadline_at INTEGER;
    ALTER TABLE tasks ADD COLUMN end_reason TEXT;
    ALTER TABLE tasks ADD COLUMN parent_request_id TEXT;
    ALTER TABLE tasks ADD COLUMN root_request_id TEXT;
    ALTER TABLE tasks ADD COLUMN depth INTEGER NOT NULL DEFAULT 1;
    CREATE INDEX tasks_open_deadlines ON tasks(deadline_at) WHERE deadline_at IS NOT NULL AND reply_id IS NULL;
    CREATE INDEX tasks_by_root ON tasks(root_request_id) WHERE root_request_id IS NOT NULL;
    CREATE TABLE task_policy (
        key TEXT PRIMARY KEY,
        value INTEGER
    ) STRICT;
    """,
    # 19: approvals (docs/guide/approvals.md): one record per permission request an agent made, pending until a person,
    # the lead, the policy, the deadline or the provider ends it. The permission requests the app refused for nobody
    # become approvals ended `denied` by the policy, so there is one record kind. An agent's approval policy and
    # deadline are kept with it like its `-c` settings (NULL: deny, and the default deadline).
    """
    CREATE TABLE approvals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        public_id TEXT NOT NULL UNIQUE,
        agent_id INTEGER NOT NULL REFERENCES agents(id),
        request_id TEXT,
        turn_id TEXT,
        kind TEXT NOT NULL,
        tool TEXT,
        summary TEXT NOT NULL,
        detail TEXT NOT NULL,
        options TEXT NOT NULL,
        policy TEXT NOT NULL,
        answerer_id INTEGER REFERENCES agents(id),
        deadline_at INTEGER,
        status TEXT NOT NULL,
        decided_by TEXT,
        always INTEGER NOT NULL DEFAULT 0,
        reason TEXT,
        created_at INTEGER NOT NULL,
        ended_at INTEGER
    ) STRICT;
    CREATE INDEX approvals_agent ON approvals(agent_id, id);
    CREATE INDEX approvals_pending ON approvals(status) WHERE status = 'pending';
    INSERT INTO approvals (public_id, agent_id, request_id, turn_id, kind, tool, summary, detail, options, policy,
                           status, decided_by, created_at, ended_at)
        SELECT 'apr_' || printf('%011x', created_at) || lower(hex(randomblob(8))), agent_id, request_id, turn_id,
               'tool', tool, title, '{}', options, 'deny', 'denied', 'policy', created_at, created_at
        FROM permission_requests ORDER BY id;
    DROP TABLE permission_requests;
    ALTER TABLE agents ADD COLUMN approvals TEXT;
    ALTER TABLE agents ADD COLUMN approval_timeout_ms INTEGER;
    """,
    # 20: an agent's allow rules (a JSON array; docs/guide/approvals.md#allow-rules), kept with it like its
    # approval policy; NULL (an agent of an older store, or never given) reads as none.
    """
    ALTER TABLE agents ADD COLUMN allow_rules TEXT;
    """,
    # 21: the deadlock guard reads the open tasks an agent waiting in `mailbox/wait` assigned (`chains.open_tasks_of`):
    # by requester, among the open ones only, so its cost follows the waiting agents' open tasks, not the store.
    """
    CREATE INDEX tasks_open_by_requester ON tasks(requester_id) WHERE reply_id IS NULL;
    """,
)
