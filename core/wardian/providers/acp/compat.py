"""Which ACP agents wardian drives, at which versions, and what they may do (docs/guide/acp.md).

- Qwen Code: 0.24.4 or newer (pinned in package.json), as `qwen --acp`: `session/new` and `session/load` take
  wardian's MCP server (`mcpServers`), which it connects after the session exists; a turn is one `session/prompt`,
  its end the prompt's `stopReason`; `session/cancel` ends it `cancelled`.
- Gemini CLI: 0.61.0 or newer (pinned), as `gemini --acp`: the same flow; its `session/new` returns once the MCP
  servers are connected, and it drops them silently unless the workspace is trusted (the app trusts its agents'
  workspaces: `GEMINI_CLI_TRUST_WORKSPACE=true`).
- Any other ACP agent (`--provider acp --command "CMD ARGS..."`, e.g. `opencode acp`): the same flow, at any
  version (wardian knows nothing of its releases); it waits for wardian's MCP server as for Qwen Code.
- What each may do, stated as capabilities the app reads:
  - steer, Qwen Code only: it asks the client for queued messages at each tool boundary (`craft/drainMidTurnQueue`),
    and a task handed over there joins the running turn; Gemini CLI has no such hook, so there a task waits for the
    turn's end (a second `session/prompt` would pre-empt the running one);
  - information: ACP has no message that adds to the conversation without a turn, so at idle it stays in the
    mailbox (the agent reads it with its tools); while a Qwen Code turn runs it is handed over at the turn's next
    tool boundary like a steered task, unless a receive took it first (`push_at_boundary`);
  - interrupt and exact completion: the prompt's answer names how its turn ended;
  - tool grants: the agent asks (`session/request_permission`) before every MCP tool in its default approval mode,
    and the app answers for wardian's tools from the agent's `--approve-tools` grants;
  - no attached terminal: the agent's conversation is the app's ACP session.
"""

from __future__ import annotations

from wardian.providers.capabilities import Capabilities
from wardian.providers.version import Version, VersionGate

QWEN_GATE = VersionGate("Qwen Code", "qwen", "@qwen-code/qwen-code", "WARDIAN_QWEN", Version(0, 24, 4))
GEMINI_GATE = VersionGate("Gemini CLI", "gemini", "@google/gemini-cli", "WARDIAN_GEMINI", Version(0, 61, 0))
NO_ATTACH_REASON = ("the agent's conversation is the app's ACP session, which no terminal UI can join; talk to it "
                    "through wardian (message send, task) instead")


def qwen_capabilities(version: Version) -> Capabilities:
    """What wardian may ask of this Qwen Code version. Raises: Unsupported (older than 0.24.4, or a pre-release)."""
    QWEN_GATE.check(version)
    return _acp(steer=True)


def gemini_capabilities(version: Version) -> Capabilities:
    """What wardian may ask of this Gemini CLI version. Raises: Unsupported (older than 0.61.0, or a pre-release)."""
    GEMINI_GATE.check(version)
    return _acp(steer=False)


def generic_capabilities(version: Version) -> Capabilities:
    """What wardian may ask of any other ACP agent (`--provider acp --command ...`), whatever its version: the
    protocol's own turns, cancel and permission requests; no steering, which ACP itself does not define."""
    return _acp(steer=False)


def _acp(*, steer: bool) -> Capabilities:
    # Information joins a running turn the way a steered task does (the drain hook), so only an agent that steers
    # takes it; without a turn nothing adds to an ACP conversation (no inject).
    return Capabilities(steer=steer, inject=False, interrupt=True, exact_completion=True, attach=False,
                        inject_while_active=True, push_at_boundary=steer, tool_grants=True,
                        no_attach_reason=NO_ATTACH_REASON)
