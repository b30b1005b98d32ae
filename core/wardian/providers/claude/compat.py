"""Which Claude Code CLI versions wardian drives, and what they may do (docs/providers/claude.md).

- Eligible: 2.1.328 or newer (the version every behaviour below was verified with, pinned in package.json): one
  long-lived `claude -p --input-format stream-json --output-format stream-json --verbose` process per agent, a
  client-chosen session id (`--session-id`, then `--resume=<id>`), client-chosen message `uuid`s that it records
  in its transcript, `shouldQuery: false` messages, the `interrupt` control request, and one `result` per turn
  naming the `user_message_uuids` it answered. Pre-releases are refused: nothing says they keep that wire.
- What it may do, stated as capabilities the app reads:
  - steer: a task written while a turn runs is accepted at once and folded into that turn at its next tool
    boundary (else it runs next); its answer is matched by the message uuid, so it needs no turn fence;
  - inject, also while a turn runs: a `shouldQuery: false` message adds information without a model request when
    idle, and is folded into a running turn like a steer;
  - tool grants: Claude Code asks before every MCP tool it has no allow rule for, so `--approve-tools` means
    something (ungranted wardian tools are refused, not silently run);
  - no attached terminal: a second process resuming the app's session would write the same transcript with its
    own, diverging history (Claude Code has no lock between two resumes of one session).
"""

from __future__ import annotations

from wardian.providers.capabilities import Capabilities
from wardian.providers.version import Version, VersionGate

ENV_CLAUDE = "WARDIAN_CLAUDE"
MIN_VERSION = Version(2, 1, 328)
GATE = VersionGate("Claude Code", "claude", "@anthropic-ai/claude-code", ENV_CLAUDE, MIN_VERSION)
NO_ATTACH_REASON = ("a second Claude Code process resuming the app's session would write the same transcript with "
                    "a diverging history; talk to a Claude agent through wardian (message send, task) instead")

parse_claude_version = GATE.parse
"""The version in `claude --version` output (`2.1.328 (Claude Code)`). Raises: Unsupported (no version in it)."""


def capabilities(version: Version) -> Capabilities:
    """What wardian may ask of this Claude Code version.

    Raises:
        Unsupported: older than MIN_VERSION, or a pre-release (the message names WARDIAN_CLAUDE).
    """
    GATE.check(version)
    return Capabilities(steer=True, inject=True, interrupt=True, exact_completion=True, attach=False,
                        inject_while_active=True, tool_grants=True, no_attach_reason=NO_ATTACH_REASON)
