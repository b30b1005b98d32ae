"""Named crash points for the reliability suites (reliability row D3, docs/reliability.md).

`WARDIAN_CRASHPOINT=<name>` makes the process exit at once (status 137, as after SIGKILL, with no cleanup
and no flush) when it reaches that point. Unset, a crash point costs one dict lookup.
"""

from __future__ import annotations

import os

ENV = "WARDIAN_CRASHPOINT"
POINTS = frozenset({
    # The admission path (app/server.py, store/store.py).
    "before_begin",
    "after_insert_before_commit",
    "after_commit_before_reply_write",
    "after_reply_write",
    # The provider runtime (app/runtime/).
    "after_claim_before_provider_submit",
    "after_provider_submit_before_ack_persist",
    "after_terminal_evidence_before_reply_publish",
    # An ACP agent answered a prompt; the app has not yet seen it (providers/acp/runtime.py).
    "after_provider_answer_before_outcome",
})
_ACTIVE = os.environ.get(ENV, "")


def crashpoint(name: str) -> None:
    """Die here when WARDIAN_CRASHPOINT names this point."""
    if _ACTIVE and name == _ACTIVE:
        os._exit(137)
